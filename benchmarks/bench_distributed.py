"""``lara cache`` as one process vs data-parallel under ``torchrun``, side by side in one run (not a test).

Model: GPT-2-small shape (12 blocks, d=768, vocab 50257), random weights, built locally (as in
``bench_cache.py``); texts: its ``mixed`` set (256 texts of 8..192 tokens). Each configuration
caches every text into a fresh store, end to end as a user runs it (process start, model load,
extraction, merge), with the machine's cores shared out: one process with all of them, or N
processes with cores/N threads each. It also checks that the stores agree (max |Δ|).

    python benchmarks/bench_distributed.py                # 1 vs 2 processes
    python benchmarks/bench_distributed.py --procs 1,2,4 --quick
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cache import build_model, make_texts  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def run(procs: int, model: Path, texts: Path, out: Path, threads: int) -> float:
    lara = [
        "-m",
        "probes.cli",
        "-q",
        "cache",
        str(texts),
        "--model",
        str(model),
        "-o",
        str(out),
        "--device",
        "cpu",
        "--no-progress",
        "--text-field",
        "text",
        "--batch-size",
        "16",
    ]
    cmd = (
        [sys.executable, *lara]
        if procs == 1
        else [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs), *lara]
    )
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(REPO))
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="1,2", help="process counts to compare (default: 1,2)")
    parser.add_argument("--quick", action="store_true", help="4 blocks, d=256, 64 texts")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    from cache.store import ActivationStore

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lara-bench-dist-"))
    model = build_model(workdir, args.quick)
    texts = make_texts(workdir, "mixed", model, args.quick, 192)
    lines = [__import__("json").loads(x)["text"] for x in texts.read_text().splitlines()]
    cores = os.cpu_count() or 1
    results = {}
    for procs in [int(p) for p in args.procs.split(",")]:
        out = workdir / f"acts-{procs}.h5"
        seconds = run(procs, model, texts, out, max(1, cores // procs))
        results[procs] = (seconds, ActivationStore(out).get(lines))
    base_seconds, base_rows = results[min(results)]
    print(
        f"lara cache, GPT-2-small shape{' (quick: 4 x 256)' if args.quick else ''}, {len(lines)} texts, {cores} CPU cores, "
        "wall time end to end (start, load, extract, merge):"
    )
    for procs, (seconds, rows) in results.items():
        print(
            f"  {procs} process(es) x {max(1, cores // procs)} thread(s): {seconds:7.1f} s  "
            f"{len(lines) / seconds:6.1f} texts/s  speed-up {base_seconds / seconds:4.2f}x  "
            f"max |row - 1-process row| {float(np.abs(rows - base_rows).max()):.1e}"
        )


if __name__ == "__main__":
    main()
