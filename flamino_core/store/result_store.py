"""One store for what the model computed, shared by the app, the command line and batch jobs.

Two kinds of result, each keyed by the model's fingerprint (``Engine.fingerprint``: the weights
and the precision mode, so results of one model are never served for another) and a digest of
the sequence:

* **masked passes**: the (vocab,) log-probabilities at one position with that position masked,
  keyed by (model, sequence, position). Every strategy that masks positions (masked-marginals,
  pseudo-perplexity, the app's scans, a variant list's mutated positions, pll's mutants) reads
  them here first (``passes.masked_log_probs``), so a position is masked at most once per model,
  across pages, sessions, processes and restarts.
* **per-record outputs** of an unmasked pass (a mean embedding per layer, per-residue entropy,
  logits when asked), keyed by (model, sequence, output name); ``passes.record_outputs`` fills
  them together, one pass per record.

Why SQLite (the standard library's ``sqlite3``; the file's plumbing is ``store_sqlite``) rather
than LMDB, diskcache or Parquet/Zarr: it needs no dependency; a transaction is atomic, so a
process killed mid-write leaves the store as it was before that write; in WAL mode several
processes (server workers, a CLI run, batch workers) read while one writes; "which positions of
this sequence are stored" is one indexed range query; least-recently-used eviction is an index
on one column. diskcache is SQLite underneath with a key-value API that would make each range
read one lookup per position; LMDB needs a fixed map size and lets one writer in at a time
through a lock we would manage; Parquet and Zarr have no atomic concurrent updates.

Every value is stored with a CRC-32 of its key and bytes, checked on every read: a damaged value
(a disk fault, a copy of a half-written file) is deleted and reported missing, so it is
recomputed, never used. Eviction drops whole (model, sequence) entries, least recently used
first, when the values pass ``max_bytes``. If the store cannot be opened or written (a read-only
or full disk), every operation degrades to a miss and results are simply computed: the store is
a cache, never a reason to fail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from flamino_core import settings
from flamino_core.store.sqlite import Transaction, checksum, execute, open_database, rows

LOG = logging.getLogger("flamino")
FILE_NAME = "results.sqlite"
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB; FLAMINO_STORE_MAX_MB overrides
# A read refreshes its entry's last use at most this often: a read that writes takes the write
# lock, and least-recently-used order at minute resolution evicts the right entries.
TOUCH_EVERY_SECONDS = 60.0
_IN_CHUNK = 900  # values per "IN (...)" list (SQLite allows 32,766 parameters a statement)


def sequence_digest(sequence: str) -> bytes:
    """The key of a sequence: SHA-256 of its residues (a 35,000-residue titin is a 32-byte key)."""
    return hashlib.sha256(sequence.encode("ascii")).digest()


@dataclasses.dataclass(frozen=True)
class StoreStats:
    """What the store holds now."""

    path: str
    entries: int  # (model, sequence) pairs
    masked_positions: int
    outputs: int
    value_bytes: int  # the values' bytes (what ``max_bytes`` bounds)
    file_bytes: int  # the database file and its write-ahead log on disk
    max_bytes: int


class ResultStore:
    """Masked passes and per-record outputs on disk, shared by threads and processes.

    Args:
      path: the SQLite file (created with its folder). None: ``FLAMINO_CACHE/results.sqlite``.
      max_bytes: the values' total size kept; beyond it the least recently used (model,
        sequence) entries are evicted. None: ``FLAMINO_STORE_MAX_MB`` or 2 GiB.
    """

    def __init__(self, path: str | os.PathLike | None = None, max_bytes: int | None = None):
        self.path = Path(path) if path is not None else default_path()
        if max_bytes is None:
            max_bytes = settings.STORE_MAX_BYTES.get() or DEFAULT_MAX_BYTES
        self.max_bytes = max_bytes
        self._local = threading.local()  # sqlite3 connections belong to one thread
        self._open_lock = threading.Lock()
        self._broken = False  # could not open, or found damaged: every call misses from now on

    # --- plumbing ---------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        held = getattr(self._local, "connection", None)
        if held is not None and self._local.pid == os.getpid():  # a forked child opens its own
            return held
        try:
            with self._open_lock:
                connection = open_database(self.path)
        except (sqlite3.Error, OSError) as err:
            LOG.warning("result store %s unavailable (%s); computing without it", self.path, err)
            self._broken = True
            return None
        self._local.connection, self._local.pid = connection, os.getpid()
        return connection

    def _run(self, work, default):
        """``work(connection)``, or ``default`` when the store is unavailable or fails."""
        connection = self._connection()
        if connection is None:
            return default
        try:
            return work(connection)
        except sqlite3.DatabaseError as err:
            LOG.warning("result store %s failed (%s); computing without it", self.path, err)
            if not isinstance(err, sqlite3.OperationalError):  # damaged: stop using it here
                self._broken = True
            return default

    def close(self) -> None:
        """Close this thread's connection."""
        held = getattr(self._local, "connection", None)
        if held is not None:
            held.close()
            self._local.connection = None

    def _entry(self, connection, model: str, digest: bytes, length: int, create: bool) -> int | None:
        """The id of (model, sequence), its last use refreshed; created when ``create``."""
        now = time.time()
        found = rows(connection, "SELECT id, used FROM entries WHERE model = ? AND sequence = ?", (model, digest))
        if found:
            entry, used = found[0]
            if now - used > TOUCH_EVERY_SECONDS:
                execute(connection, "UPDATE entries SET used = ? WHERE id = ?", (now, entry))
            return entry
        if not create:
            return None
        return rows(connection, "INSERT INTO entries (model, sequence, length, used, bytes) VALUES (?, ?, ?, ?, 0) "
                                "ON CONFLICT (model, sequence) DO UPDATE SET used = excluded.used RETURNING id",
                    (model, digest, length, now))[0][0]

    # --- masked passes ----------------------------------------------------------------------
    def masked(self, model: str, sequence: str, positions: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored masked log-probabilities among ``positions``: {position: (vocab,) float32}.

        A damaged value is deleted and left out (so it is recomputed)."""
        wanted = sorted({int(p) for p in positions})
        digest = sequence_digest(sequence)

        def work(connection):
            entry = self._entry(connection, model, digest, len(sequence), create=False)
            if entry is None or not wanted:
                return {}
            found, damaged = {}, []
            for part in _chunks(wanted):
                sql = f"SELECT position, value, crc FROM masked WHERE entry = ? AND position IN ({_marks(part)})"
                for position, value, crc in rows(connection, sql, (entry, *part)):
                    if crc != checksum(_masked_key(model, digest, position), value):
                        damaged.append((position, len(value)))
                    else:
                        found[position] = np.frombuffer(value, dtype=np.float32)
            if damaged:
                LOG.warning("result store: %d damaged masked value(s) dropped; recomputing", len(damaged))
                _drop(connection, "masked", "position", entry, damaged)
            return found

        return self._run(work, {})

    def held_positions(self, model: str, sequence: str) -> set[int]:
        """The positions of ``sequence`` with a masked pass stored, without reading (or checking)
        their values: a cheap count for progress and cost estimates. A damaged value is still
        found and recomputed by ``masked`` when it is read."""
        digest = sequence_digest(sequence)

        def work(connection):
            found = rows(connection, "SELECT id FROM entries WHERE model = ? AND sequence = ?", (model, digest))
            if not found:
                return set()
            return {p for (p,) in rows(connection, "SELECT position FROM masked WHERE entry = ?", (found[0][0],))}

        return self._run(work, set())

    def missing(self, model: str, sequence: str, positions: Iterable[int]) -> list[int]:
        """The 0-based ``positions`` with no (undamaged) stored masked pass, in the given order."""
        positions = list(positions)
        stored = self.masked(model, sequence, positions)
        return [p for p in positions if p not in stored]

    def put_masked(self, model: str, sequence: str, positions: Iterable[int], log_probs: np.ndarray) -> None:
        """Keep ``log_probs[r]`` (vocab,) as the masked pass of ``positions[r]``, in one transaction
        (a position already held keeps its value: the same pass gives the same numbers)."""
        positions = [int(p) for p in positions]
        log_probs = np.ascontiguousarray(log_probs, dtype=np.float32)
        if len(positions) != len(log_probs):
            raise ValueError(f"{len(positions)} positions but {len(log_probs)} rows of log-probabilities")
        if any(not 0 <= p < len(sequence) for p in positions):
            raise ValueError(f"positions must lie in 0..{len(sequence) - 1}")
        if not positions:
            return
        digest = sequence_digest(sequence)
        values = [(p, row.tobytes()) for p, row in zip(positions, log_probs)]

        def work(connection):
            with Transaction(connection):
                entry = self._entry(connection, model, digest, len(sequence), create=True)
                added = sum(
                    len(value) * execute(connection, "INSERT OR IGNORE INTO masked (entry, position, value, crc) "
                                                     "VALUES (?, ?, ?, ?)",
                                         (entry, p, value, checksum(_masked_key(model, digest, p), value)))
                    for p, value in values
                )
                execute(connection, "UPDATE entries SET bytes = bytes + ? WHERE id = ?", (added, entry))
            self._evict(connection)

        self._run(work, None)

    # --- per-record outputs -----------------------------------------------------------------
    def outputs(self, model: str, sequence: str, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored outputs among ``names``: {name: array}. Damaged ones are deleted, left out."""
        names = list(dict.fromkeys(names))
        digest = sequence_digest(sequence)

        def work(connection):
            entry = self._entry(connection, model, digest, len(sequence), create=False)
            if entry is None or not names:
                return {}
            found, damaged = {}, []
            for part in _chunks(names):
                sql = f"SELECT name, dtype, shape, value, crc FROM outputs WHERE entry = ? AND name IN ({_marks(part)})"
                for name, dtype, shape, value, crc in rows(connection, sql, (entry, *part)):
                    if crc != checksum(_output_key(model, digest, name, dtype, shape), value):
                        damaged.append((name, len(value)))
                    else:
                        dims = tuple(int(d) for d in shape.split(",") if d)
                        found[name] = np.frombuffer(value, dtype=np.dtype(dtype)).reshape(dims)
            if damaged:
                LOG.warning("result store: damaged output(s) %s dropped; recomputing", ", ".join(n for n, _ in damaged))
                _drop(connection, "outputs", "name", entry, damaged)
            return found

        return self._run(work, {})

    def put_outputs(self, model: str, sequence: str, values: Mapping[str, np.ndarray]) -> None:
        """Keep each named array (replacing one of the same name), in one transaction."""
        digest = sequence_digest(sequence)
        prepared = []
        for name, array in values.items():
            array = np.asarray(array)  # (ascontiguousarray would make a 0-d array 1-d)
            if array.dtype == object:
                raise TypeError(f"output {name!r}: only numeric arrays are stored")
            dtype, shape = array.dtype.str, ",".join(str(d) for d in array.shape)
            value = np.ascontiguousarray(array).tobytes()
            key = _output_key(model, digest, name, dtype, shape)
            prepared.append((name, dtype, shape, value, checksum(key, value)))
        if not prepared:
            return

        def work(connection):
            with Transaction(connection):
                entry = self._entry(connection, model, digest, len(sequence), create=True)
                names = [p[0] for p in prepared]
                old = rows(connection, f"SELECT COALESCE(SUM(length(value)), 0) FROM outputs "
                                       f"WHERE entry = ? AND name IN ({_marks(names)})", (entry, *names))[0][0]
                connection.executemany("INSERT OR REPLACE INTO outputs (entry, name, dtype, shape, value, crc) "
                                       "VALUES (?, ?, ?, ?, ?, ?)", [(entry, *p) for p in prepared])
                added = sum(len(p[3]) for p in prepared) - old
                execute(connection, "UPDATE entries SET bytes = bytes + ? WHERE id = ?", (added, entry))
            self._evict(connection)

        self._run(work, None)

    # --- size ---------------------------------------------------------------------------------
    def _evict(self, connection) -> None:
        """Drop the least recently used entries until the values fit in 90% of ``max_bytes``."""
        total = rows(connection, "SELECT bytes FROM totals WHERE id = 0")[0][0]
        if total <= self.max_bytes:
            return
        with Transaction(connection):
            total = rows(connection, "SELECT bytes FROM totals WHERE id = 0")[0][0]
            doomed = []
            for entry, size in rows(connection, "SELECT id, bytes FROM entries ORDER BY used"):
                if total <= 0.9 * self.max_bytes:
                    break
                doomed.append((entry,))
                total -= size
            for table, column in (("masked", "entry"), ("outputs", "entry"), ("entries", "id")):
                connection.executemany(f"DELETE FROM {table} WHERE {column} = ?", doomed)
        LOG.info("result store: evicted the %d least recently used entries", len(doomed))

    def stats(self) -> StoreStats:
        """Counts and sizes, for the docs' measurements and the app's cache panel."""
        def work(connection):
            entries, value_bytes = rows(connection, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries")[0]
            masked = rows(connection, "SELECT COUNT(*) FROM masked")[0][0]
            outputs = rows(connection, "SELECT COUNT(*) FROM outputs")[0][0]
            return entries, masked, outputs, value_bytes

        entries, masked, outputs, value_bytes = self._run(work, (0, 0, 0, 0))
        files = [Path(str(self.path) + suffix) for suffix in ("", "-wal")]
        on_disk = sum(f.stat().st_size for f in files if f.is_file())
        return StoreStats(str(self.path), entries, masked, outputs, value_bytes, on_disk, self.max_bytes)

    def clear(self) -> None:
        """Forget everything (the file stays)."""
        def work(connection):
            with Transaction(connection):
                for table in ("masked", "outputs", "entries"):
                    execute(connection, f"DELETE FROM {table}")

        self._run(work, None)


class NullStore(ResultStore):
    """A store that keeps nothing (``FLAMINO_STORE=off``): every lookup misses."""

    def __init__(self):
        super().__init__(path=os.devnull, max_bytes=0)
        self._broken = True


def _masked_key(model: str, digest: bytes, position: int) -> bytes:
    return f"{model}\0{position}\0".encode() + digest


def _output_key(model: str, digest: bytes, name: str, dtype: str, shape: str) -> bytes:
    return f"{model}\0{name}\0{dtype}\0{shape}\0".encode() + digest


def _drop(connection, table: str, column: str, entry: int, keys_and_sizes: list[tuple]) -> None:
    """Delete damaged values (key, size) of one entry and take their bytes off its size."""
    with Transaction(connection):
        connection.executemany(f"DELETE FROM {table} WHERE entry = ? AND {column} = ?",
                               [(entry, key) for key, _ in keys_and_sizes])
        execute(connection, "UPDATE entries SET bytes = MAX(0, bytes - ?) WHERE id = ?",
                (sum(size for _, size in keys_and_sizes), entry))


def _chunks(items: list) -> Iterable[list]:
    for start in range(0, len(items), _IN_CHUNK):
        yield items[start:start + _IN_CHUNK]


def _marks(items: list) -> str:
    return ",".join("?" * len(items))


def default_path() -> Path:
    from flamino_core.weights.model_cache import cache_root

    return cache_root() / FILE_NAME


_DEFAULT: dict[tuple[str, str], ResultStore] = {}
_DEFAULT_LOCK = threading.Lock()


def default_store() -> ResultStore:
    """The process's store at ``FLAMINO_CACHE/results.sqlite`` (one per path and size setting;
    ``FLAMINO_STORE=off`` gives a store that keeps nothing)."""
    if not settings.STORE.get():
        return NullStore()
    key = (str(default_path()), str(settings.STORE_MAX_BYTES.get()))
    with _DEFAULT_LOCK:
        if key not in _DEFAULT:
            _DEFAULT[key] = ResultStore()
        return _DEFAULT[key]
