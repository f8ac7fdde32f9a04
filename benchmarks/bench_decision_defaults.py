"""Which decision settings to default to (issue 44, item 5): the per-question decisions of a finished
run's audited model, its whole audited set decided at once as ``lara run`` decides it, under each
alternative a config can choose — the FDR procedure (BH, Benjamini–Krieger–Yekutieli's two-stage,
Storey's adaptive BH), the controls the detectors that do not sample score, the controls the
sampling ones score, and which detectors are scored on controls.

    python benchmarks/bench_decision_defaults.py [--config configs/demo.yaml ...] [--set KEY=VALUE ...] [--fdr 0.10]

For each testbed (a config whose run has finished; run it first) and each alternative it prints,
with the labels (never used by the decisions): the questions flagged, the members among them, the
false-discovery proportion, the "at least k" bound, and the cost — the controls scored per
question by one forward pass each (the likelihood family) and by sampling (n samples per control,
from the audited and the reference model). The alternatives read the controls the run scored, so
a run with 20 decision and 5 sampling controls shows every count up to those; an alternative that
needs more than its run scored is shown as such. The figures in docs/verdicts.md come from such a
wide run of each demo (``--set`` applies to every config, as ``lara run``'s does):

    lara run configs/demo.yaml --set run_dir=runs/demo-wide \
        --set calibration.decision_controls=20 --set calibration.sampling_controls=5
    python benchmarks/bench_decision_defaults.py --config configs/demo.yaml --set run_dir=runs/demo-wide \
        --set calibration.decision_controls=20 --set calibration.sampling_controls=5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_verdict import scored  # noqa: E402  (the scores and controls as lara run reads them)

from probes.detectors import REGISTRY  # noqa: E402
from probes.pipeline import load_run_config  # noqa: E402
from probes.scorefiles import ScoredSet  # noqa: E402
from probes.verdicts.decisions import decide_questions  # noqa: E402

LIKELIHOOD = ("ppl", "min_k", "zlib", "recall")


@dataclasses.dataclass
class Alternative:
    name: str
    method: str = "bh"
    decision: int = 20  # controls of the detectors that do not sample
    sampling: int = 5  # controls of those that sample
    detectors: tuple[str, ...] | None = None  # None: every detector the verdict combines


ALTERNATIVES = [
    Alternative("10 / 3 controls, Storey (the defaults)", method="storey", decision=10, sampling=3),
    Alternative("20 / 5 controls, BH (the demo's before)"),
    Alternative("20 / 5 controls, two-stage", method="two-stage"),
    Alternative("20 / 5 controls, Storey", method="storey"),
    Alternative("3 / 3 controls, BH (the defaults before)", decision=3, sampling=3),
    Alternative("3 / 3 controls, Storey", method="storey", decision=3, sampling=3),
    Alternative("20 / 3 controls, Storey", method="storey", sampling=3),
    Alternative("10 / 5 controls, Storey", method="storey", decision=10),
    Alternative("5 / 3 controls, Storey", method="storey", decision=5, sampling=3),
    Alternative("likelihood family only, 20, BH", detectors=LIKELIHOOD),
    Alternative("likelihood family only, 20, Storey", method="storey", detectors=LIKELIHOOD),
]


@dataclasses.dataclass
class PerDetectorLimit(ScoredSet):
    """A scored set whose sampling detectors read only their first ``sampling`` controls and the
    others their first ``decision`` ones."""

    decision: int = 20
    sampling: int = 5

    def subset(self, ids) -> "PerDetectorLimit":
        return dataclasses.replace(self, ids=list(ids))

    def control_matrix(self, name: str, width: int | None = None) -> np.ndarray:
        matrix = super().control_matrix(name, width)
        limit = self.sampling if samples(name) else self.decision
        matrix[:, limit:] = np.nan
        return matrix


def samples(name: str) -> bool:
    """Whether a detector samples to score a text (costly per control) rather than one forward pass."""
    detector = REGISTRY.get(name.split("@")[0])
    return detector is not None and detector.samples_at_temperature  # as ControlPlan and lara run's cost line read it


def limited(s: ScoredSet, alt: Alternative) -> ScoredSet:
    return PerDetectorLimit(
        s.scores, s.controls, list(s.ids), s.settings, s.prompt_format, None, alt.decision, alt.sampling
    )


def testbed_rows(config_path: Path, fdr: float, sets: list[str]) -> list[dict]:
    config = load_run_config(config_path, sets)
    run_dir = Path(config.run_dir)
    name, reference = config.name, config.reference_name()
    if not (run_dir / name / "verdict.json").is_file():
        raise SystemExit(f"{run_dir} has no finished run: lara run {config_path} first")
    verdict = json.loads((run_dir / name / "verdict.json").read_text())
    audited_all, ref_all = scored(run_dir, name), scored(run_dir, reference)
    questions = [json.loads(line) for line in Path(config.questions).read_text().splitlines() if line.strip()]
    audited_ids = [q["id"] for q in questions if q.get("split") != "clean_ref"]
    labels = {q["id"]: q.get("label") for q in questions}
    c = config.calibration
    scored_counts = (c.decision_controls or c.controls, max(c.controls, c.sampling_controls or 0))
    rows = []
    for alt in ALTERNATIVES:
        if alt.decision > scored_counts[0] or alt.sampling > scored_counts[1]:
            rows.append(
                {
                    "alternative": alt.name,
                    "missing": f"needs more controls than the run scored ({scored_counts[0]} / {scored_counts[1]})",
                }
            )
            continue
        names = [d for d in verdict["combined"]["detectors"] if alt.detectors is None or d in alt.detectors]
        settings = dataclasses.replace(config.verdict, fdr=fdr, fdr_method=alt.method)
        start = time.perf_counter()
        d = decide_questions(
            {"mode": verdict["mode"], "combined": {"detectors": names}},
            limited(audited_all.subset(audited_ids), alt),
            limited(ref_all.subset(audited_ids), alt) if verdict["mode"] == "reference" else None,
            None,
            settings,
        )
        flagged = [i for i, f in zip(d.ids, d.flagged) if f]
        members = sum(labels.get(i) == 1 for i in flagged)
        rows.append(
            {
                "alternative": alt.name,
                "flagged": len(flagged),
                "members": members,
                "fdp": (len(flagged) - members) / max(len(flagged), 1),
                "at_least": d.at_least,
                "untested": int(np.isnan(d.p_value).sum()),  # no p-value: no detector has a residual for it
                "passes": sum(alt.decision for n in names if not samples(n)),
                "sampled": sum(alt.sampling for n in names if samples(n)),
                "seconds": time.perf_counter() - start,
                "n": len(d.ids),
                "n_members": sum(labels.get(i) == 1 for i in d.ids),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, action="append", help="a finished run's config (repeatable)")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE", help="as lara run's")
    parser.add_argument("--fdr", type=float, default=0.10)
    args = parser.parse_args()
    configs = args.config or [ROOT / "configs" / "demo.yaml"]
    for path in configs:
        rows = testbed_rows(path, args.fdr, args.sets)
        first = next(r for r in rows if "missing" not in r)
        print(
            f"\n{path.name}: the audited model's {first['n']} questions ({first['n_members']} members), decided at "
            f"q = {args.fdr} in one pass"
        )
        print(
            f"  {'alternative':<42}{'flagged':>8}{'members':>8}{'FDP':>7}{'at least':>9}"
            f"{'untested':>9}{'passes/q':>9}{'sampled/q':>10}"
        )
        for r in rows:
            if "missing" in r:
                print(f"  {r['alternative']:<42}  {r['missing']}")
                continue
            print(
                f"  {r['alternative']:<42}{r['flagged']:>8}{r['members']:>8}{r['fdp']:>7.2f}{r['at_least']:>9}"
                f"{r['untested']:>9}{r['passes']:>9}{r['sampled']:>10}"
            )
    print(
        "\nuntested: questions left without a p-value (no detector the alternative uses has a residual for them); "
        "passes/q: controls per question scored by one forward pass (per detector of the likelihood family); "
        "sampled/q: controls per question scored by sampling (n samples each, from both models)"
    )


if __name__ == "__main__":
    main()
