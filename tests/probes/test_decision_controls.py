"""More controls where they are cheap (SPEC §8.10, issue 32 item 2): the offline generator draws
further similars as controls only (the K similars unchanged, no blanks or paraphrases), the
detectors that do not sample score them all while the sampling ones keep the verdict's controls,
the verdict reads its own controls and the decisions all of them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from generation.config import GenerationConfig
from generation.pipeline import run_generation
from generation.records import read_questions, read_sets
from probes.cli import main
from probes.lara.sets import all_texts
from probes.scorefiles import ControlTable, read_scored
from probes.verdicts.controls import control_texts
from probes.verdicts.modes import VerdictSettings
from probes.verdicts.on_files import audit_verdict


@pytest.fixture(scope="module")
def sets_with_controls(audit, tmp_path_factory):
    root = tmp_path_factory.mktemp("decision-controls")
    questions = read_questions(audit.questions)
    plain, more = root / "plain.jsonl", root / "more.jsonl"
    run_generation(questions, plain, GenerationConfig.from_dict({"similars": 3, "paraphrases": 3, "seed": 1}))
    summary = run_generation(
        questions, more, GenerationConfig.from_dict({"similars": 3, "paraphrases": 3, "seed": 1, "controls": 5})
    )
    return root, plain, more, summary


def test_the_generator_draws_further_distinct_similars_as_controls_only(sets_with_controls):
    _, plain, more, summary = sets_with_controls
    before, after = read_sets(plain), read_sets(more)
    valid = 0
    for a, b in zip(before, after):
        assert (
            a.similars == b.similars and a.blanked == b.blanked and a.paraphrases == b.paraphrases
        )  # the K similars as they were
        assert all_texts(a) == all_texts(b)  # LaRA reads none of the further controls
        drawn = [c for c in b.controls if c is not None]
        valid += len(drawn)
        texts = [b.question.question, *[s for s in b.similars if s is not None], *drawn]
        assert len(set(texts)) == len(texts)  # distinct from the original, the similars and each other
        assert len(b.controls) == 5 and (len(drawn) == 5 or any(f.step == "controls" for f in b.failures))
        assert control_texts([b], 8)[b.question.id] == [*[s for s in b.similars if s is not None], *drawn][:8]
    assert not before[0].controls and "controls" not in before[0].to_dict()  # files without them are as they were
    assert valid == summary.controls_valid > 0.9 * 5 * len(after)
    assert "further similars drawn as controls only" in summary.describe() and "ms per question" in summary.describe()


def detect_on_controls(audit, root, sets, out, *counts: str) -> int:
    """``lara detect ppl,cdd`` on the audit's questions with ``sets``' controls (``counts``: the flags)."""
    return main(
        [
            *("detect", "ppl,cdd", str(audit.questions), "--model", str(audit.model_dir), "--device", "cpu"),
            *("--prompt-format", "raw", "--template", "Q: {prompt}\nA:", "--param", "ppl.max_new_tokens=6"),
            *("--param", "cdd.n=2", "--param", "cdd.max_tokens=6", "--sets", str(sets), *counts),
            *("--store", str(root / "s.sqlite"), "-o", str(out), "--no-progress"),
        ]
    )


def test_detectors_that_do_not_sample_score_every_control_and_the_decisions_use_them(sets_with_controls, audit):
    root, _, more, _ = sets_with_controls
    out = root / "rl.csv"
    assert detect_on_controls(audit, root, more, out, "--controls", "3", "--decision-controls", "7") == 0
    controls = ControlTable.read_csv(out.with_suffix(".controls.csv"))
    ids = read_scored(out).scores.ids
    ppl, cdd = controls.matrix("ppl", ids), controls.matrix("cdd", ids)
    assert ppl.shape[1] == 7 and np.isfinite(ppl).sum(axis=1).max() == 7  # ppl: one forward pass per text, all 7
    assert np.isfinite(cdd[:, :3]).any() and np.isnan(cdd[:, 3:]).all()  # cdd samples: the verdict's 3 only
    files = read_scored(out)
    labels = {q.id: q.label for q in read_questions(audit.questions)}
    settings = VerdictSettings(permutations=200, bootstrap=10, detectors=("ppl",))
    verdict, decisions = audit_verdict(files, labels=labels, settings=settings, verdict_controls=3)
    n_usable = int((np.isfinite(ppl[: len(decisions.ids)]).sum(axis=1) >= 3).sum())
    assert decisions.detectors["ppl"].null_size > 3 * n_usable  # the decisions' pool: up to 7 controls per question
    whole, _ = audit_verdict(files, labels=labels, settings=settings)
    cut, _ = audit_verdict(files, labels=labels, settings=dataclasses.replace(settings), verdict_controls=3)
    assert cut["detectors"]["ppl"] == verdict["detectors"]["ppl"]
    assert (
        whole["detectors"]["ppl"]["within_auc"] != verdict["detectors"]["ppl"]["within_auc"]
    )  # the verdict read 3, not 7


def test_control_answers_are_aligned_with_the_control_texts():
    """A similar the generator could not make is skipped in both lists, so the k-th control's answer
    is the k-th control text's."""
    from generation.records import Question, empty_set
    from probes.verdicts.controls import control_answers, control_texts

    record = empty_set(Question(id="a", question="q"), 3, 1, {}, n_controls=2)
    record.similars[:] = ["s1", None, "s3"]
    record.controls[:] = ["c1", "c2"]
    record.answers = {"similars": [1, None, 3], "controls": [None, 5]}
    bare = empty_set(Question(id="b", question="q"), 2, 1, {})
    bare.similars[:] = ["t1", "t2"]
    assert control_texts([record, bare], 4) == {"a": ["s1", "s3", "c1", "c2"], "b": ["t1", "t2"]}
    assert control_answers([record, bare], 4) == {"a": [1, 3, None, 5], "b": [None, None]}


def test_sampling_detectors_score_their_own_count_of_controls(sets_with_controls, audit):
    """--sampling-controls: the detectors that sample score that many controls (the decisions read
    them; the verdict its --controls), between the verdict's and the likelihood family's."""
    root, _, more, _ = sets_with_controls
    out = root / "rl-sampling.csv"
    assert (
        main(
            [
                "detect",
                "ppl,cdd",
                str(audit.questions),
                "--model",
                str(audit.model_dir),
                "--device",
                "cpu",
                "--prompt-format",
                "raw",
                "--template",
                "Q: {prompt}\nA:",
                "--param",
                "ppl.max_new_tokens=6",
                "--param",
                "cdd.n=2",
                "--param",
                "cdd.max_tokens=6",
                "--sets",
                str(more),
                "--controls",
                "3",
                "--sampling-controls",
                "5",
                "--decision-controls",
                "7",
                "--store",
                str(root / "s.sqlite"),
                "-o",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    controls = ControlTable.read_csv(out.with_suffix(".controls.csv"))
    ids = read_scored(out).scores.ids
    ppl, cdd = controls.matrix("ppl", ids), controls.matrix("cdd", ids)
    assert np.isfinite(ppl).sum(axis=1).max() == 7
    assert np.isfinite(cdd).sum(axis=1).max() == 5 and np.isnan(cdd[:, 5:]).all()


def test_the_run_config_refuses_fewer_sampling_controls_than_the_verdicts():
    from probes.errors import ConfigError
    from probes.pipeline.config import CalibrationSettings

    assert CalibrationSettings(controls=3, sampling_controls=5, decision_controls=20).most == 20
    assert CalibrationSettings(controls=3, sampling_controls=5).most == 10  # the decisions' default
    with pytest.raises(ConfigError, match="calibration.sampling_controls"):
        CalibrationSettings(controls=3, sampling_controls=2)


def test_the_decisions_default_to_ten_controls_for_the_detectors_that_do_not_sample(sets_with_controls, audit):
    """The measured best (docs/verdicts.md, "Which settings"; issue 44 item 5): where no count is
    named, the detectors that do not sample score 10 controls (the verdict's count if more; none
    without controls), the sampling ones the verdict's; a question with fewer uses what it has."""
    from probes.pipeline.config import CalibrationSettings
    from probes.verdicts.controls import decision_control_count

    assert [decision_control_count(c, None) for c in (0, 2, 3, 10, 20)] == [0, 10, 10, 10, 20]
    assert decision_control_count(3, 5) == 5
    assert CalibrationSettings().decision_controls == 10 and CalibrationSettings(controls=0).decision_controls is None
    assert VerdictSettings().fdr_method == "storey"
    root, _, more, _ = sets_with_controls
    from probes.detectors.on_controls import ControlPlan

    plan = ControlPlan.from_sets(read_sets(more), 3)  # the one place the default applies: CLI, run and API
    assert max(len(t) for t in plan.texts.values()) == 8 and plan.sampling == 3
    out = root / "default.csv"
    assert detect_on_controls(audit, root, more, out, "--controls", "3") == 0  # the sets hold 3 + 5 = 8
    controls = ControlTable.read_csv(out.with_suffix(".controls.csv"))
    ids = read_scored(out).scores.ids
    ppl, cdd = controls.matrix("ppl", ids), controls.matrix("cdd", ids)
    assert np.isfinite(ppl).sum(axis=1).max() == 8  # all it has, short of 10
    assert np.isfinite(cdd[:, :3]).any() and np.isnan(cdd[:, 3:]).all()


def test_the_verdict_reads_each_questions_first_scored_controls_not_its_first_controls():
    """A detector that reads answers scores each question's first 3 controls that have a re-solved
    answer, which may be its 6th to 8th (the further controls, drawn keeping what the answer rests
    on): the verdict's 3 controls are those, and a reference difference pairs the two models'
    scores on the same controls before the cut (before: the verdict read controls 1-3 by index, and
    such a question was left out with "fewer than 2 scored controls")."""
    from probes.scorefiles import ScoredFiles
    from probes.scores import ScoreTable

    rng = np.random.default_rng(3)
    n, width = 40, 10
    ids = [f"q{i}" for i in range(n)]
    where = [list(range(1, 4)) if i % 2 else [6, 7, 8] for i in range(n)]  # half the questions: controls 6-8
    index = np.tile(np.arange(1, width + 1), n)
    values = {}
    for name, shift in (("reward_gain", 0.0), ("ppl", 0.3)):
        matrix = np.full((n, width), np.nan)
        for i, cols in enumerate(where):
            matrix[i, [c - 1 for c in cols]] = rng.normal(size=3)
        values[name] = (rng.normal(size=n) + shift, matrix.reshape(-1))
    audited = ScoredFiles(
        ScoreTable(ids, {k: v[0] for k, v in values.items()}),
        ControlTable([i for i in ids for _ in range(width)], index, {k: v[1] for k, v in values.items()}),
    )
    reference = ScoredFiles(
        ScoreTable(ids, {k: np.zeros(n) for k in values}),
        ControlTable([i for i in ids for _ in range(width)], index, {k: np.zeros(n * width) for k in values}),
    )
    settings = VerdictSettings(permutations=200, bootstrap=10, detectors=("reward_gain", "ppl"))
    verdict, _ = audit_verdict(audited, reference=reference, settings=settings, verdict_controls=3)
    assert verdict["mode"] == "reference"
    for name in ("reward_gain", "ppl"):
        record = verdict["detectors"][name]
        assert record["n"] == n, (name, record["left_out"])  # every question decided, on its 3 scored controls
    whole, _ = audit_verdict(audited, reference=reference, settings=settings)
    assert whole["detectors"]["ppl"]["within_auc"] == verdict["detectors"]["ppl"]["within_auc"]  # 3 scored each
    from probes.verdicts.coverage import coverage

    assert coverage(audited, [], {}, None, 3)["reward_gain"]["decided"] == n  # the report says the same
