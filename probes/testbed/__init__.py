"""An RL-contamination testbed: a small causal LM, SFT'd on synthetic math word problems and then
GRPO'd on a known member set (:func:`build_testbed`, ``lara testbed build``)."""

from .build import PRESETS, build_testbed, read_manifest
from .problems import PROMPT_TEMPLATE, TEMPLATES, make_splits

__all__ = ["PRESETS", "PROMPT_TEMPLATE", "TEMPLATES", "build_testbed", "make_splits", "read_manifest"]
