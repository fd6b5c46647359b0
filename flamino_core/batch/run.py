"""Running a batch job: options checked, the folder locked, the manifest kept, then the two stages.

``run_batch`` refuses what cannot work before anything is computed (options, inputs, the
model identifier, an output folder holding another job), reads the input into shards
(``inputs``), computes the pending ones on Ray (``ray_driver``) and writes the summary and
``failures.jsonl`` once every shard file exists.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Sequence, TextIO

from flamino_core.atomic import TEMPORARY_MARK, written_atomically
from flamino_core.options import (
    BATCH_EMBED_PARTS, BATCH_SCORE_PARTS, DEFAULT_SHARD_SIZE, DEFAULT_STRATEGY, DEFAULT_TOKEN_BUDGET, LONG_POLICIES,
    names,
)
from flamino_core.progress import Progress, duration, say as say_on_stderr
from flamino_core.batch.inputs import fasta_inputs, spool_shards
from flamino_core.batch.job import (
    COMMANDS, FAILURES, MANIFEST, WORK_DIR, BatchError, DirectoryLock, Job, clear, file_fingerprint, identity,
    identity_differences, job_key, now, shard_path, spool_path, write_json,
)
from flamino_core.batch.ray_driver import run_on_ray
from flamino_core.batch.results import shard_info


@dataclasses.dataclass
class BatchSummary:
    """What a job produced, over all runs, and what this run did."""

    out_dir: str
    records: int
    rows: int
    residues: int
    failures: int
    shards: int
    shards_skipped: int  # already complete when this run started
    shards_run: int
    seconds: float  # compute stage of this run
    residues_run: int  # residues computed by this run
    actors: int

    @property
    def residues_per_s(self) -> float:
        return self.residues_run / self.seconds if self.seconds > 0 else 0.0


class JobProgress:
    """Shards, sequences, residues/s and an ETA: a line every 30 s in a log, in place on a terminal."""

    def __init__(self, total_residues: int, total_shards: int, stream: TextIO | None = None):
        self.printer = Progress(every_percent=None, every_seconds=30, stream=stream)
        self.total_residues, self.total_shards = total_residues, total_shards
        self.start = time.monotonic()
        self.shards = self.rows = self.residues = 0

    def update(self, rows: int, residues: int) -> None:
        self.shards += 1
        self.rows += rows
        self.residues += residues
        now_ = time.monotonic()
        self.printer.show(self.line(now_), self.shards / max(self.total_shards, 1),
                          self.shards >= self.total_shards, now=now_)

    def line(self, now_: float) -> str:
        elapsed = now_ - self.start
        rate = self.residues / elapsed if elapsed > 0 else 0.0
        left = self.total_residues - self.residues
        if left <= 0:
            eta = "done"
        elif self.shards >= 2 and self.residues >= 0.01 * self.total_residues:  # the first includes compiling
            eta = duration(left / rate)
        else:
            eta = "?"
        return (f"batch: {self.shards}/{self.total_shards} shards, {self.rows:,} sequences, "
                f"{rate:,.0f} residues/s, ETA {eta}")


def run_batch(
    command: str,
    inputs: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    model: str | None = None,
    *,
    include: Iterable[str] = ("mean",),
    long: str = "window",
    strategy: str | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    token_budget: int | None = None,
    ray_address: str = "local",
    actors: int | None = None,
    cpus_per_actor: float = 1,
    gpus_per_actor: float | None = None,
    overwrite: bool = False,
    store: bool = True,
    fold: dict | None = None,
    say: Callable[[str], None] = say_on_stderr,
) -> BatchSummary:
    """Run (or continue) a batch job; see the package docstring for what is written where.

    Args:
      command: ``embed`` or ``score``.
      inputs: FASTA files (plain or gzip) or folders of them, read in the order given.
      out_dir: output folder; created if needed; a rerun with the same job continues it.
      model: any identifier ``load_weights`` accepts (each actor loads it once).
      include: ``mean``, ``per_tok``, ``logits`` (``score``: ``mean`` only).
      long: policy for sequences over 1022 residues (see ``Engine.run``).
      strategy: for ``score``: a map strategy, ``options.names("map")`` (default ``masked-marginals``).
      shard_size: records per shard (the unit of work and of resumption).
      token_budget: tokens per forward pass (default: the engine's).
      ray_address: ``local`` starts Ray in this process; ``auto`` or an address joins a cluster.
      actors: number of model actors (default: one per GPU, else one per ``cpus_per_actor`` CPUs).
      cpus_per_actor: CPUs reserved per actor (its XLA threads on CPU).
      gpus_per_actor: GPUs per actor (default: 1 if the cluster has GPUs, else 0).
      overwrite: delete a different job's results in ``out_dir`` instead of refusing.
      store: ``score`` with a masked strategy reads and keeps its masked passes in the result
        store (``FLAMINO_CACHE`` on each node); False computes them without it.
      fold: ``fold``'s options (``passes``, ``chunk_size``, ``stem_precision``, ``max_residues``).

    Raises:
      BatchError: unusable inputs, options or model, or ``out_dir`` holds another job.
    """
    include, strategy = _checked_options(command, include, long, strategy, shard_size, actors)
    fold, files = _checked_fold(fold) if command == "fold" else None, fasta_inputs(inputs)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise BatchError(f"output {out} exists and is not a folder")
    model_id, model_info = _checked_fold_model(model, say) if command == "fold" else _checked_model(model, say)
    job = Job(command, str(out.absolute()), model_id, include, long, strategy, shard_size,
              token_budget or DEFAULT_TOKEN_BUDGET, files=tuple(str(f) for f in files), store=store, fold=fold)

    out.mkdir(parents=True, exist_ok=True)
    with DirectoryLock(out):
        job, manifest = _claim_folder(out, job, files, model_info, overwrite)
        pending = _pending_shards(out, job, files, manifest, say)
        this_run = _compute_pending(out, job, manifest, pending, ray_address, actors, cpus_per_actor, gpus_per_actor,
                                    say)
        return _finish(out, job, manifest, this_run)


def _checked_options(command: str, include: Iterable[str], long: str, strategy: str | None, shard_size: int,
                     actors: int | None) -> tuple[tuple[str, ...], str | None]:
    """The options refused before anything starts; returns ``include`` without repeats and the
    strategy ``score`` uses (None for ``embed``)."""
    if command not in COMMANDS:
        raise BatchError(f"unknown batch command {command!r}; choose {' or '.join(COMMANDS)}")
    include = tuple(dict.fromkeys(include))
    allowed = {"embed": BATCH_EMBED_PARTS, "score": BATCH_SCORE_PARTS, "fold": ()}[command]
    unknown = [part for part in include if part not in allowed]
    if unknown:
        raise BatchError(f"--include: {', '.join(unknown)} not available for batch {command}; "
                         f"choose from {', '.join(allowed)}")
    if command == "embed" and not include:
        raise BatchError("--include: nothing to compute; choose from " + ", ".join(BATCH_EMBED_PARTS))
    if long not in LONG_POLICIES:
        raise BatchError(f"--long must be one of {', '.join(LONG_POLICIES)}")
    if command == "score":
        strategy = strategy or DEFAULT_STRATEGY
        if strategy not in names("map"):
            raise BatchError(f"--strategy must be one of {', '.join(names('map'))}")
    else:
        strategy = None
    if shard_size < 1:
        raise BatchError("--shard-size must be at least 1")
    if actors is not None and actors < 1:
        raise BatchError("--actors must be at least 1")
    return include, strategy


def _checked_model(model: str | None, say: Callable[[str], None]) -> tuple[str, dict]:
    """The model identifier the actors load and its configuration (part of the job's identity).

    The weights are loaded here, once: a bad name fails before the folder is touched, and the
    download cache is filled for the actors."""
    from flamino_core.weights.loading import ModelError, default_model, load_weights

    try:
        weights = load_weights(model)
    except ModelError as err:
        raise BatchError(str(err)) from None
    if weights.is_random:
        say("note: untrained test model (random weights): outputs are not biology")
    # Resolved here: actors on other nodes lack this environment.
    return model or default_model(), weights.config.to_dict()


def _checked_fold(options: dict | None) -> dict:
    """A fold job's options, refused before anything starts where `flamino fold` refuses them."""
    from flamino_core.model.esmfold.config import STEM_PRECISIONS

    options = {"passes": None, "chunk_size": 64, "stem_precision": "fp32", "max_residues": None, **(options or {})}
    if options["passes"] is not None and options["passes"] < 1:
        raise BatchError(f"--passes {options['passes']}: the trunk runs at least once (1 = no recycling)")
    if options["chunk_size"] < 0:
        raise BatchError(f"--chunk-size {options['chunk_size']}: a number of rows, or 0 for all at once")
    if options["max_residues"] is not None and options["max_residues"] < 1:
        raise BatchError(f"--max-residues {options['max_residues']}: at least one residue")
    if options["stem_precision"] not in STEM_PRECISIONS:
        raise BatchError(f"--stem-precision must be one of {', '.join(STEM_PRECISIONS)}")
    return options


def _checked_fold_model(model: str | None, say: Callable[[str], None]) -> tuple[str, dict]:
    """An ESMFold (v1) identifier and its shape (part of the job's identity), read without its
    weights (esmfold_v1's are 8.4 GB: only the actors load them). A door: ``-m``'s text is parsed
    here (the job keeps the text, its manifest is JSON)."""
    from flamino_core.model.model_id import ModelId
    from flamino_core.structure.folding.fold_files import known_config
    from flamino_core.structure.folding.prediction import RANDOM_LABEL

    if not model:
        raise BatchError("batch fold needs a model (-m): esmfold_v1, an ESMFold folder or random:esmfold-tiny")
    parsed = ModelId.parse(model)
    if parsed.fold_family() == "esmfold2":
        raise BatchError(f"{model}: batch fold folds with ESMFold (v1) models for now; "
                         "fold ESMFold2 models with `flamino fold`")
    config = known_config(parsed)
    if config is None:
        raise BatchError(f"{model}: not an ESMFold model flamino can read (a preset, random:esmfold-tiny, or a "
                         "folder with the config.json of EsmForProteinFolding.save_pretrained)")
    if parsed.is_random:
        say(f"note: {RANDOM_LABEL}")
    return model, dataclasses.asdict(config)


def _claim_folder(out: Path, job: Job, files: list[Path], model_info: dict, overwrite: bool) -> tuple[Job, dict]:
    """``job`` with its key, and the manifest it continues (or a new one) with this run's inputs;
    temporary files a killed writer left are removed (called under the folder's lock).

    A folder holding another job's results, or shard files without a manifest, is refused, or
    cleared with ``overwrite``."""
    for stale in out.glob(f".*{TEMPORARY_MARK}*"):  # left by a killed writer; never a finished file
        stale.unlink(missing_ok=True)
    manifest_path = out / MANIFEST
    old = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    previous_inputs = {i["abs_path"]: i for i in (old or {}).get("input_files", [])}
    fingerprints = [file_fingerprint(f, previous_inputs.get(str(f.absolute()))) for f in files]
    job_identity = identity(job, fingerprints, model_info)
    job = dataclasses.replace(job, key=job_key(job_identity))
    if old is not None and old.get("key") != job.key:
        if not overwrite:
            changes = identity_differences(old.get("identity", {}), job_identity) or ["unreadable manifest"]
            raise BatchError(f"{out} holds the results of a different job ({'; '.join(changes)}); "
                             "use another output folder, or --overwrite to replace them")
        clear(out)
        old = None
    elif old is None and any(out.glob("shard-*.parquet")):
        if not overwrite:
            raise BatchError(f"{out} has shard files but no {MANIFEST}; use --overwrite to replace them")
        clear(out)
    manifest = old or {"identity": job_identity, "key": job.key, "created": now()}
    manifest.update(input_files=fingerprints, job=job.to_dict())
    return job, manifest


def _pending_shards(out: Path, job: Job, files: list[Path], manifest: dict, say: Callable[[str], None]) -> list[int]:
    """The shards whose file is not written yet, after reading the inputs into shards when the
    manifest says that did not finish, or a pending shard's spooled input is gone."""
    shards = manifest.get("shards")
    pending = [] if shards is None else _unwritten(out, job, len(shards["records"]))
    if manifest.get("input_complete") and all(spool_path(out, k).exists() for k in pending):
        return pending
    manifest_path = out / MANIFEST
    manifest["input_complete"] = False
    write_json(manifest_path, manifest)
    say(f"reading {len(files)} input file(s)")
    records, residues, issues = spool_shards(job, files, progress=lambda n: say(f"read {n:,} records"))
    errors = [i for i in issues if i.level == "error"]
    manifest.update(shards={"records": records, "residues": residues}, input_complete=True, records=sum(records),
                    file_issues=[{"file": files[i.file].as_posix(), "reason": i.message} for i in errors],
                    file_warnings=[{"file": files[i.file].as_posix(), "note": i.message}
                                   for i in issues if i.level != "error"])
    for issue in issues:
        say(f"{issue.level}: {issue.message}")
    write_json(manifest_path, manifest)
    return _unwritten(out, job, len(records))


def _unwritten(out: Path, job: Job, n_shards: int) -> list[int]:
    """The shards of ``job`` with no complete shard file in ``out``."""
    return [k for k in range(n_shards) if shard_info(shard_path(out, k), job.key) is None]


class _RunStats(NamedTuple):
    """What this run computed: the summary's last fields and the manifest's ``runs`` entry."""

    shards: int
    seconds: float  # the compute stage
    residues: int
    actors: int
    nodes: dict[str, dict]


def _compute_pending(out: Path, job: Job, manifest: dict, pending: list[int], ray_address: str, actors: int | None,
                     cpus_per_actor: float, gpus_per_actor: float | None, say: Callable[[str], None]) -> _RunStats:
    """The ``pending`` shards computed on Ray (nothing when none is), after saying how many were done."""
    n_shards = len(manifest["shards"]["records"])
    skipped = n_shards - len(pending)
    if skipped == n_shards:
        say(f"all {n_shards} shards were already done")
    elif skipped:
        say(f"{skipped} of {n_shards} shards already done; computing the other {len(pending)}")
    if not pending:
        return _RunStats(0, 0.0, 0, 0, {})
    manifest["complete"] = False
    write_json(out / MANIFEST, manifest)
    if job.command == "fold":
        from flamino_core.batch.fold_shards import spoken_limit

        say(spoken_limit(job))
    tally = _ComputeTally(out / MANIFEST, manifest, pending)
    seconds, n_actors = run_on_ray(job, pending, ray_address, actors, cpus_per_actor, gpus_per_actor,
                                   tally.on_start, tally.on_shard, say)
    return _RunStats(len(pending), seconds, tally.progress.residues, n_actors, tally.nodes)


class _ComputeTally:
    """What the compute stage has finished: progress on stderr, per-node totals, and the
    finished shards saved into the manifest now and then."""

    def __init__(self, manifest_path: Path, manifest: dict, pending: list[int]):
        self.manifest_path, self.manifest = manifest_path, manifest
        self.progress = JobProgress(sum(manifest["shards"]["residues"][k] for k in pending), len(pending))
        self.finished = set(manifest.get("finished_shards", []))
        self.last_save = time.monotonic()
        self.nodes: dict[str, dict] = {}

    def on_start(self) -> None:
        self.progress.start = time.monotonic()  # the rate counts computing, not Ray's start

    def on_shard(self, shard: dict) -> None:
        self.progress.update(shard["rows"], shard["residues"])
        self.finished.add(shard["shard"])
        node = self.nodes.setdefault(shard["node"], {"shards": 0, "residues": 0, "seconds": 0.0, "cpu_seconds": 0.0})
        node.update(shards=node["shards"] + 1, residues=node["residues"] + shard["residues"],
                    seconds=round(node["seconds"] + shard["seconds"], 3),
                    cpu_seconds=round(node["cpu_seconds"] + shard["cpu_seconds"], 3))
        if time.monotonic() - self.last_save > 10:  # the shard files are the truth; this is for people
            self.manifest["finished_shards"] = sorted(self.finished)
            write_json(self.manifest_path, self.manifest)
            self.last_save = time.monotonic()


def _finish(out: Path, job: Job, manifest: dict, this_run: _RunStats) -> BatchSummary:
    """Check every shard file exists, then write failures.jsonl and the summary into the manifest."""
    n_shards = len(manifest["shards"]["records"])
    infos = [shard_info(shard_path(out, k), job.key) for k in range(n_shards)]
    missing = [k for k, info in enumerate(infos) if info is None]
    if missing:
        raise BatchError(f"{len(missing)} shard(s) were not written (first: {missing[0]}); rerun the same command")
    failures = [{"index": None, "file": i["file"], "id": None, "reason": i["reason"]}
                for i in manifest.get("file_issues", [])]
    failures += [f for info in infos for f in info["failures"]]
    if job.command == "fold":  # folds.csv, as `flamino fold` writes it, from the shard files in order
        from flamino_core.batch.fold_shards import write_fold_table

        write_fold_table(out, n_shards)
    with written_atomically(out / FAILURES) as tmp, open(tmp, "w") as handle:
        for failure in failures:
            handle.write(json.dumps(failure) + "\n")
    summary = BatchSummary(
        out_dir=str(out), records=manifest["records"], rows=sum(i["rows"] for i in infos),
        residues=sum(i["residues"] for i in infos), failures=len(failures), shards=n_shards,
        shards_skipped=n_shards - this_run.shards, shards_run=this_run.shards, seconds=this_run.seconds,
        residues_run=this_run.residues, actors=this_run.actors,
    )
    manifest.update(finished_shards=list(range(n_shards)), complete=True, finished=now(),
                    summary=dataclasses.asdict(summary) | {"residues_per_s": summary.residues_per_s})
    runs = manifest.setdefault("runs", [])
    # nodes: per Ray node id, the shards and residues it computed in this run, with its actors'
    # seconds of computing them and the CPU seconds that took (residues / cpu_seconds: a rate a
    # busy machine disturbs less than residues / seconds)
    runs.append({"finished": now(), "shards": this_run.shards, "seconds": round(this_run.seconds, 3),
                 "actors": this_run.actors, "residues": this_run.residues, "nodes": this_run.nodes})
    write_json(out / MANIFEST, manifest)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)
    return summary
