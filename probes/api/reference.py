"""``docs/python-api.md``, generated from the API's docstrings and the walkthrough
(``python -m probes.api.reference > docs/python-api.md``); a test fails when the page drifts, and
another runs every code block of it."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from . import NAMES

WALKTHROUGH = Path(__file__).resolve().parents[2] / "docs" / "examples" / "walkthrough.py"
RESULTS = (
    ("probes.api.results", "Detection"),
    ("probes.api.results", "Verdict"),
    ("probes.api.lara", "LaraMetrics"),
    ("probes.api.drift", "Drift"),
    ("cache.store", "ActivationStore"),
)

INTRO = """# Python API

`import probes` gives the operations of an audit on objects a notebook holds — a model you
already loaded, lists of strings, `torch` tensors and `pandas` frames — over the same library
entries `lara detect`, `lara verdict` and `lara run` use (one responder stack, one detection
entry, one verdict). Nothing heavy is imported until a function is called. This page is generated
from the docstrings (`python -m probes.api.reference > docs/python-api.md`), and a test runs every
code block on it.

| names | what |
|---|---|
| `load_model`, `pool`, `cache_activations`, `open_store` | models and activations |
| `perturb`, `lara_metrics`, `lara_score` | LaRA (SPEC §1–4) |
| `drift` | representation drift between two activation stores, and its layer map (SPEC §10) |
| `detect`, `fuse`, `verdict`, `evaluate` | detectors, fusion, the label-free verdict, labelled evaluation (SPEC §5–8) |
| `plot_roc`, `plot_scores`, `plot_verdict` | figures: each takes `ax=` and returns the `Figure` |
"""

TRANSFORMER_LENS = """## A stored row from TransformerLens

A row is the mean over a text's tokens of a block's output (the residual stream), computed on the
checkpoint's own tokenizer. A `TransformerBridge` prepends a BOS token by default
(`prepend_bos=True`); this testbed's GPT-2 tokenizer adds none, so pass `prepend_bos=False` to
see the same tokens (a tokenizer that adds BOS itself, e.g. Llama's, matches with the default).
Blocks are `blocks.{l}.hook_resid_post`; `embed` is `blocks.0.hook_resid_pre`. (`probes.load_model`
takes a bridge too, and uses the checkpoint's tokenizer for that reason.) For the detectors a
bridge or an nnsight model is unwrapped to the Hugging Face module it holds; before its first
answer, a short greedy decode with the KV cache is checked against the same tokens scored without
it (float32: 1e-3), and a model that fails is refused for generation with a pointer to the
checkpoint itself (a bridge was seen to decode wrongly elsewhere; with TransformerLens 4.3 and
transformers 5.23 both wrappers generate what the checkpoint generates, `tests/api/test_models.py`).

```python
from pathlib import Path

import torch
from transformer_lens.model_bridge import TransformerBridge

import probes

checkpoint = Path(probes.__file__).parent / "testbed" / "checkpoints" / "cpu-seed0" / "rl"
text = "Gus has 6 boxes with 2 pencils in each box. How many pencils does Gus have?"
bridge = TransformerBridge.boot_transformers(str(checkpoint), device="cpu")
_, cache = bridge.run_with_cache(text, prepend_bos=False)
row = cache["blocks.3.hook_resid_post"][0].mean(dim=0)           # [d_model]
ours = probes.pool(probes.load_model(checkpoint), text, layers=-1)[0, 0]
assert torch.allclose(row, ours, atol=1e-4)
```
"""


def render() -> str:
    """The page's Markdown."""
    lines = [
        INTRO,
        "## A whole audit",
        "",
        "`docs/examples/walkthrough.py` (percent format: open it as a notebook), on the shipped testbed:",
        "",
        "```python",
        WALKTHROUGH.read_text(encoding="utf-8").rstrip(),
        "```",
        "",
        TRANSFORMER_LENS,
        "## Functions",
        "",
    ]
    for name, module in NAMES.items():
        function = getattr(importlib.import_module(f"probes.api.{module}"), name)
        lines += [f"### `probes.{name}{_signature(function)}`", "", inspect.getdoc(function) or "", ""]
    lines += ["## Results", ""]
    for module, name in RESULTS:
        cls = getattr(importlib.import_module(module), name)
        lines += [f"### `{name}` (`{module}`)", "", inspect.getdoc(cls) or "", ""]
        own = {
            k: v for klass in reversed(cls.__mro__[:-1]) for k, v in vars(klass).items()
        }  # not object's (nnsight patches it)
        for attr, member in sorted(own.items()):
            if attr.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            doc = (inspect.getdoc(member) or "").split("\n\n")[0].replace("\n", " ")
            call = "" if isinstance(member, property) else _signature(member, drop_self=True)
            lines.append(f"- `.{attr}{call}`" + (f": {doc}" if doc else ""))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _signature(function: object, drop_self: bool = False) -> str:
    """``(a: int, *, b: str = 'x')`` with the annotations as written in the source."""
    parameters = list(inspect.signature(function).parameters.values())[1 if drop_self else 0 :]  # type: ignore[arg-type]
    parts, starred = [], False
    for p in parameters:
        if p.kind is p.KEYWORD_ONLY and not starred:
            parts.append("*")
            starred = True
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        starred = starred or p.kind is p.VAR_POSITIONAL
        text = prefix + p.name + (f": {p.annotation}" if p.annotation is not p.empty else "")
        parts.append(text + (f" = {p.default!r}" if p.default is not p.empty else ""))
    return f"({', '.join(parts)})"


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
