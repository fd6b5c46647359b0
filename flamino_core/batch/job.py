"""A batch job's identity (what must match for a rerun to continue it), its files and its lock."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from flamino_core.atomic import open_own_file, written_atomically

COMMANDS = ("embed", "score", "fold")
MANIFEST = "manifest.json"
FAILURES = "failures.jsonl"
WORK_DIR = ".work"
FORMAT_VERSION = 1


class BatchError(ValueError):
    """A job that cannot start or continue; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Job:
    """Everything a worker needs to compute a shard; its ``key`` names the job's results."""

    command: str
    out_dir: str
    model: str
    include: tuple[str, ...]
    long: str
    strategy: str | None
    shard_size: int
    token_budget: int
    key: str = ""
    files: tuple[str, ...] = ()
    # Masked passes read from and kept in the result store (not part of the job's identity:
    # the numbers are the same either way).
    store: bool = True
    # ``fold``: how each record is folded (passes, chunk_size, stem_precision, max_residues); None otherwise.
    fold: dict | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Job":
        data = dict(data)
        data["include"], data["files"] = tuple(data["include"]), tuple(data["files"])
        return cls(**data)


def shard_path(out_dir: str | os.PathLike, shard: int) -> Path:
    return Path(out_dir) / f"shard-{shard:05d}.parquet"


def spool_path(out_dir: str | os.PathLike, shard: int) -> Path:
    return Path(out_dir) / WORK_DIR / f"input-{shard:05d}.parquet"


def file_fingerprint(path: Path, previous: dict | None = None) -> dict:
    """Size, mtime and SHA-256 of an input file; the hash is reused while size and mtime match."""
    stat = path.stat()
    entry = {"path": str(path), "abs_path": str(path.absolute()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if previous and previous.get("size") == stat.st_size and previous.get("mtime_ns") == stat.st_mtime_ns:
        entry["sha256"] = previous["sha256"]
        return entry
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    entry["sha256"] = digest.hexdigest()
    return entry


def identity(job: Job, inputs: list[dict], model_info: dict) -> dict:
    """What must match for a rerun to continue a job (not actors or batching: results don't depend on them)."""
    options = {"include": list(job.include), "long": job.long, "strategy": job.strategy}
    if job.command == "fold":  # only a fold job's: every other job's key stays what it was
        options["fold"] = job.fold
    return {
        "format": FORMAT_VERSION,
        "command": job.command,
        "model": job.model,
        "model_config": model_info,
        "options": options,
        "shard_size": job.shard_size,
        "inputs": [{"path": i["abs_path"], "size": i["size"], "sha256": i["sha256"]} for i in inputs],
    }


def job_key(job_identity: dict) -> str:
    return hashlib.sha256(json.dumps(job_identity, sort_keys=True).encode()).hexdigest()


def identity_differences(old: dict, new: dict) -> list[str]:
    out = []
    for key in ("format", "command", "model", "model_config", "options", "shard_size"):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {json.dumps(old.get(key))} then, {json.dumps(new.get(key))} now")
    old_inputs, new_inputs = old.get("inputs", []), new.get("inputs", [])
    if [i["path"] for i in old_inputs] != [i["path"] for i in new_inputs]:
        out.append("input files: " + ", ".join(i["path"] for i in old_inputs) + " then, "
                   + ", ".join(i["path"] for i in new_inputs) + " now")
    else:
        out += [f"input {n['path']} has changed since" for o, n in zip(old_inputs, new_inputs) if o != n]
    return out


def write_json(path: Path, data) -> None:
    with written_atomically(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def clear(out: Path) -> None:
    """Delete a job's results from ``out`` (for ``--overwrite``)."""
    for path in list(out.glob("shard-*.parquet")) + [out / MANIFEST, out / FAILURES]:
        path.unlink(missing_ok=True)
    shutil.rmtree(out / WORK_DIR, ignore_errors=True)


class DirectoryLock:
    """One job per output folder at a time (an advisory lock, released when the process ends)."""

    def __init__(self, out_dir: Path):
        self.path = out_dir / ".lock"

    def __enter__(self):
        try:
            self.handle = open_own_file(self.path, "w")  # never through a link planted at .lock
        except OSError as err:
            raise BatchError(f"cannot open the lock file {self.path}: {err.strerror or err} (a link or "
                             "something other than a file is in its place: remove it)") from None
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.close()
            raise BatchError(
                f"another flamino batch job is writing to {self.path.parent}; wait for it or stop it"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
