"""``import cache`` and the CLI module stay light: heavy libraries load only when used."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "transformers", "transformer_lens", "nnsight")


def test_importing_cache_and_cli_loads_no_heavy_library():
    code = f"import sys, cache, cache.backends, probes.cli; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_backend_libraries_load_only_with_their_backend(loaded_models):
    code = (
        "import sys; from cache.config import ModelConfig; from cache.loading import load_model; "
        "from cache.backends import create_extractor; "
        f"m = load_model(ModelConfig(source={str(loaded_models['gpt2'].source.location)!r}, device='cpu')); "
        "create_extractor('hf', m); "
        "print(','.join(x for x in ('transformer_lens', 'nnsight') if x in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
