"""Detection as one operation: open the audited model's responder and the reference's, score the
questions (and their matched controls) with the detectors, write the score-file bundle, and close
every engine it opened — on success and on error. ``lara detect``, the ``detect`` stage of ``lara
run`` and :func:`probes.detect` each say only what to open and where to write."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..detectors.base import Detector
from ..detectors.on_controls import ControlPlan
from ..detectors.run import DetectSummary, run_detectors
from ..responders.base import Responder
from ..responders.distributed import sum_counts_over_ranks
from ..responders.engines import close_engine
from ..responders.local import PromptFormat
from ..responders.open import Endpoint, open_responder
from ..responders.store import ResponseStore

logger = logging.getLogger(__name__)

SAME_MODEL = "same model"  # ``reference=SAME_MODEL``: the audited model is its own reference (every difference 0)


@dataclass(frozen=True)
class ModelAccess:
    """How one model answers the detectors.

    Attributes:
        model: a ``LoadedModel``, or a callable returning one (called only when a local model is
            needed: not for a served one, nor for an engine that loads its own).
        store: the response store (or its path) keeping its answers and scores.
        engine: the model's :class:`~probes.responders.model_settings.ModelSettings` when its
            engine may be other than hf (None: hf).
        endpoint: a served model instead of a local one (``pipeline.config.EndpointSettings``).
    """

    model: Any
    store: ResponseStore | str | Path
    engine: Any = None
    endpoint: Endpoint | None = None


@dataclass(frozen=True)
class DetectOptions:
    """How the detectors run, whatever the front door.

    Attributes:
        prompt_format: how a question becomes the model's prompt (the system turn included).
        batch_size: prompts per forward pass of a local model.
        decoding: the built-in sampler's loop (``auto``, ``dynamic``, ``static``).
        sampling_temperature: the temperature of the sampling detectors whose params set none.
        controls: the matched controls scored too (:class:`ControlPlan`), or None.
        progress: show progress bars.
        ranks: a launched job's ranks (``cache.distributed.Ranks``, already started): each batch
            call split across them, the counts summed, the main rank alone writing.
    """

    prompt_format: PromptFormat
    batch_size: int = 16
    decoding: str = "auto"
    sampling_temperature: float | None = None
    controls: ControlPlan | None = None
    progress: bool = False
    ranks: Any = None


def detect(
    questions: Sequence[Any],
    detectors: Sequence[str | Detector],
    audited: ModelAccess,
    options: DetectOptions,
    reference: ModelAccess | str | None = None,
    output: str | Path | None = None,
) -> DetectSummary | None:
    """Score ``questions`` (``generation.records.Question``; those of split ``clean_ref`` are the
    clean set of the detectors that fit on one) with ``detectors`` (registry names, or detectors
    built once by :func:`probes.detectors.selection.checked_detectors`) on ``audited``;
    ``reference``: the model the reference detectors compare with (:data:`SAME_MODEL`: the audited
    one). With ``output``, the bundle is written there (SCORES.csv, .raw.csv, .controls.csv,
    .meta.json; :attr:`DetectSummary.written`). Returns the summary; None on a rank other than
    the main one of a launched job."""
    with opened_responders(audited, reference, options) as (responder, reference_responder):
        summary = run_detectors(
            list(detectors),
            questions,
            responder,
            reference=reference_responder,
            sampling_temperature=options.sampling_temperature,
            controls=options.controls,
            progress=options.progress,
        )
    if options.ranks is not None:
        sum_counts_over_ranks(summary.info, options.ranks)
        if not options.ranks.is_main:
            return None
    if output is not None:
        summary.written = summary.write(output)
    return summary


@contextmanager
def opened_responders(
    audited: ModelAccess, reference: ModelAccess | str | None, options: DetectOptions
) -> Iterator[tuple[Responder, Responder | None]]:
    """``(audited responder, reference responder or None)``, every engine they opened closed on
    leaving (a vLLM engine's memory is then free for the next model), whether the block succeeded
    or raised."""
    opened: list[Responder] = []
    try:
        opened.append(open_model(audited, options))
        if reference == SAME_MODEL:
            yield opened[0], opened[0]
            return
        if reference is not None:
            opened.append(open_model(reference, options))  # type: ignore[arg-type]
        yield opened[0], (opened[1] if len(opened) > 1 else None)
    finally:
        for responder in opened:
            close_engine(responder)


def open_model(access: ModelAccess, options: DetectOptions) -> Responder:
    """One model's cached responder (:func:`probes.responders.open.open_responder`)."""
    how = {key: getattr(options, key) for key in ("batch_size", "ranks", "progress", "decoding")}
    return open_responder(
        access.model, options.prompt_format, access.store, endpoint=access.endpoint, engine=access.engine, **how
    )
