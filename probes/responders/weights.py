"""How much a model's weights take as they run, read from its files without loading it (what
engine ``auto`` decides on)."""

from __future__ import annotations

from pathlib import Path

from cache.errors import ModelLoadError
from cache.gguf_header import parameter_count
from cache.sources import PACKAGE_PREFIX, resolve_source


def weight_files(source: str | None) -> list[Path]:
    """A checkpoint directory's weight files (``*.safetensors``, ``*.bin``), sorted; none for anything else."""
    if source is None or not Path(source).is_dir():
        return []
    return sorted(p for p in Path(source).iterdir() if p.suffix in (".safetensors", ".bin"))


def weight_bytes(source: str | None, base: str | None = None) -> int:
    """What the weights take as they run: a checkpoint directory's weight files; a GGUF file's
    weights dequantised to float32 (what it is converted to, whether converted yet or not, so the
    choice is the same on every run); an adapter's root base's (its own are small); 0 for a hub
    id. A source that does not resolve (refused elsewhere, with its reason) counts its directory's
    weight files, if any."""
    if source is None or not (source.startswith(PACKAGE_PREFIX) or Path(source).expanduser().exists()):
        return 0
    try:
        root = resolve_source(source, base=base).chain()[-1]
    except ModelLoadError:
        return sum(p.stat().st_size for p in weight_files(source))
    if root.kind == "gguf":
        return 4 * parameter_count(root.location)
    return sum(p.stat().st_size for p in weight_files(root.location))
