"""The Ray driver of a batch job: the job's shards streamed through a pool of model actors
(``jobs.ray_pool.stream_on_ray``, the pipeline the app's set-level jobs use too).

Each actor (``ShardWorker``) loads the model once and computes whole shards
(``shards.process_shard``); CPU actors are pinned to cores of their own. Ray Data restarts
a killed actor and retries its shard.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from flamino_core.batch.job import BatchError, Job
from flamino_core.batch.shards import process_shard
from flamino_core.jobs.ray_pool import RayUnavailable, pin_to_free_cores, stream_on_ray


def run_on_ray(job: Job, pending: list[int], address: str, actors: int | None, cpus_per_actor: float,
               gpus_per_actor: float | None, on_start: Callable[[], None], on_shard: Callable[[dict], None],
               say: Callable[[str], None]) -> tuple[float, int]:
    """Compute the ``pending`` shards of ``job`` on Ray.

    ``on_start`` is called when the actors are about to start, ``on_shard`` with the summary
    of each finished shard (shard, rows, residues; the Ray node that computed it, its seconds
    of computing and the CPU seconds that took).

    Returns (seconds of the compute stage, actors used).
    """
    used = [0]

    def worker(cores: int) -> type:
        return _worker_class(job, cores)

    try:
        rows = stream_on_ray([{"shard": k} for k in pending], worker, address, actors, cpus_per_actor,
                             gpus_per_actor, say, used=used, what="shards")
        on_start()
        start = time.monotonic()
        for row in rows:
            on_shard({**{name: int(row[name]) for name in ("shard", "rows", "residues")},
                      "node": str(row["node"]), "seconds": float(row["seconds"]),
                      "cpu_seconds": float(row["cpu_seconds"])})
        return time.monotonic() - start, used[0]
    except BatchError:
        raise
    except RayUnavailable as err:
        raise BatchError(str(err)) from err
    except Exception as err:  # Ray wraps worker errors in its own types; the first line says what it was
        first_line = next((line for line in str(err).splitlines() if line.strip()), "")
        raise BatchError(f"the job stopped ({type(err).__name__}: {first_line[:300]}); finished shards are "
                         "kept: rerun the same command to continue") from err


class ShardWorker:
    """Ray Data actor: loads the model once (an ``Engine``, or a fold job's ``FoldReplica``), then
    turns shard numbers into shard files."""

    job: dict = {}  # set on the per-job subclass made by ``_worker_class``
    cores = 0  # CPU actors: cores to pin this actor to (0: GPU actor, no pinning)

    def __init__(self) -> None:
        # Before JAX starts its CPU backend: its thread pool is sized to the cores allowed here.
        self._cores_claim = pin_to_free_cores(self.cores) if self.cores else None
        from flamino_core.engine.engine import Engine, enable_compilation_cache
        from flamino_core.weights.loading import load_weights

        enable_compilation_cache()
        self._job = Job.from_dict(self.job)
        if self._job.command == "fold":  # one ESMFold replica on this actor's device (fold_shards)
            from flamino_core.batch.fold_shards import FoldReplica, fold_shard

            self._engine, self._compute = FoldReplica(self._job), fold_shard
        else:
            self._engine = Engine(load_weights(self._job.model), token_budget=self._job.token_budget)
            self._compute = process_shard

    def __call__(self, batch: dict) -> dict:
        import ray

        infos, seconds, cpu_seconds = [], [], []
        for shard in batch["shard"]:
            start, cpu_start = time.monotonic(), time.process_time()
            infos.append(self._compute(self._engine, self._job, int(shard)))
            seconds.append(time.monotonic() - start)
            cpu_seconds.append(time.process_time() - cpu_start)  # all of this actor's threads
        return {
            "shard": np.array([i["shard"] for i in infos], np.int64),
            "rows": np.array([i["rows"] for i in infos], np.int64),
            "residues": np.array([i["residues"] for i in infos], np.int64),
            "failures": np.array([len(i["failures"]) for i in infos], np.int64),
            # Where and how long each shard was computed: the manifest's per-node throughput.
            "node": np.array([ray.get_runtime_context().get_node_id()] * len(infos)),
            "seconds": np.array(seconds, np.float64),
            "cpu_seconds": np.array(cpu_seconds, np.float64),
        }


def _worker_class(job: Job, cores: int) -> type:
    # The job travels inside the class rather than as constructor arguments: Ray keeps those in
    # the object store and warns that a restarted actor could lose them.
    return type("ShardWorker", (ShardWorker,), {"job": job.to_dict(), "cores": cores, "__module__": __name__})


