"""What a command tells the user on stderr while it works: one-line messages and progress."""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO

# A work's progress callback, called as ``progress(done, total)`` as its steps finish (``Progress`` is one).
ProgressFn = Callable[[int, int], None]
# A staged work's callbacks: a stage's name to its ``ProgressFn`` (None: that stage is not reported).
StageProgress = Callable[[str], ProgressFn | None]


def say(message: str) -> None:
    """One line on stderr, marked as flamino's."""
    print(f"flamino: {message}", file=sys.stderr, flush=True)


def duration(seconds: float) -> str:
    """``20s``, ``1m35s``, ``1h02m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """A progress line on stderr: rewritten in place on a terminal; in a log, a new line only
    when it has crossed a multiple of ``every_percent`` of the work or ``every_seconds`` have
    passed since the last one, and always at the first and the last update.

    Called as ``progress(done, total)`` it shows ``label: done/total (percent%)``: the
    engine's progress callback. ``message(fraction, text)`` is the model loader's callback.
    """

    def __init__(
        self,
        label: str = "",
        *,
        every_percent: int | None = 10,
        every_seconds: float | None = None,
        stream: TextIO | None = None,
    ):
        self.label, self.every_percent, self.every_seconds = label, every_percent, every_seconds
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.shown_percent: int | None = None
        self.shown_at = -float("inf")

    def __call__(self, done: int, total: int) -> None:
        fraction = done / max(total, 1)
        self.show(f"{self.label}: {done}/{total} ({int(100 * fraction)}%)", fraction, done >= total)

    def message(self, fraction: float | None, text: str) -> None:
        print(text, file=self.stream)

    def show(self, line: str, fraction: float, finished: bool, now: float | None = None) -> None:
        """Show ``line`` if it is due; ``now`` is the caller's ``time.monotonic()`` if it has one."""
        if now is None and self.every_seconds is not None:
            now = time.monotonic()
        percent = int(100 * fraction)
        due = (
            self.tty
            or finished
            or self.shown_percent is None
            or (self.every_percent and percent // self.every_percent != self.shown_percent // self.every_percent)
            or (self.every_seconds is not None and now - self.shown_at >= self.every_seconds)
        )
        if not due:
            return
        self.shown_percent = percent
        if now is not None:
            self.shown_at = now
        if self.tty:  # rewritten in place; the padding wipes a longer previous line
            print("\r" + line + "   ", end="\n" if finished else "", file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)
