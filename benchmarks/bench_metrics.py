"""LaRA metrics from an HDF5 activation store: the vectorised, streamed path (``lara metrics``)
vs a per-layer Python loop, side by side in one run, with each path's peak memory.

Default shape: 200 questions, K=5, M=5, L=28, d=3584 (Eurus-2-7B's; 8,400 texts, ≈ 3.4 GB of
float32 activations). The store is built once with the real StoreWriter (random rows) and kept
under --dir; the file is read once before timing so both paths read from the page cache.

The per-layer loop is how a research script typically does it: for every layer, for every
question, read that layer's rows from the file and compute the metrics with per-member and
per-paraphrase NumPy calls. Each path runs in its own process, so its peak RSS is its own.

    python benchmarks/bench_metrics.py                    # the full Eurus-7B shape (needs ~7 GB disk)
    python benchmarks/bench_metrics.py --questions 20 --d 512 --layers 8   # quick
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cache.fingerprint import text_hash  # noqa: E402
from cache.store import RowBlock, StoreWriter  # noqa: E402
from generation.records import PerturbationSet, Question  # noqa: E402


def texts_of(q: int, k: int, m: int) -> tuple[list[str], list[str], list[list[str]]]:
    u = [f"Question {q}, member {i}: a farmer has {q + i} sheep. How many legs?" for i in range(k + 1)]
    w = [f"Question {q}, member {i}: a farmer has [BLANK] sheep. How many legs?" for i in range(k + 1)]
    phi = [
        [f"Paraphrase {j} of question {q}, member {i}: [BLANK] sheep; count the legs." for j in range(m)]
        for i in range(k + 1)
    ]
    return u, w, phi


def build(directory: Path, n: int, k: int, m: int, n_layers: int, d: int) -> tuple[Path, Path]:
    """The sets file and the activation store (reused when they exist with this shape)."""
    directory.mkdir(parents=True, exist_ok=True)
    tag = f"n{n}-k{k}-m{m}-L{n_layers}-d{d}"
    sets_path, acts_path = directory / f"sets-{tag}.jsonl", directory / f"acts-{tag}.h5"
    if sets_path.exists() and acts_path.exists():
        return sets_path, acts_path
    texts: list[str] = []
    with open(sets_path, "w", encoding="utf-8") as handle:
        for q in range(n):
            u, w, phi = texts_of(q, k, m)
            texts += u + w + [p for row in phi for p in row]
            record = PerturbationSet(
                Question(id=f"q{q}", question=u[0], label=q % 2),
                u[1:],
                "the number of sheep",
                w,
                phi,
                [],
                {"backend": "bench"},
            )
            handle.write(record.to_json() + "\n")
    provenance = {
        "schema_version": 1,
        "weights_fingerprint": "bench",
        "tokenizer_fingerprint": "bench",
        "backend": "hf",
        "backend_flags": {},
        "layers": [str(i) for i in range(n_layers)],
        "pooling": "mean",
        "prompt": "raw",
        "compute_dtype": "float32",
        "storage_dtype": "float32",
        "d_model": d,
        "model": {"source": "bench", "n_blocks": n_layers},
    }
    rng = np.random.default_rng(0)
    print(f"building {acts_path} ({len(texts)} rows, {len(texts) * n_layers * d * 4 / 2**30:.2f} GiB)...", flush=True)
    with StoreWriter(acts_path, provenance) as writer:
        for lo in range(0, len(texts), 256):
            part = texts[lo : lo + 256]
            rows = rng.standard_normal((len(part), n_layers, d), dtype=np.float32)
            block = RowBlock(
                [text_hash(t) for t in part],
                part,
                rows,
                np.full(len(part), 20, np.int32),
                np.full(len(part), 20, np.int32),
                np.zeros(len(part), bool),
            )
            writer.add(block, flush_every=256)
        writer.consolidate()
    return sets_path, acts_path


def run_vectorised(sets_path: Path, acts_path: Path, out: Path) -> dict:
    from probes.lara.metrics_file import compute_metrics

    start = time.perf_counter()
    compute_metrics(sets_path, acts_path, out)
    return {"seconds": time.perf_counter() - start}


def run_loop(sets_path: Path, acts_path: Path, n_questions: int, out: Path) -> dict:
    """Per layer, per question: read that layer's rows, compute with per-member NumPy calls."""
    import h5py

    records = [PerturbationSet.from_dict(json.loads(line)) for line in sets_path.read_text().splitlines()][:n_questions]
    start = time.perf_counter()
    with h5py.File(acts_path, "r") as f:
        keys = {k.decode(): i for i, k in enumerate(f["keys"][:])}
        dset = f["activations"]
        n_layers = dset.shape[1]
        result = np.zeros((len(records), 3, n_layers))
        for layer in range(n_layers):
            for q, record in enumerate(records):
                u_texts = [record.question.question, *record.similars]
                names = u_texts + record.blanked + [p for row in record.paraphrases for p in row]
                rows = [keys[text_hash(t)] for t in names]
                order = np.argsort(rows)
                block = np.empty((len(rows), dset.shape[2]), dtype=np.float64)
                block[order] = dset[np.array(rows)[order], layer, :]
                k1 = len(u_texts)
                u, w = block[:k1], block[k1 : 2 * k1]
                phi = block[2 * k1 :].reshape(k1, -1, block.shape[1])
                result[q, :, layer] = per_layer_metrics(u, w, phi)
    elapsed = time.perf_counter() - start
    np.save(out, result)
    return {"seconds": elapsed}


def per_layer_metrics(u: np.ndarray, w: np.ndarray, phi: np.ndarray, eps: float = 1e-8) -> tuple[float, float, float]:
    """One layer, member by member (u, w [K+1, d], phi [K+1, M, d])."""
    shifts, deltas, spreads = [], [], []
    for i in range(len(u)):
        delta = u[i] - w[i]
        deltas.append(delta)
        shifts.append(float(np.linalg.norm(delta)))
        centre = phi[i].mean(axis=0)
        spreads.append(float(np.mean([np.linalg.norm(p - centre) for p in phi[i]])))
    s_bar = np.mean(deltas[1:], axis=0)
    zrsm = (shifts[0] - np.mean(shifts[1:])) / (np.std(shifts[1:], ddof=1) + eps)
    dc = float(deltas[0] @ s_bar) / ((shifts[0] + eps) * (np.linalg.norm(s_bar) + eps))
    zrsi = (spreads[0] - np.mean(spreads[1:])) / (np.std(spreads[1:], ddof=1) + eps)
    return zrsm, dc, zrsi


def run_read_only(sets_path: Path, acts_path: Path) -> dict:
    """The floor: read every question's rows (all layers) from the store, compute nothing."""
    from cache.store import ActivationStore

    store = ActivationStore(acts_path)
    records = [PerturbationSet.from_dict(json.loads(line)) for line in sets_path.read_text().splitlines()]
    start = time.perf_counter()
    for record in records:
        names = [
            record.question.question,
            *record.similars,
            *record.blanked,
            *(p for row in record.paraphrases for p in row),
        ]
        store.get(sorted(names, key=text_hash))
    return {"seconds": time.perf_counter() - start}


def peak_rss_gib() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def child(args: argparse.Namespace) -> None:
    if args.child == "vectorised":
        out = run_vectorised(Path(args.sets), Path(args.acts), Path(args.out))
    elif args.child == "read":
        out = run_read_only(Path(args.sets), Path(args.acts))
    else:
        out = run_loop(Path(args.sets), Path(args.acts), args.loop_questions, Path(args.out))
    out["peak_rss_gib"] = peak_rss_gib()
    print(json.dumps(out))


def spawn(mode: str, args: argparse.Namespace, sets_path: Path, acts_path: Path, out: Path) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--child",
        mode,
        "--sets",
        str(sets_path),
        "--acts",
        str(acts_path),
        "--out",
        str(out),
        "--loop-questions",
        str(args.loop_questions),
    ]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def warm(path: Path) -> None:
    with open(path, "rb") as handle:
        while handle.read(64 << 20):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("-K", type=int, default=5)
    parser.add_argument("-M", type=int, default=5)
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--d", type=int, default=3584)
    parser.add_argument(
        "--loop-questions", type=int, default=0, help="questions timed in the loop (default: all); scaled up"
    )
    parser.add_argument("--dir", default="/tmp/lara-bench-metrics", help="where the store is built and kept")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sets", help=argparse.SUPPRESS)
    parser.add_argument("--acts", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    args.loop_questions = args.loop_questions or args.questions
    directory = Path(args.dir)
    sets_path, acts_path = build(directory, args.questions, args.K, args.M, args.layers, args.d)
    size = acts_path.stat().st_size / 2**30
    warm(acts_path)
    floor = spawn("read", args, sets_path, acts_path, directory / "unused")
    vec = spawn("vectorised", args, sets_path, acts_path, directory / "metrics.h5")
    loop = spawn("loop", args, sets_path, acts_path, directory / "loop.npy")
    scale = args.questions / args.loop_questions
    loop_total = loop["seconds"] * scale

    from probes.lara.metrics_file import MetricsFile

    got = MetricsFile.read(directory / "metrics.h5").metrics[: args.loop_questions]
    reference = np.load(directory / "loop.npy")
    agree = float(np.max(np.abs(got - reference) / np.maximum(np.abs(reference), 1e-12)))
    print(
        f"\nLaRA metrics: {args.questions} questions, K={args.K}, M={args.M}, L={args.layers}, d={args.d} "
        f"({size:.2f} GiB of float32 activations in HDF5)"
    )
    print(f"{'path':<28}{'seconds':>10}{'questions/s':>14}{'peak RSS':>12}")
    print(
        f"{'vectorised (lara metrics)':<28}{vec['seconds']:>10.1f}{args.questions / vec['seconds']:>14.1f}{vec['peak_rss_gib']:>10.2f} GiB"
    )
    note = f" (timed on {args.loop_questions}, scaled)" if scale != 1 else ""
    print(
        f"{'read the rows only (floor)':<28}{floor['seconds']:>10.1f}{args.questions / floor['seconds']:>14.1f}{floor['peak_rss_gib']:>10.2f} GiB"
    )
    print(
        f"{'per-layer Python loop':<28}{loop_total:>10.1f}{args.questions / loop_total:>14.2f}{loop['peak_rss_gib']:>10.2f} GiB{note}"
    )
    print(
        f"speed-up of the vectorised path over the loop: {loop_total / vec['seconds']:.1f}x "
        f"(the loop takes {loop_total / floor['seconds']:.1f}x the read-only floor, the vectorised path {vec['seconds'] / floor['seconds']:.1f}x)"
    )
    print(f"largest relative difference between the two paths' metrics: {agree:.1e}")
    if not math.isfinite(agree) or agree > 1e-6:
        raise SystemExit("the two paths disagree")


if __name__ == "__main__":
    main()
