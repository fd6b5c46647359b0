"""Masked-marginal scans of one record (a page's residue range, or the whole sequence for the
Variants and Structure pages' maps): one masked pass per position, as a background job.

The positions go through the result store (``passes.masked_log_probs``): a position masked once
for a model and sequence is never run again, by any page, session or process, and a scan that
was cancelled, interrupted or stopped by a busy server resumes where it stopped. The job's cost
is said before it starts when it is long (``jobs_panel.follow``), with the cheaper wt-marginals
offered; while it runs, its progress and Cancel are on the page and in the sidebar.
"""

from __future__ import annotations

import hashlib
from typing import Callable

import numpy as np

from flamino_core.jobs import background as jobs

from flamino_core.store import passes
from flamino_core.jobs.background import DONE
from flamino_core.jobs import pass_cost
from flamino_core.store.result_store import default_store

from app_pages._ui.server import background, jobs_panel
from app_pages._ui.server.policy import hosted_mode

HOSTED = hosted_mode()


def scan_key(engine, sequence: str, positions: range, structure: str | None = None) -> tuple:
    digest = hashlib.sha256(sequence.encode()).hexdigest()[:24]
    return "scan", passes.model_key(engine, structure), digest, positions.start, positions.stop


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
    store, model = default_store(), passes.model_key(engine, structure)
    with_structure = {"structure": structure} if structure else {}
    wanted = list(positions)
    held = store.held_positions(model, sequence)
    if all(p in held for p in wanted):  # read back (a damaged value re-runs)
        return passes.masked_log_probs(engine, sequence, wanted, store=store, **with_structure)
    key = scan_key(engine, sequence, positions, structure)
    done = background.find(key)
    if done is not None and done.state == DONE and done.value is not None:
        return done.value  # this session's finished scan (all of it, even with a store that keeps nothing)

    def cost() -> jobs_panel.Cost:
        # A hosted server counts every position: "236 masked passes" for a 300-residue range told
        # a visitor that someone else had analysed this sequence (issue #26, item 11).
        missing = len(wanted) if HOSTED else sum(p not in held for p in wanted)
        seconds = pass_cost.masked_seconds(engine, [(len(sequence), missing)])
        return jobs_panel.Cost(missing, "masked pass", "masked passes", "one per position", seconds)

    job = jobs_panel.follow(key, f"Masked scan of {label}", "positions", _work(engine, sequence, wanted, with_structure), cost,
                            what=what, cheaper=cheaper, model=jobs_panel.engine_name(engine))
    if job is not None and job.state == DONE and job.value is not None:
        return job.value  # complete (kept on the job too: a store that keeps nothing still shows it)
    return None


def _work(engine, sequence: str, positions: list[int], with_structure: dict):
    def work(job: jobs.Job, first_only: bool = False):
        metered, store = background.metered(engine, job), default_store()
        if first_only:  # one chunk measures this machine's rate; the page then knows the rest's cost
            held = store.held_positions(passes.model_key(engine, with_structure.get("structure")), sequence)
            missing = [p for p in positions if p not in held]
            if len(missing) > passes.CHUNK:
                before = len(positions) - len(missing)
                passes.masked_log_probs(metered, sequence, missing[:passes.CHUNK], store=store,
                                        progress=lambda done, _: job.progress(before + done, len(positions)),
                                        **with_structure)
                return None
        return passes.masked_log_probs(metered, sequence, positions, store=store, progress=job.progress,
                                       cancelled=job.cancelled, **with_structure)

    return work
