"""The objects the Python API returns: a detector run and a verdict, each with a ``__repr__``, a
one-screen ``summary()`` and its tables as ``pandas.DataFrame``s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..scorefiles import ScoredFiles, bound_settings
from ..scores import jsonable


@dataclass
class Detection:
    """Detector scores of N questions (``probes.detect``).

    Attributes:
        summary: the library's ``probes.detectors.run.DetectSummary`` (tables, controls, counts, notes).
        labels: ``{id: 1 member / 0 non-member / None}`` from the questions.
        splits: ``{id: split}`` from the questions (``clean_ref`` marks the clean set).
    """

    summary: Any
    labels: dict[str, int | None] = field(default_factory=dict)
    splits: dict[str, str | None] = field(default_factory=dict)

    @property
    def scores(self) -> Any:
        """``pandas.DataFrame [N, detectors]`` indexed by id: oriented scores, higher = member."""
        return _frame(self.summary.table)

    @property
    def raw(self) -> Any:
        """``pandas.DataFrame`` of the raw statistics (the detectors' own orientation)."""
        return _frame(self.summary.raw)

    @property
    def controls(self) -> Any:
        """``pandas.DataFrame`` of the scores of each question's controls (columns ``id``,
        ``control``, then one per detector), or None when no sets were given."""
        import pandas as pd

        c = self.summary.controls
        if c is None:
            return None
        return pd.DataFrame({"id": c.ids, "control": c.index, **{n: v for n, v in c.columns.items()}})

    def files(self) -> Any:
        """The scores as ``lara verdict`` reads them (``probes.scorefiles.ScoredFiles``)."""

        settings, prompt = bound_settings(self.summary.info)
        return ScoredFiles(self.summary.table, self.summary.controls, settings, prompt_format=prompt)

    def describe(self) -> str:
        """What the run did, as ``lara detect`` prints it (counts, controls, notes)."""
        return self.summary.describe()

    def __repr__(self) -> str:
        t = self.summary.table
        controls = (
            f", controls of {len(set(self.summary.controls.ids))} questions"
            if self.summary.controls is not None
            else ""
        )
        return f"Detection({len(t.ids)} questions × {', '.join(t.columns)}{controls})"


@dataclass
class Verdict:
    """A label-free verdict (SPEC §8) and its per-question decisions (SPEC §8.10).

    Attributes:
        record: the verdict as ``verdict.json`` holds it (``mode``, ``reject``, ``calibrated``,
            ``combined``, ``detectors``, ``modes``, ``subsets``, ``questions``…).
        decisions: the per-question decisions (``probes.verdicts.decisions.QuestionDecisions``),
            None when no mode could decide.
    """

    record: dict[str, Any]
    decisions: Any = None

    @property
    def reject(self) -> bool | None:
        """True / False, or None when there is no verdict (which is not a negative answer)."""
        return self.record.get("reject")

    @property
    def calibrated(self) -> bool | None:
        """Whether the deciding mode is calibrated (False: the absolute mode's signal)."""
        return self.record.get("calibrated")

    @property
    def p_value(self) -> float:
        """The deciding mode's combined p-value (NaN with no verdict)."""
        return float(self.record["combined"]["p_value"])

    @property
    def questions(self) -> Any:
        """``pandas.DataFrame`` of the per-question decisions (as ``questions.csv``), or None."""
        return None if self.decisions is None else self.decisions.to_frame()

    def summary(self) -> str:
        """The verdict as ``lara verdict`` prints it."""
        from ..report.verdict_text import describe_verdict  # lazy: `import probes` loads no report module

        return describe_verdict(self.record)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as plain JSON values (``verdict.json``)."""

        return jsonable(self.record)

    def __repr__(self) -> str:
        from ..report.verdict_text import describe_verdict  # lazy: `import probes` loads no report module

        return f"Verdict({describe_verdict(self.record).splitlines()[0].removeprefix('Verdict: ')})"


def _frame(table: Any) -> Any:
    import pandas as pd

    return pd.DataFrame(table.columns, index=pd.Index(table.ids, name="id"))
