"""What the model says of each record of a set, through the result store, as it arrives.

The Records table (mean entropy, pseudo-perplexity) and the Embeddings page's map (mean
embeddings) read what the store holds at once; the rest is one background job per kind of work
(``background.py``), drawn by ``jobs_panel.py``. Each job is a plan of the core's
(``flamino_core/jobs/plan.py``: what is still needed, its cost, its chunks), run by
``jobs_panel.follow_plan``:

* **per-record outputs**: one unmasked pass per record gives every layer's mean embedding and
  the per-residue entropy together (``passes.record_outputs``), so Records then Embeddings (or
  the reverse) runs each record once. The job sends a few records per engine call
  (``CHUNK_RESIDUES``), so rows fill in and the map gains points as it goes.
* **pseudo-perplexity**: every position of each record masked once (``passes.masked_log_probs``),
  in chunks of 64 positions; a record's value appears when its last chunk is in.

Values a job computed are also kept on the job (``Job.value`` holds them as they arrive), so a
store that keeps nothing (``FLAMINO_STORE=off``) still shows them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import numpy as np

from flamino_core.jobs import Job, MaskedSet, SetOutputs, stored_outputs
from flamino_core.store import RecordOutputs, default_store
from flamino_core.variants import pseudo_perplexity

from app_pages._ui.server import background, jobs_panel

CHUNK_RESIDUES = 2_000  # residues per engine call of a set's unmasked passes: the step of arrival
_pppl_memo: dict[tuple[str, str], float] = {}  # (model, sequence) -> pseudo-perplexity, once complete
_memo_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class SetValues:
    """Values for some records of a set (by sequence) and the job computing the rest (or None)."""

    values: dict[str, object]
    job: Job | None
    missing: int  # records without a value yet


def set_digest(sequences) -> str:
    return hashlib.sha256("\n".join(sequences).encode()).hexdigest()[:24]


# --- per-record outputs -------------------------------------------------------------------------------
def _pick(record: RecordOutputs, which: str):
    return record.entropy if which == "entropy" else record.means[int(which.removeprefix("mean/"))]


def record_outputs(engine, model: str, sequences: tuple[str, ...], which: str, what: str) -> SetValues:
    """Each record's ``which`` output: stored ones now, the rest from the set's job (started
    when quick, or once asked for after its cost was shown; ``what`` names the page's use).
    ``model``: the model's identifier (what a Ray worker loads)."""
    key = ("outputs", engine.fingerprint, set_digest(sequences))
    job = background.find(key)
    held: dict[str, RecordOutputs] = dict(job.value or {}) if job is not None else {}
    values = {s: _pick(r, which) for s, r in held.items()}
    missing_here = [s for s in dict.fromkeys(sequences) if s not in values]
    values.update(stored_outputs(engine, missing_here, which))
    missing = [s for s in dict.fromkeys(sequences) if s not in values]
    if missing or (job is not None and not job.finished):
        plan = outputs_plan(engine, model, sequences, known=frozenset(values))
        job = jobs_panel.follow_plan(key, f"Unmasked passes of {len(set(sequences)):,} records", plan, engine,
                                     what=what)
    return SetValues(values, job, len(missing))


def outputs_plan(engine, model: str, sequences: tuple[str, ...], known: frozenset[str] = frozenset()) -> SetOutputs:
    """The set's unmasked passes planned (``jobs/plan.py``), ``CHUNK_RESIDUES`` an engine call;
    ``known``: records whose outputs the page holds already (left out of the estimate)."""
    return SetOutputs(engine, model, tuple(sequences), CHUNK_RESIDUES, known)


def mean_entropies(engine, model: str, sequences: tuple[str, ...]) -> SetValues:
    found = record_outputs(engine, model, sequences, "entropy", "the mean entropy column")
    return dataclasses.replace(found, values={s: float(np.mean(v)) for s, v in found.values.items()})


# --- pseudo-perplexity ----------------------------------------------------------------------------------
def stored_pseudo_perplexities(engine, sequences) -> dict[str, float]:
    """Each record's pseudo-perplexity when every position's masked pass is stored."""
    store, model, found = default_store(), engine.fingerprint, {}
    for sequence in dict.fromkeys(sequences):
        with _memo_lock:
            known = _pppl_memo.get((model, sequence))
        if known is None:
            held = store.masked(model, sequence, range(len(sequence)))
            if len(held) < len(sequence):
                continue
            known = pseudo_perplexity(np.stack([held[p] for p in range(len(sequence))]), sequence)
            with _memo_lock:
                _pppl_memo[(model, sequence)] = known
        found[sequence] = known
    return found


def pseudo_perplexities(engine, model: str, sequences: tuple[str, ...], asked: bool) -> SetValues:
    """Each record's pseudo-perplexity: stored ones now; the rest from the set's job once
    ``asked`` (its cost is shown first when it is long)."""
    key = pppl_key(engine, sequences)
    job = background.find(key)
    values = dict(job.value or {}) if job is not None else {}
    values.update(stored_pseudo_perplexities(engine, [s for s in dict.fromkeys(sequences) if s not in values]))
    missing = [s for s in dict.fromkeys(sequences) if s not in values]
    if (missing and asked) or (job is not None and not job.finished):
        job = jobs_panel.follow_plan(key, f"Pseudo-perplexity of {len(set(sequences)):,} records",
                                     pppl_plan(engine, model, sequences, known=frozenset(values)), engine,
                                     what="the pseudo-perplexity column")
    return SetValues(values, job, len(missing))


def pppl_key(engine, sequences) -> tuple[str, str, str]:
    return "pppl", engine.fingerprint, set_digest(sequences)


def pppl_plan(engine, model: str, sequences, known: frozenset[str] = frozenset()) -> MaskedSet:
    """Every position of each record masked (``jobs/plan.py``), each record's pseudo-perplexity
    once its positions are in; ``known``: records whose value the page holds already."""
    return MaskedSet(engine, model, tuple(sequences), pseudo_perplexity, known)
