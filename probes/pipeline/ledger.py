"""Stage bookkeeping of a run directory: skip a stage whose outputs are complete and were made
from the same inputs, redo it otherwise.

A stage's *key* is the sha256 of its inputs: its settings and the content digests of the files
it reads (upstream outputs included), so a changed setting or file redoes exactly the stages
downstream of it. Where and how fast a stage ran (device, batch sizes, the toolkit's version, a
local model's path: :mod:`.portable`) is not in the key but in the record's ``placement``, so a
run moves between machines and batch sizes without redoing what is done.

A stage with *bulky* outputs (activations: gigabytes a model) may be copied to another machine
without them: its record stands for them (``absent``) and the stages after it read their recorded
digests; :class:`.run._Run` redoes it only when a stage that reads them has to run. After a stage finishes, ``ledger/<stage>.json`` records the key and the
sha256 of every output; a stage is done when that record exists, its key matches, and every
output still has the recorded digest. Records are written last and atomically, so a stage
killed half-way is redone on the next run (its own resume machinery — the generation journal,
the cache store, the response store — keeps the work already done).

File digests are content hashes; a memo keyed by (path, size, mtime) avoids re-reading a large
unchanged file on every run.

Under torchrun (``ranks`` given) rank 0 alone reads and writes the records: it decides whether a
stage is done and tells the others; a stage runs on rank 0 alone (the others wait) or, with
``every_rank``, on every rank (activations, detectors), and rank 0 records it. The other ranks
never hash a file: their :meth:`Ledger.digest` is a placeholder, as the keys they would compute
decide nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from lara_core.files import write_text_atomically

from .portable import placement, portable

if TYPE_CHECKING:
    from cache.distributed import Ranks

logger = logging.getLogger(__name__)

_CHUNK = 1 << 22


class Ledger:
    """The stage records of one run directory."""

    def __init__(self, run_dir: str | Path, ranks: "Ranks | None" = None) -> None:
        self.run_dir = Path(run_dir)
        self.ranks = ranks
        self.dir = self.run_dir / "ledger"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._memo_path = self.dir / "digests.json"
        self._memo: dict[str, Any] = _read_json(self._memo_path) or {}
        self._memo_changed = False
        self.ran: list[str] = []
        self.skipped: list[str] = []
        self.absent: dict[str, list[str]] = {}  # stage → its recorded outputs that are not here

    def digest(self, path: str | Path) -> str:
        """sha256 of a file, or of a directory's files (names and contents, sorted); on ranks other
        than 0 a placeholder (rank 0 decides and records)."""
        if self.ranks is not None and not self.ranks.is_main:
            return "rank 0 decides"
        path = Path(path)
        if path.is_dir():
            h = hashlib.sha256()
            for f in sorted(p for p in path.rglob("*") if p.is_file()):
                h.update(f"{f.relative_to(path)}\0{self.digest(f)}\n".encode())
            return h.hexdigest()
        stat = path.stat()
        key = str(path.resolve())
        memo = self._memo.get(key)
        if memo and memo["size"] == stat.st_size and memo["mtime_ns"] == stat.st_mtime_ns:
            return memo["sha256"]
        h = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        self._memo[key] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": h.hexdigest()}
        self._memo_changed = True
        return h.hexdigest()

    def solo(self) -> None:
        """From now on this process runs the stages alone (rank 0 once the other ranks are done)."""
        self.ranks = None

    def save_memo(self) -> None:
        """Persist the digest memo (once per stage, not once per file hashed)."""
        if self._memo_changed and (self.ranks is None or self.ranks.is_main):
            _write_json(self._memo_path, self._memo)
            self._memo_changed = False

    def record(self, stage: str) -> dict[str, Any] | None:
        return _read_json(self.dir / f"{_safe(stage)}.json")

    def done_record(self, stage: str, key: str, absent_ok: bool = False) -> dict[str, Any] | None:
        """The stage's record if it was made for ``key`` and its outputs are unchanged, else None.
        A record written before keys left out placement is read through :func:`.portable.portable`.
        With ``absent_ok`` an output that is missing (not changed) leaves the record standing; its
        ``absent`` entry lists them."""
        rec = self.record(stage)
        if rec is None or key not in (rec.get("key"), stage_key(portable(rec.get("inputs", {})))):
            return None
        missing = []
        for rel, digest in rec["outputs"].items():
            path = self.run_dir / rel
            if absent_ok and not path.exists():
                missing.append(rel)
            elif not path.exists() or self.digest(path) != digest:
                logger.info("%s: output %s changed or is missing; redoing the stage", stage, rel)
                return None
        return {**rec, "absent": missing} if missing else rec

    def is_done(self, stage: str, inputs: dict[str, Any]) -> bool:
        """Whether ``stage`` is done for ``inputs`` with every output here (rank 0 decides)."""
        done = self.done_record(stage, stage_key(portable(inputs))) is not None if self._decides else None
        return bool(done if self.ranks is None else self.ranks.broadcast(done))

    @property
    def _decides(self) -> bool:
        return self.ranks is None or self.ranks.is_main

    def run(
        self,
        stage: str,
        inputs: dict[str, Any],
        outputs: Iterable[str | Path],
        work: Callable[[], Any],
        every_rank: bool = False,
        absent_ok: bool = False,
        appends_unless: tuple[str, ...] = (),
    ) -> dict[str, str]:
        """Run ``work`` unless ``stage`` is done for ``inputs``; returns the outputs' digests.

        Args:
            stage: stage name (unique in the run).
            inputs: JSON-able settings and upstream digests that decide the outputs; the placement
                entries (:mod:`.portable`) are recorded but left out of the key.
            outputs: paths, relative to the run directory, that ``work`` writes.
            work: does the stage.
            every_rank: under torchrun, every rank runs ``work`` (its own share of it); else rank 0
                alone does while the others wait.
            absent_ok: a done stage whose outputs were left behind (not changed) stays done
                (:attr:`absent` lists them).
            appends_unless: for a stage that appends to its outputs, the inputs they must have been made
                with to be appended to; made with others, they are removed first.
        """
        key = stage_key(portable(inputs))
        ranks = self.ranks
        here = self._decides  # the process that decides, works and records
        done = self.done_record(stage, key, absent_ok) if here else None
        if here and done is None and appends_unless:
            self._clear_stale(stage, inputs, outputs, appends_unless)  # before any rank starts on them
        if ranks is not None:
            done = ranks.broadcast(done)
        if done is not None:
            if done.get("absent"):
                self.absent[stage] = list(done["absent"])
                logger.info(
                    "%s: up to date; its %s not here (made elsewhere): redone only if a stage that reads it runs",
                    stage,
                    ", ".join(done["absent"]),
                )
            else:
                logger.info("%s: up to date, skipped", stage)
            self.skipped.append(stage)
            self.save_memo()
            return dict(done["outputs"])
        self.ran.append(stage)
        if not here:
            logger.info("%s: %s", stage, "running this rank's share" if every_rank else "waiting for rank 0")
            if every_rank:
                work()
            return ranks.broadcast(None)
        digests = self._work_and_record(stage, key, inputs, [Path(p).as_posix() for p in outputs], work)
        return digests if ranks is None else ranks.broadcast(digests)

    def _clear_stale(
        self, stage: str, inputs: dict[str, Any], outputs: Iterable[str | Path], appends_unless: Any
    ) -> None:
        """Remove the outputs of a stage that appends to them (activations: the texts already there
        are kept) when they were made with other ``appends_unless`` inputs (another model, dtype, layers…:
        the store would refuse or mix them); a stage interrupted under the same ones resumes. The
        marker ``<stage>.started.json`` records what the outputs are being made with."""
        made_with = stage_key({k: portable(inputs).get(k) for k in appends_unless})
        marker = self.dir / f"{_safe(stage)}.started.json"
        started, rec = _read_json(marker), self.record(stage)
        if started is not None:
            before = started.get("made_with")
        elif rec is not None:
            before = stage_key({k: portable(rec.get("inputs", {})).get(k) for k in appends_unless})
        else:
            before = made_with  # outputs of unknown origin: the stage's own checks decide
        if before != made_with:
            for rel in outputs:
                for path in (self.run_dir / rel, self.run_dir / f"{rel}.parts"):  # .parts: a store's shards
                    if path.exists():
                        logger.info("%s: %s was made with other settings; removed", stage, path.name)
                        shutil.rmtree(path) if path.is_dir() else path.unlink()
        _write_json(marker, {"stage": stage, "made_with": made_with})

    def _work_and_record(
        self, stage: str, key: str, inputs: dict[str, Any], rels: list[str], work: Callable[[], Any]
    ) -> dict[str, str]:
        """Run ``work``, check it wrote ``rels``, and record the stage (its portable inputs, and its
        placement apart); the outputs' digests."""
        started = time.perf_counter()
        logger.info("%s: running", stage)
        work()
        missing = [r for r in rels if not (self.run_dir / r).exists()]
        if missing:
            raise RuntimeError(f"stage {stage} did not write {', '.join(missing)}")
        digests = {r: self.digest(self.run_dir / r) for r in rels}
        self.save_memo()
        _write_json(
            self.dir / f"{_safe(stage)}.json",
            {
                "stage": stage,
                "key": key,
                "inputs": portable(inputs),
                "placement": placement(inputs),
                "outputs": digests,
                "seconds": round(time.perf_counter() - started, 3),
            },
        )
        logger.info("%s: done in %.1f s", stage, time.perf_counter() - started)
        self.absent.pop(stage, None)
        return digests


def stage_key(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


def _safe(stage: str) -> str:
    return stage.replace("/", "__")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _write_json(path: Path, data: Any) -> None:
    write_text_atomically(path, json.dumps(data, indent=1, sort_keys=True, default=str))
