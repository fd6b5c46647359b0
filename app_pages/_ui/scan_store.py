"""What masked scans keep between script runs and sessions: finished positions, and pass rates.

Pure Python and NumPy, no Streamlit (``scans.py`` draws the scan). Both are process-wide and
thread-safe, like the model they come from: a position masked once for a model and a sequence
is the same numbers for every session, so a scan cancelled, interrupted or left by one visitor
continues where it stopped for the next run with that model and sequence.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from .policy import hosted_mode


class ScanStore:
    """Masked log-probabilities by (model, sequence) and position, the least recently used
    (model, sequence) forgotten beyond ``max_sequences`` (one 2,500-residue scan is ~330 kB)."""

    def __init__(self, max_sequences: int = 32):
        self.max_sequences = max_sequences
        self._lock = threading.Lock()
        self._scans: collections.OrderedDict[tuple[str, str], dict[int, np.ndarray]] = collections.OrderedDict()

    def missing(self, model: str, sequence: str, positions: range | list[int]) -> list[int]:
        """The 0-based ``positions`` not scanned yet, in order."""
        with self._lock:
            done = self._scans.get((model, sequence), {})
            return [p for p in positions if p not in done]

    def add(self, model: str, sequence: str, positions: list[int], log_probs: np.ndarray) -> None:
        """Keep ``log_probs[r]`` (vocab,) as the scan of ``positions[r]``."""
        with self._lock:
            key = (model, sequence)
            scan = self._scans.setdefault(key, {})
            self._scans.move_to_end(key)
            for row, position in enumerate(positions):
                scan[position] = np.array(log_probs[row], np.float32)
            while len(self._scans) > self.max_sequences:
                self._scans.popitem(last=False)

    def get(self, model: str, sequence: str, positions: range | list[int]) -> np.ndarray | None:
        """(len(positions), vocab) when every position is scanned, else None."""
        with self._lock:
            scan = self._scans.get((model, sequence))
            if scan is None or any(p not in scan for p in positions):
                return None
            self._scans.move_to_end((model, sequence))
            return np.stack([scan[p] for p in positions])


class PassRates:
    """Seconds per masked position, measured on the scans this process ran, per model and row
    width (a 1,022-residue window costs more per position than a 76-residue protein)."""

    def __init__(self, weight: float = 0.3):
        self.weight = weight  # of each new measurement in the running average
        self._lock = threading.Lock()
        self._rates: dict[tuple[str, int], float] = {}

    def record(self, model: str, width: int, positions: int, seconds: float) -> None:
        if positions <= 0 or seconds <= 0:
            return
        rate = seconds / positions
        with self._lock:
            old = self._rates.get((model, width))
            self._rates[(model, width)] = rate if old is None else (1 - self.weight) * old + self.weight * rate

    def seconds(self, model: str, width: int, positions: int) -> float | None:
        """Estimated seconds for ``positions`` more masked passes, or None before any measurement."""
        with self._lock:
            rate = self._rates.get((model, width))
        return None if rate is None else rate * positions


def about(seconds: float) -> str:
    """A duration for people: ``about 40 seconds``, ``about 24 minutes``, ``about 1 hour 10 minutes``."""
    if seconds < 50:
        return f"about {max(5, round(seconds / 5) * 5)} seconds"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {max(minutes, 1)} minute{'' if max(minutes, 1) == 1 else 's'}"
    hours, minutes = divmod(minutes, 60)
    rest = f" {minutes} minute{'' if minutes == 1 else 's'}" if minutes else ""
    return f"about {hours} hour{'' if hours == 1 else 's'}{rest}"


STORE = ScanStore(max_sequences=8 if hosted_mode() else 32)
RATES = PassRates()
