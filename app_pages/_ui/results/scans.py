"""Masked-marginal scans of one record (a page's residue range, or the whole sequence for the
Variants and Structure pages' maps): one masked pass per position, as a background job.

The scan is the core's plan (``jobs/plan.py``'s ``MaskedScan``: what is still needed, its cost,
its chunks), run by ``jobs_panel.follow_plan``. The positions go through the result store
(``passes.masked_log_probs``): a position masked once for a model and sequence is never run
again, by any page, session or process, and a scan that
was cancelled, interrupted or stopped by a busy server resumes where it stopped. The job's cost
is said before it starts when it is long (``jobs_panel.follow_plan``), with the cheaper wt-marginals
offered; while it runs, its progress and Cancel are on the page and in the sidebar.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from flamino_core.jobs import DONE, MaskedScan
from flamino_core.store import model_key

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.server.policy import hosted_mode


def scan_key(engine, sequence: str, positions: range, structure: str | None = None) -> tuple:
    digest = hashlib.sha256(sequence.encode()).hexdigest()[:24]
    return "scan", model_key(engine, structure), digest, positions.start, positions.stop


def masked_scan(engine, sequence: str, positions: range, label: str, what: str,
                cheaper: tuple[str, Callable[[], None]] | None = None,
                structure: str | None = None) -> np.ndarray | None:
    """(len(positions), vocab) masked log-probabilities once every position is stored, else None
    (the page then shows the job's progress, or its cost and a Start button, or why it stopped).

    Args:
      engine: the session's engine.
      sequence: the analysed sequence; ``positions``: 0-based, the range scanned.
      label: the positions as the page names them ("residues 101–250").
      what: what the scan is for ("the masked-marginal map").
      cheaper: (button label, callback) switching the page to wt-marginals.
      structure: a structure-aware model's 3Di letters (the passes are stored under them too).
    """
    plan = MaskedScan(engine, sequence, tuple(positions), structure, private=hosted_mode())
    stored = plan.stored()
    if stored is not None:
        return stored
    key = scan_key(engine, sequence, positions, structure)
    done = background.find(key)
    if done is not None and done.state == DONE and done.value is not None:
        return done.value  # this session's finished scan (all of it, even with a store that keeps nothing)
    job = jobs_panel.follow_plan(key, f"Masked scan of {label}", plan, engine, what=what, cheaper=cheaper)
    if job is not None and job.state == DONE and job.value is not None:
        return job.value  # complete (kept on the job too: a store that keeps nothing still shows it)
    return None
