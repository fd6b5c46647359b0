"""A job's state as people read it, in one place: every caption, panel and table that speaks of
a job reads ``Job.status()`` (``jobs/background.py``), so the sidebar and the page cannot
disagree, and nothing says "done" while passes remain.

The phases, in the order a job goes through them:

* ``queued``: started, waiting for its first unit of work or for a slot of the server's queue;
* ``measuring``: running, its own rate not measured yet (no time left is said; a model new to
  the server compiles first, which the words say);
* ``running``: n of N, and the time left at its rate;
* ``cancelling``: Cancel was asked; the chunk in flight finishes, then it stops;
* ``cancelled``, ``stopped`` (a busy server), ``failed``: n of N kept;
* ``measured``: a first chunk that measured this machine's rate, ended with units left: the rest
  waits for the user's Start on the page (never "done");
* ``done``: every unit finished.
"""

from __future__ import annotations

import dataclasses

PHASES = ("queued", "measuring", "running", "cancelling", "cancelled", "stopped", "failed", "measured", "done")
ENDED = ("cancelled", "stopped", "failed", "measured", "done")


def about(seconds: float) -> str:
    """A duration for people: ``about 40 seconds``, ``about 90 seconds``, ``about 24 minutes``,
    ``about 1 hour 10 minutes``. Under two minutes in 10-second steps: whole minutes there say
    89 s as "about 1 minute" (#66 D8), a third off; from 2 minutes on, a minute is at most 25%."""
    if seconds < 50:
        return f"about {max(5, round(seconds / 5) * 5)} seconds"
    if seconds < 115:
        return f"about {round(seconds / 10) * 10} seconds"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {max(minutes, 1)} minute{'' if max(minutes, 1) == 1 else 's'}"
    hours, minutes = divmod(minutes, 60)
    rest = f" {minutes} minute{'' if minutes == 1 else 's'}" if minutes else ""
    return f"about {hours} hour{'' if hours == 1 else 's'}{rest}"


@dataclasses.dataclass(frozen=True)
class Status:
    """A job's state at one moment (``Job.status()``)."""

    phase: str  # one of PHASES
    title: str
    unit: str
    done: int
    total: int | None
    seconds_left: float | None = None  # at the job's own rate (None: not measured, or ended)
    note: str | None = None  # what it waits for ("next in line for a slot")
    error: str | None = None  # why it stopped or failed
    compiling: bool = False  # its work compiles shapes new to this process (``Job.compiling``)

    @property
    def ended(self) -> bool:
        return self.phase in ENDED

    @property
    def fraction(self) -> float:
        """For a progress bar: done / total (1 only when done)."""
        if self.phase == "done":
            return 1.0
        return min(self.done / self.total, 0.999) if self.total else 0.0

    def count(self) -> str:
        """``12 of 186 records`` (``nothing`` before a total is known)."""
        return f"{self.done:,} of {self.total:,} {self.unit}" if self.total is not None else "nothing yet"

    def words(self) -> str:
        """What the job is doing, after its title: the one caption of every panel."""
        if self.phase == "queued":
            return f"queued{f' ({self.note})' if self.note else ''}"
        if self.phase == "measuring":
            # What the first chunk does (issue 50: a model never run in this server compiles for a
            # minute or more before it, and the page said nothing meanwhile).
            first = " on a first chunk (a model new to this server compiles first)" if self.compiling else ""
            return f"{self.count()} · measuring this machine's rate{first}…"
        if self.phase == "running":
            left = f" · {about(self.seconds_left)} left" if self.seconds_left is not None else ""
            waiting = f" · {self.note}" if self.note else ""
            return f"{self.count()}{left}{waiting}"
        if self.phase == "cancelling":
            return f"cancelling: the chunk in flight finishes, then it stops ({self.count()} so far, kept)"
        if self.phase == "measured":
            left = self.total - self.done
            verb = "waits" if left == 1 else "wait"
            return f"rate measured on {self.count()}; the other {left:,} {verb} for Start on its page"
        if self.phase == "done":
            return f"done ({self.total:,} {self.unit})" if self.total is not None else "done"
        after = f" after {self.count()}, kept" if self.total is not None and self.done else ""
        why = {"cancelled": "cancelled", "stopped": "stopped (server busy)", "failed": "failed"}[self.phase]
        return f"{why}{after}"

    def line(self) -> str:
        """``Pseudo-perplexity of 40 records: 1,200 of 9,000 positions · about 3 minutes left``."""
        return f"{self.title}: {self.words()}"
