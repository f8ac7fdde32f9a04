"""A small labelled audit built with the real components: offline perturbation sets of bank
questions, activations of a tiny GPT-2 cached in a real HDF5 store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.question_bank import sample_questions
from generation.records import Question, write_questions

N_LABELLED = 24
N_CLEAN = 10


@dataclass(frozen=True)
class Audit:
    questions: Path
    sets: Path
    acts: Path
    model_dir: Path


def build_audit(root: Path, model_dir: Path, k: int = 3, m: int = 3) -> Audit:
    """Questions (12 members, 12 non-members, 10 with split clean_ref), sets, activations."""
    from cache.config import CacheConfig, ExtractionConfig, ModelConfig
    from cache.runner import run_cache
    from generation.records import read_sets
    from probes.lara.sets import all_texts

    root.mkdir(parents=True, exist_ok=True)
    bank = sample_questions(N_LABELLED + N_CLEAN, seed=3)
    questions = []
    for i, q in enumerate(bank):
        if i < N_LABELLED:
            questions.append(Question(id=f"q{i:02d}", question=q.question, label=i % 2, answer=q.answer))
        else:
            questions.append(Question(id=f"c{i:02d}", question=q.question, label=0, split="clean_ref"))
    paths = Audit(root / "questions.jsonl", root / "sets.jsonl", root / "acts.h5", model_dir)
    write_questions(questions, paths.questions)
    run_generation(questions, paths.sets, GenerationConfig.from_dict({"similars": k, "paraphrases": m, "seed": 1}))
    texts = sorted({t for s in read_sets(paths.sets) for t in all_texts(s)})
    config = CacheConfig(
        model=ModelConfig(source=str(model_dir), device="cpu"), extraction=ExtractionConfig(layers=("all",))
    )
    run_cache(texts, paths.acts, config, progress=False)
    return paths
