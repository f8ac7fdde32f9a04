"""AUC of every output-level detector on the text-memorisation testbed, for several training seeds.

    python benchmarks/bench_memorised.py [--seeds 0,1,2] [--out DIR]

A tiny GPT-2 memorises 24 member texts (question + arbitrary answer, LM loss on the whole text,
200 CPU steps) among 48 fillers; it is audited on the 24 members against 24 unseen texts of the
same form, every detector with its defaults through the local responder (``ref`` against the same
model before its training). Prints one row per detector and one column per seed (the README's
table comes from here). About a minute per seed on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from sklearn.metrics import roc_auc_score

from cache.config import ModelConfig
from cache.loading import load_model
from probes.detectors import REGISTRY, get_detector
from probes.responders.local import LocalResponder, PromptFormat
from probes.responders.store import CachedResponder, ResponseStore
from probes.testbed.memorised import TEMPLATE, build_memorised_model


def aucs(seed: int, root: Path) -> dict[str, float]:
    model = build_memorised_model(root / f"seed{seed}", seed=seed)
    store = ResponseStore(root / f"seed{seed}.sqlite")

    def responder(path: Path) -> CachedResponder:
        loaded = load_model(ModelConfig(source=str(path), device="cpu"))
        return CachedResponder(
            LocalResponder(loaded, PromptFormat(mode="raw", template=TEMPLATE), batch_size=64), store
        )

    audited, reference = responder(model.path), responder(model.reference)
    questions = [q for q, _ in model.members] + [q for q, _ in model.non_members]
    answers = [a for _, a in model.members] + [a for _, a in model.non_members]  # reward gain judges against them
    labels = [1] * len(model.members) + [0] * len(model.non_members)
    out = {}
    for name in REGISTRY:
        detector = get_detector(name).fit(reference=reference, answers=answers)
        out[name] = roc_auc_score(labels, detector.score(questions, audited).scores)
    out["min_k_plus_plus (question)"] = roc_auc_score(
        labels, get_detector("min_k_plus_plus", target="question").score(questions, audited).scores
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, help="where the models go (default: a temporary directory)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        table = {seed: aucs(seed, root) for seed in seeds}
    names = list(table[seeds[0]])
    print(
        f"AUC on the text-memorisation testbed (24 members vs 24 unseen), training seeds {', '.join(map(str, seeds))}"
    )
    print(f"{'detector':<28}" + "".join(f"{'seed ' + str(s):>9}" for s in seeds))
    for name in names:
        print(f"{name:<28}" + "".join(f"{table[s][name]:>9.2f}" for s in seeds))


if __name__ == "__main__":
    main()
