"""Many records folded in one process (``flamino fold``): the work said before it starts, records
grouped by length bucket, progress with the time left, and a run that resumes.

- **Buckets**: a fold's length is padded to a multiple of ``PAD_TO`` (64), and each padded length is
  one compiled program; records are folded bucket by bucket (shortest first, input order within),
  so each program is compiled once per process (and kept in JAX's persistent compilation cache).
- **Plan**: records, lengths, buckets, the longest fold's memory, this device's length limit and the
  time (``fold_time``'s estimate), said before any fold; records over the limit refused by the
  core's one rule (``prediction.length_refusal``).
- **Resume**: each finished fold is noted in ``DIR/.folds.journal.jsonl`` (the model's store key,
  the record's name, file and sequence digest, its table row) after its file is written whole
  (``atomic.written_atomically``). A record whose note and file are both there is not folded again;
  the table is written from the notes, in input order, every record once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from flamino_core.model.esmfold.folded import PAD_TO, padded_length
from flamino_core.structure.folding.prediction import TRAINED_RESIDUES, fold_memory, length_refusal

JOURNAL = ".folds.journal.jsonl"


@dataclasses.dataclass(frozen=True)
class FoldTask:
    """One record to fold: its place in the input, id, residues (an ESMFold2 complex's chains
    joined by ':') and output file name; ``pad_to``: the padding its length is compiled at (None:
    its own length, ESMFold2's); ``trained``: its stem's trained length, when it has one to flag."""

    index: int
    name: str
    sequence: str
    file: str
    pad_to: int | None = PAD_TO
    trained: int | None = None

    @property
    def length(self) -> int:
        return len(self.sequence.replace(":", ""))

    @property
    def bucket(self) -> int:
        return padded_length(self.length, self.pad_to)

    @property
    def past_trained(self) -> bool:
        return self.trained is not None and self.length > self.trained

    def note_key(self, model_key: str) -> str:
        digest = hashlib.sha256(self.sequence.encode()).hexdigest()[:16]
        return json.dumps([model_key, self.name, self.file, digest])


@dataclasses.dataclass(frozen=True)
class FoldRunPlan:
    """What a run will do: ``todo`` in fold order (bucket by bucket), ``done`` (already in the
    output folder: their table rows), ``refused`` ((name, why) before any work), the length limit
    and where it comes from, and the estimate (``seconds``: per task, in fold order; ``compile``:
    (low, high) seconds per bucket not compiled yet)."""

    todo: tuple[FoldTask, ...]
    done: dict[int, dict]
    refused: tuple[tuple[str, str], ...]
    longest: int
    where: str
    seconds: tuple[float, ...]
    compile: tuple[float, float] | None
    memory: str
    device: str = ""  # this device's own limit in words, where ``longest`` is lower (--max-residues)

    def lines(self) -> list[str]:
        """The plan in words, one line each (said on stderr before the work)."""
        lengths = [t.length for t in self.todo]
        buckets = Counter(t.bucket for t in self.todo)
        padded = any(t.pad_to for t in self.todo)
        grouping = (f"in {len(buckets)} length bucket(s) of {PAD_TO}: "
                    + ", ".join(f"<= {b:,} ({n})" for b, n in sorted(buckets.items())) if padded
                    else f"in {len(buckets)} distinct length(s), each compiled once")
        said = [f"plan: {len(self.todo)} record(s) to fold"
                + (f" ({_span(lengths)} residues) {grouping}" if lengths else "")
                + (f"; {len(self.done)} already folded in this folder (kept)" if self.done else "")
                + (f"; {len(self.refused)} refused" if self.refused else "")]
        said.append(f"length limit: {self.longest:,} residues {self.where}"
                    + (f" ({self.device})" if self.device else ""))
        if self.todo and not self.memory:
            said.append("estimate: none for this model yet (no memory or time model of ESMFold2)")
        elif self.todo:
            said.append(f"memory: {self.memory}")
            compile_words = "" if not self.compile else (
                f", plus {self.compile[0]:.0f}-{self.compile[1]:.0f} s to compile each of {len(buckets)} bucket(s) "
                "the first time (less from the persistent compilation cache)")
            said.append(f"estimate: {duration_words(sum(self.seconds))} of folding{compile_words}")
        past = [t for t in self.todo if t.past_trained]
        if past:
            said.append(f"note: {len(past)} record(s) over {TRAINED_RESIDUES:,} residues, folded past the ESM-2 "
                        "stem's trained length (1,022 at most): flagged in their file and the table")
        return said


def _platform() -> str:
    from flamino_core.engine import hardware

    return hardware.detect().platform


def _span(lengths: list[int]) -> str:
    low, high = min(lengths), max(lengths)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def duration_words(seconds: float) -> str:
    from flamino_core.jobs.status import about

    return about(seconds) if seconds >= 1 else "under a second"


def plan_run(records: Sequence, out: Path, config, model_key: str, longest: int,
             where: str, chunk_size: int | None, stem_precision: str, passes: int | None,
             platform: str | None = None, rates=None, device: str = "", suffix: str = ".pdb",
             files: Sequence[str] | None = None) -> FoldRunPlan:
    """The run over ``records`` (``.id``, ``.sequence``): each refused by the length rule
    (``longest``, said as ``where``), already done in ``out`` (``done_rows``), or to fold, ordered
    by bucket; file names given in input order to every record, refused ones too (``file_name``),
    so a rerun names them alike whatever its limit; ``files``: the names given already (``flamino
    batch fold`` names a shard's records over the whole input).
    ``config``: ESMFold's (v1: lengths padded, the estimate, the trained length flagged), or None
    for ESMFold2 (lengths compiled as they are, no estimate yet, nothing flagged)."""
    from flamino_core.structure.folding.fold_time import fold_time_estimate

    pad_to, trained = (PAD_TO, TRAINED_RESIDUES) if config is not None else (None, None)
    refused, tasks, used = [], [], set()
    for i, record in enumerate(records):
        name = files[i] if files is not None else file_name(record.id, used, suffix)
        task = FoldTask(i, record.id, record.sequence.upper(), name, pad_to, trained)
        reason = length_refusal(task.length, False, longest=longest, where=where)
        if reason:
            refused.append((record.id, reason))
        else:
            tasks.append(task)
    notes = done_rows(out, model_key)
    done = {t.index: notes[t.note_key(model_key)] for t in tasks
            if t.note_key(model_key) in notes and (out / t.file).is_file()}
    todo = sorted((t for t in tasks if t.index not in done), key=lambda t: (t.bucket, t.index))
    estimates = [fold_time_estimate(config, t.length, model_key, platform, rates, passes)
                 for t in todo] if config is not None else []
    longest_task = max(todo, key=lambda t: t.length, default=None)
    memory = "" if longest_task is None or config is None else fold_memory(
        config, longest_task.length, chunk_size, stem_precision=stem_precision,
        platform=platform or _platform()).describe()
    compile_range = next((e.compile for e in estimates if e.compile), None)
    seconds = tuple(e.compute for e in estimates) if estimates else (0.0,) * len(todo)
    return FoldRunPlan(tuple(todo), done, tuple(refused), longest, where, seconds, compile_range, memory, device)


def done_rows(out: Path, model_key: str) -> dict[str, dict]:
    """The journal's notes of finished folds by this model (``FoldTask.note_key``): their table rows.
    A line cut short by a kill (the last one) is ignored."""
    rows = {}
    try:
        lines = (out / JOURNAL).read_text().splitlines()
    except OSError:
        return rows
    for line in lines:
        try:
            note = json.loads(line)
            key, row = note["key"], note["row"]
        except (ValueError, KeyError, TypeError):
            continue
        if json.loads(key)[0] == model_key:
            rows[key] = row
    return rows


def run_folds(plan: FoldRunPlan, out: Path, model_key: str, fold_one: Callable[[FoldTask], dict],
              say: Callable[[str], None],
              folded_in: Callable[[FoldTask, float], None] | None = None) -> dict[int, dict]:
    """Fold ``plan.todo`` in its order with ``fold_one`` (which writes the task's file whole and
    returns its table row), noting each in the journal once its file is written, saying progress
    and the time left. Returns every row of the run (the plan's done ones too) by input index."""
    from flamino_core.atomic import open_own_file
    from flamino_core.progress import duration

    rows, clock, seen = dict(plan.done), _TimeLeft(plan), set()
    for n, (task, seconds) in enumerate(zip(plan.todo, plan.seconds), 1):
        t0 = time.perf_counter()
        row = fold_one(task)
        took = time.perf_counter() - t0
        with open_own_file(out / JOURNAL, "a") as journal:
            journal.write(json.dumps({"key": task.note_key(model_key), "row": row}) + "\n")
        rows[task.index] = row
        if folded_in is not None:
            folded_in(task, took)
        left = clock.after(task, seconds, took, first_of_bucket=task.bucket not in seen)
        seen.add(task.bucket)
        bucket = f", bucket {task.bucket:,}" if task.pad_to else ""
        say(f"folded {task.name} ({n}/{len(plan.todo)}, {task.length:,} residues{bucket}) "
            f"in {duration(took)}: mean pLDDT {row['mean_plddt']}, pTM {row['ptm']}"
            + (f", ipTM {row['iptm']}" if row.get("iptm") not in (None, "") else "")
            + (f"; {duration_words(left)} left" if n < len(plan.todo) else ""))
    return rows


class _TimeLeft:
    """The time left after each fold: the plan's remaining arithmetic at this run's pace on folds
    of a bucket already compiled (a compilation's seconds say nothing of the arithmetic), plus a
    compilation per bucket not reached yet; without an estimate (ESMFold2), the mean fold so far
    times the folds left."""

    def __init__(self, plan: FoldRunPlan):
        self.plan, self.done, self.took = plan, 0, 0.0
        self.compile = sum(plan.compile) / 2 if plan.compile else 0.0
        self.compute_left = sum(plan.seconds)
        self.buckets_left = {t.bucket for t in plan.todo}
        self.warm_took = self.warm_expected = 0.0

    def after(self, task: FoldTask, seconds: float, took: float, first_of_bucket: bool) -> float:
        self.done, self.took, self.compute_left = self.done + 1, self.took + took, self.compute_left - seconds
        self.buckets_left.discard(task.bucket)
        if not first_of_bucket:
            self.warm_took, self.warm_expected = self.warm_took + took, self.warm_expected + seconds
        if not any(self.plan.seconds):
            return self.took / self.done * (len(self.plan.todo) - self.done)
        pace = self.warm_took / self.warm_expected if self.warm_expected > 0 else 1.0
        return max(self.compute_left, 0.0) * pace + self.compile * len(self.buckets_left)


def row_flag(task: FoldTask) -> str:
    """The table's ``past_trained_length`` value: ``yes`` past the stem's trained length, else ``no``."""
    return "yes" if task.past_trained else "no"


def file_name(record_id: str, used: set[str], suffix: str = ".pdb") -> str:
    """The record's id as a file name (characters other than letters, digits, '.', '-' and '_' as
    '_'), numbered when an earlier record of this run took it; added to ``used``."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", record_id)[:100] or "record"
    name, n = f"{stem}{suffix}", 1
    while name in used:
        n += 1
        name = f"{stem}_{n}{suffix}"
    used.add(name)
    return name
