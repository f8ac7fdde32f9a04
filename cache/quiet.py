"""transformers kept quiet while the toolkit loads a model: the load logs one line of its own."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off while a model loads or an adapter merges (issue 55: a bar and
    PEFT's call of a deprecated transformers attribute on every load), on again after if they were;
    the loading itself logs one line (``loaded …``)."""
    import warnings

    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
