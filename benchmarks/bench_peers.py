"""A peer, side by side: benchleak 0.4.0's detectors and our verdicts on the same checkpoints and
questions of the shipped testbeds (the real-model one needs the smollm extra).

    pip install -c constraints.txt -e ".[peers]"      # benchleak==0.4.0 (never in the default install)
    lara run configs/demo.yaml && lara run configs/demo-gsm.yaml     # our verdicts (skipped if absent)
    python benchmarks/bench_peers.py [--limit 150] [--detectors pretrain,sft,rl]

benchleak scores a benchmark and a reference set with one detector — Min-K% (``pretrain``),
probabilistic variation / SPV-MIA (``sft``, with its model-free word-swap paraphraser: the T5 one
needs a download) or Self-Critique (``rl``) — and flags contamination when the benchmark's scores
exceed the reference's with AUC ≥ 0.6 and a one-sided Mann–Whitney p < 0.05. It is run here
through its own Python API, on each testbed's RL checkpoint (GRPO'd on the members) and SFT
checkpoint (before RL: nothing to find), on the members and on the non-members, against each
reference: its bundled math word problems, and our testbed's clean set (``split: clean_ref``,
problems of the same templates). The Self-Critique generation length is what the 256-position
models allow (48 new tokens, prompts truncated to 208). Our rows are read from ``lara run``'s
``verdict.json`` (its ``members`` / ``non_members`` subsets): the decisive mode, the combined p,
and Min-K%'s within-AUC (original vs its own matched controls) for comparison.

The right answer in every row is known: RL × members is contaminated, every other row is not.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTBEDS = {
    "cpu-seed0": ROOT / "runs/demo",
    "gsm-seed0": ROOT / "runs/demo-gsm",
    "smollm-seed0": ROOT / "runs/demo-smollm",
}
CHECKPOINTS = {"rl": "rl", "sft": "sft_control"}  # checkpoint dir → its name in the lara run
SETS = {"members": 1, "non-members": 0}
NEW_TOKENS, POSITIONS = 48, 256


def questions(testbed: str) -> dict[str, list[str]]:
    rows = [
        json.loads(x)
        for x in (ROOT / "probes/testbed/checkpoints" / testbed / "questions.jsonl").read_text().splitlines()
    ]
    out = {name: [r["question"] for r in rows if r.get("label") == label] for name, label in SETS.items()}
    out["clean_ref"] = [r["question"] for r in rows if r.get("split") == "clean_ref"]
    return out


def checkpoint_path(testbed: str, checkpoint: str) -> Path:
    """A testbed checkpoint as a plain Hugging Face directory: the shipped one, or (the real-model
    testbed's LoRA adapters) the toolkit's merged copy of it, which benchleak loads like any other."""
    path = ROOT / "probes/testbed/checkpoints" / testbed / checkpoint
    if (path / "config.json").is_file():
        return path
    from cache.config import ModelConfig
    from cache.loading import checkpoint_directory

    return Path(checkpoint_directory(ModelConfig(source=str(path))))


def detector(kind: str, model, tokenizer):
    from benchleak.detectors.perturb import WordSwapPerturber
    from benchleak.detectors.pretrain import MinKProbDetector
    from benchleak.detectors.rl import SelfCritiqueDetector
    from benchleak.detectors.sft import ProbVariationDetector

    if kind == "pretrain":
        return MinKProbDetector(model, tokenizer, max_length=POSITIONS)
    if kind == "sft":
        return ProbVariationDetector(model, tokenizer, WordSwapPerturber(seed=0), max_length=POSITIONS)
    return SelfCritiqueDetector(model, tokenizer, max_new_tokens=NEW_TOKENS, max_length=POSITIONS - NEW_TOKENS)


def peer_rows(testbed: str, kinds: list[str], limit: int) -> list[dict]:
    """benchleak's verdict, AUC and p for every checkpoint × set × detector × reference."""
    import torch
    from benchleak.core import ContaminationResult, compare_distributions
    from benchleak.data import load_reference
    from transformers import AutoModelForCausalLM, AutoTokenizer

    texts = {k: v[:limit] for k, v in questions(testbed).items()}
    references = {"bundled math": load_reference(None, limit=limit, domain="math"), "our clean set": texts["clean_ref"]}
    rows = []
    for checkpoint in CHECKPOINTS:
        path = checkpoint_path(testbed, checkpoint)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        for kind in kinds:
            scorer = detector(kind, model, tokenizer)
            torch.manual_seed(0)
            scored = {name: scorer.score_batch(v) for name, v in {**{s: texts[s] for s in SETS}, **references}.items()}
            for set_name in SETS:
                for ref_name in references:
                    auc, p = compare_distributions(scored[set_name], scored[ref_name])
                    flagged = ContaminationResult(kind, set_name, [], [], auc, p).contaminated
                    rows.append(
                        {
                            "testbed": testbed,
                            "checkpoint": checkpoint,
                            "set": set_name,
                            "tool": f"benchleak {kind}, ref: {ref_name}",
                            "verdict": "LIKELY CONTAMINATED" if flagged else "NO STRONG EVIDENCE",
                            "auc": auc,
                            "p": p,
                            "n": f"{len(scored[set_name])} vs {len(scored[ref_name])}",
                        }
                    )
    return rows


def default_length_check(testbed: str) -> str:
    """What benchleak's Self-Critique does at its default generation length on a 256-position model."""
    import torch
    from benchleak.detectors.rl import SelfCritiqueDetector
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = checkpoint_path(testbed, "rl")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    try:
        SelfCritiqueDetector(model, tokenizer).score(questions(testbed)["members"][0])
    except Exception as err:  # the peer's own failure, reported as it reads
        return f"stops: {type(err).__name__}: {str(err).splitlines()[0][:120]}"
    return "runs"


def our_rows(testbed: str) -> list[dict]:
    run = TESTBEDS[testbed]
    rows = []
    for checkpoint, name in CHECKPOINTS.items():
        path = run / name / "verdict.json"
        if not path.is_file():
            print(f"  ({path} missing: run `lara run` for {testbed} to add our rows)")
            continue
        verdict = json.loads(path.read_text())
        for set_name, key in (("members", "members"), ("non-members", "non_members")):
            sub = verdict["subsets"][key]
            mode = sub["modes"][sub["mode"]] if "mode" in sub else sub["modes"][verdict["mode"]]
            mode_name = sub.get("mode", verdict["mode"])
            min_k = (mode.get("detectors") or {}).get("min_k", {})
            rows.append(
                {
                    "testbed": testbed,
                    "checkpoint": checkpoint,
                    "set": set_name,
                    "tool": f"lara verdict ({mode_name} mode)",
                    "verdict": "CONTAMINATED" if mode["reject"] else "not flagged",
                    "auc": (min_k.get("within_auc") or {}).get("value"),
                    "p": mode["combined"]["p_value"],
                    "n": f"{sub['n']} (+ controls)",
                }
            )
    return rows


def truth(row: dict) -> bool:
    return row["checkpoint"] == "rl" and row["set"] == "members"


def print_table(rows: list[dict]) -> None:
    print("| testbed | checkpoint | questions | tool | verdict | AUC | p | n | right? |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        flagged = r["verdict"] in ("LIKELY CONTAMINATED", "CONTAMINATED")
        auc = "–" if r["auc"] is None else f"{r['auc']:.3f}"
        print(
            f"| {r['testbed']} | {r['checkpoint']} | {r['set']} | {r['tool']} | {r['verdict']} | {auc} | "
            f"{r['p']:.2g} | {r['n']} | {'yes' if flagged == truth(r) else '**no**'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--limit", type=int, default=150, help="questions per set (the testbeds have 150 members, 150 non-members)"
    )
    parser.add_argument("--detectors", default="pretrain,sft,rl", help="benchleak detectors to run")
    parser.add_argument("--testbeds", default=",".join(TESTBEDS), help="shipped testbeds")
    args = parser.parse_args()
    try:
        import benchleak
    except ImportError:
        raise SystemExit('benchleak is not installed: pip install -c constraints.txt -e ".[peers]"') from None
    t0 = time.perf_counter()
    rows = []
    for testbed in args.testbeds.split(","):
        print(f"{testbed}: benchleak {benchleak.__version__} ...", flush=True)
        rows += our_rows(testbed) + peer_rows(testbed, args.detectors.split(","), args.limit)
        print(
            f"  benchleak rl at its default max_new_tokens (256) on the {testbed} RL checkpoint: "
            f"{default_length_check(testbed)}",
            flush=True,
        )
    print()
    print_table(rows)
    for tool in sorted({r["tool"] for r in rows}):
        mine = [r for r in rows if r["tool"] == tool]
        right = sum((r["verdict"] in ("LIKELY CONTAMINATED", "CONTAMINATED")) == truth(r) for r in mine)
        print(f"  {tool}: {right} of {len(mine)} rows right")
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
