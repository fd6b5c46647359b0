"""Hosted-demo policy: input limits, what may be loaded, and a bounded queue for heavy jobs.

Set ``FLAMINO_HOSTED=1`` on a public server. Limits can be tuned with environment variables
(``FLAMINO_MAX_UPLOAD_BYTES``, ``FLAMINO_MAX_RECORDS``, ``FLAMINO_MAX_RESIDUES``,
``FLAMINO_MAX_TOTAL_RESIDUES``, ``FLAMINO_HEAVY_WORKERS``, ``FLAMINO_HEAVY_WAITING``), and the
models a visitor may choose with ``FLAMINO_HOSTED_MODELS`` (comma-separated presets; the
operator's ``FLAMINO_MODEL`` and the untrained ``random:tiny`` are always offered).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from typing import Callable, Iterator

# Models a hosted server offers by default besides FLAMINO_MODEL: small enough for a modest
# machine (the 650M model needs ~3 GB per copy, the 3B and 15B ones far more).
DEFAULT_HOSTED_MODELS = ("esm2_t6_8M_UR50D", "esm2_t12_35M_UR50D", "esm2_t30_150M_UR50D")
RANDOM_TEST_MODEL = "random:tiny"
# Attention maps and contacts of sequences longer than this go through the heavy-job queue:
# their memory grows with the square of the length.
HEAVY_RESIDUES = 400


def hosted_mode() -> bool:
    return os.environ.get("FLAMINO_HOSTED", "").strip().lower() in {"1", "true", "yes", "on"}


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one request may ask for. ``None`` fields mean unlimited (a local, single-user run)."""

    max_upload_bytes: int | None = None
    max_records: int | None = None
    max_residues_per_record: int | None = None
    max_total_residues: int | None = None
    allow_local_paths: bool = True
    allow_pickle: bool = True
    allowed_models: frozenset[str] | None = None  # None: any identifier


    def fasta_limits(self) -> dict[str, int | None]:
        """Keyword arguments for ``fasta.parse_fasta_text`` / ``parse_fasta_bytes``."""
        return {
            "max_records": self.max_records,
            "max_residues_per_record": self.max_residues_per_record,
            "max_total_residues": self.max_total_residues,
        }

    def check_upload(self, size: int, name: str = "upload") -> str | None:
        """A message if an upload is too large, else None."""
        if self.max_upload_bytes is not None and size > self.max_upload_bytes:
            return (f"{name} is {_size(size)}; this server accepts up to {_size(self.max_upload_bytes)} "
                    "per file or pasted input. Split it, or run flamino locally for big jobs.")
        return None

    def check_model(self, identifier: str) -> str | None:
        """A message if this server does not offer the model ``identifier``, else None."""
        if self.allowed_models is None:
            return None
        if identifier.strip().removeprefix("facebook/") in self.allowed_models:
            return None
        offered = ", ".join(sorted(self.allowed_models))
        return (f"this server does not offer the model {identifier!r}; choose one of {offered}, "
                "or run flamino on your own machine for other models and local checkpoints")


def _size(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1e6:.2f} MB"
    return f"{n / 1e3:.1f} kB" if n >= 1_000 else f"{n} bytes"


def hosted_models() -> frozenset[str]:
    """The identifiers a hosted server offers (FLAMINO_HOSTED_MODELS, FLAMINO_MODEL, random:tiny)."""
    from .weights import default_model

    listed = os.environ.get("FLAMINO_HOSTED_MODELS")
    names = listed.split(",") if listed is not None else list(DEFAULT_HOSTED_MODELS)
    names += [default_model(), RANDOM_TEST_MODEL]
    return frozenset(n.strip().removeprefix("facebook/") for n in names if n.strip())


def current_limits() -> Limits:
    """The limits in force: strict in hosted mode, none locally."""
    if not hosted_mode():
        return Limits()
    return Limits(
        max_upload_bytes=_env_int("FLAMINO_MAX_UPLOAD_BYTES", 1_000_000),
        max_records=_env_int("FLAMINO_MAX_RECORDS", 100),
        max_residues_per_record=_env_int("FLAMINO_MAX_RESIDUES", 2_000),
        max_total_residues=_env_int("FLAMINO_MAX_TOTAL_RESIDUES", 20_000),
        allow_local_paths=False,  # query strings and forms must not name server paths
        allow_pickle=False,  # pickles execute code: never on a public server
        allowed_models=hosted_models(),
    )


class QueueFull(RuntimeError):
    """Too many heavy jobs are running or waiting; the user should retry later."""


class HeavyJobQueue:
    """At most ``workers`` heavy jobs run at once and at most ``max_waiting`` wait for a slot.

    Masked-marginal scans and attention maps of long sequences cost seconds to minutes and
    gigabytes; bounding them keeps one busy user (or many) from exhausting the server.
    Thread-safe: Streamlit runs each session in its own thread.
    """

    def __init__(self, workers: int = 1, max_waiting: int = 4):
        self.workers, self.max_waiting = workers, max_waiting
        self._slots = threading.Semaphore(workers)
        self._lock = threading.Lock()
        self.running = 0
        self.waiting = 0

    @contextlib.contextmanager
    def slot(
        self,
        timeout: float | None = 300.0,
        on_wait: Callable[[float], None] | None = None,
        poll: float = 1.0,
    ) -> Iterator[None]:
        """Hold one of the ``workers`` slots for the duration of the ``with`` block.

        Args:
          timeout: seconds to wait for a slot (None: forever).
          on_wait: called about every ``poll`` seconds while waiting, with the seconds waited so
            far. Whatever it raises stops the wait (and propagates): the app uses it to show the
            wait and to notice a session that was closed meanwhile.

        Raises:
          QueueFull: the queue is full now, or no slot came free within ``timeout``.
        """
        with self._lock:
            if self.running >= self.workers and self.waiting >= self.max_waiting:
                raise QueueFull(
                    f"the server is busy ({self.running} heavy job(s) running, {self.waiting} waiting); "
                    "please try again in a minute"
                )
            self.waiting += 1
        acquired = False
        started = time.monotonic()
        try:
            while True:
                left = None if timeout is None else timeout - (time.monotonic() - started)
                if left is not None and left <= 0:
                    break
                step = left if on_wait is None else (poll if left is None else min(poll, left))
                if self._slots.acquire(timeout=step):
                    acquired = True
                    break
                if on_wait is not None:
                    on_wait(time.monotonic() - started)
        finally:
            with self._lock:
                self.waiting -= 1
                if acquired:
                    self.running += 1
        if not acquired:
            raise QueueFull("waited too long for a free slot; please try again later")
        try:
            yield
        finally:
            with self._lock:
                self.running -= 1
            self._slots.release()


_QUEUE: HeavyJobQueue | None = None
_QUEUE_LOCK = threading.Lock()


def heavy_job_queue() -> HeavyJobQueue:
    """The process-wide queue shared by every session."""
    global _QUEUE
    with _QUEUE_LOCK:
        if _QUEUE is None:
            if hosted_mode():
                _QUEUE = HeavyJobQueue(_env_int("FLAMINO_HEAVY_WORKERS", 1), _env_int("FLAMINO_HEAVY_WAITING", 4))
            else:
                _QUEUE = HeavyJobQueue(workers=2, max_waiting=64)
        return _QUEUE
