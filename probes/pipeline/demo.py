"""Where the demo's config lives (``lara demo`` = ``lara run configs/demo.yaml``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def demo_config_path() -> Path:
    """``configs/demo.yaml`` of the checkout this package runs from."""
    path = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    if not path.is_file():
        raise InputError(
            f"the demo config is not at {path}: run from a checkout of the repository "
            "(pip install -e .), or run: lara run PATH/TO/configs/demo.yaml"
        )
    return path
