"""Helpers shared by several commands."""

from __future__ import annotations


def quiet_library_progress_bars(verbose: bool) -> None:
    """Hide transformers' weight-loading bars (ours shows the extraction) unless verbose."""
    if not verbose:
        import transformers.utils.logging

        transformers.utils.logging.disable_progress_bar()

