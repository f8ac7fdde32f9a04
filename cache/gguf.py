"""A GGUF file as a normal checkpoint, converted once (SPEC §9).

transformers' GGUF loader dequantises every tensor (~15–25 s for a 135 M model); the result
cannot be ``save_pretrained`` as is ("quantized with gguf"), so its state dict is copied into a
model built from its config without the GGUF quantization entry, and that is saved with the
tokenizer into ``$LARA_HOME/gguf/<sha256 of the file>/``. Later loads read that directory like
any checkpoint. The directory is written under a temporary name and renamed into place, so a
half-written conversion is never used; ``lara_source.json`` records what it was made from. Under
a lock, so processes started together (torchrun ranks) convert it once.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .errors import ModelLoadError
from .source_record import ModelSource, require
from .toymodels import default_home

logger = logging.getLogger(__name__)

MARKER = "lara_source.json"
CONVERSION_VERSION = 1  # bump when the conversion changes what it writes


def converted_dir(sha256: str, root: Path | None = None) -> Path:
    """Where the dequantised checkpoint of the GGUF file with this sha256 lives."""
    return (root if root is not None else default_home() / "gguf") / sha256


def converted_checkpoint(source: ModelSource, root: Path | None = None) -> Path:
    """The checkpoint directory of GGUF ``source``, converted on first use.

    Raises:
        ModelLoadError: the ``gguf`` package is missing, or transformers cannot load the file.
    """
    assert source.kind == "gguf" and source.digest
    target = converted_dir(source.digest, root)
    if is_converted(target, source.digest):
        return target
    require("gguf", f"the model {source.spec!r} is a GGUF file")
    target.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(target.with_name(target.name + ".lock")):  # torchrun ranks: one converts, the others wait
        if not is_converted(target, source.digest):
            _convert(source, target)
    return target


@contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """An exclusive lock on ``lock_path`` for this block (POSIX ``flock``; released on exit or death)."""
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def save_checkpoint(model: Any, tokenizer: Any, target: Path, marker: dict[str, Any]) -> None:
    """Save ``model`` and ``tokenizer`` with ``lara_source.json`` (``marker``) into ``target``:
    written in a temporary sibling renamed into place, so a half-written checkpoint is never seen
    (an existing ``target`` — unfinished or older — is replaced)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _convert(source: ModelSource, target: Path) -> None:
    gguf_path = Path(source.location)
    logger.info("converting %s into a checkpoint (once; kept in %s)", gguf_path.name, target)
    model, tokenizer = _load_gguf(gguf_path, source.spec)
    marker = {
        "gguf_file": gguf_path.name,
        "sha256": source.digest,
        "conversion": CONVERSION_VERSION,
        "dtype": "float32",
    }
    save_checkpoint(_plain_copy(model), tokenizer, target, marker)


def is_converted(target: Path, sha256: str) -> bool:
    """Whether ``target`` holds a finished conversion of the GGUF file with this sha256."""
    try:
        marker = json.loads((target / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return marker.get("sha256") == sha256 and marker.get("conversion") == CONVERSION_VERSION


def _load_gguf(path: Path, spec: str) -> tuple[Any, Any]:
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    except Exception as err:  # noqa: BLE001 - re-raised with the file named
        raise ModelLoadError(f"transformers cannot load the GGUF file {spec!r}: {type(err).__name__}: {err}") from err
    return model, tokenizer


def _plain_copy(model: Any) -> Any:
    """The same weights in a model without the GGUF quantization entry (which blocks saving)."""
    import torch  # lazy: torch
    from transformers import AutoModelForCausalLM

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), assign=True, strict=True)
    if getattr(plain.config, "tie_word_embeddings", False):
        plain.tie_weights()
    return plain
