"""A set's heavy work on Ray, when the app is configured for it: ``FLAMINO_RAY_ADDRESS`` names a
cluster (``host:port``, ``ray://host:port`` for Ray Client, or ``local`` for a Ray started in
this process).

The records go through the same Ray Data pipeline as ``flamino batch``
(``ray_pool.stream_on_ray``): a pool of model actors, each loading the model once (the
same identifier as the app's; its fingerprint is checked, so results are never stored under
another model's key), turns items into outputs; this process writes each item's outputs into
its result store as it arrives and reports it, so a page fills in as it does for in-process
jobs (``jobs.py``), and a cancel stops between items keeping what arrived. The workers keep
nothing themselves: the store is the app's.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable

import numpy as np

from flamino_core import settings
from flamino_core.store import passes
from flamino_core.store.result_store import NullStore, ResultStore

LOG = logging.getLogger("flamino")
ADDRESS = settings.RAY_ADDRESS.name
RECORDS_PER_ITEM = 4  # records per actor call: the step at which a set's rows arrive


def ray_address() -> str | None:
    """The Ray cluster set-level jobs go to (None: they run in this process)."""
    return settings.RAY_ADDRESS.get()


def _actors() -> tuple[int | None, float]:
    return settings.RAY_ACTORS.get(), settings.RAY_CPUS_PER_ACTOR.get()


# --- the actors --------------------------------------------------------------------------------------
class ModelActor:
    """Ray Data actor: loads the app's model once; the per-job subclass carries what to load."""

    model = ""  # the model identifier, as the app loaded it
    fingerprint = ""  # what the app's engine says it is: the worker's must agree
    cores = 0

    def __init__(self) -> None:
        from flamino_core.jobs.ray_pool import pin_to_free_cores

        self._cores_claim = pin_to_free_cores(self.cores) if self.cores else None
        from flamino_core.engine.engine import Engine, enable_compilation_cache
        from flamino_core.weights.loading import load_weights

        enable_compilation_cache()
        self.engine = Engine(load_weights(self.model))
        if self.engine.fingerprint != self.fingerprint:
            raise RuntimeError(f"the Ray worker's {self.model!r} is not the app's model (fingerprint "
                               f"{self.engine.fingerprint} vs {self.fingerprint}): give the cluster the same weights")


class RecordOutputsActor(ModelActor):
    def __call__(self, batch: dict) -> dict:
        sequences = [s for item in batch["sequences"] for s in item.split("\n")]
        outs = passes.record_outputs(self.engine, sequences, store=NullStore())
        n = self.engine.config.num_layers
        return {
            "sequences": np.array(["\n".join(sequences)], dtype=object),
            "means": np.array([np.stack([np.stack([o.means[layer] for layer in range(n + 1)]) for o in outs])
                               .astype(np.float32).tobytes()], dtype=object),
            "entropy": np.array([np.concatenate([o.entropy for o in outs]).astype(np.float32).tobytes()], dtype=object),
        }


class MaskedActor(ModelActor):
    def __call__(self, batch: dict) -> dict:
        sequence = str(batch["sequence"][0])
        positions = np.frombuffer(batch["positions"][0], dtype=np.int64).tolist()
        log_probs = self.engine.compute_masked(sequence, positions)
        return {"sequence": np.array([sequence], dtype=object), "positions": batch["positions"],
                "log_probs": np.array([np.asarray(log_probs, np.float32).tobytes()], dtype=object)}


def _actor_class(base: type, model: str, fingerprint: str) -> Callable[[int], type]:
    # What to load travels inside the class, as batch's ShardWorker does (see batch.ray_driver).
    return lambda cores: type(base.__name__, (base,), {"model": model, "fingerprint": fingerprint, "cores": cores,
                                                      "__module__": __name__})


def _stream(items: list[dict], actor: Callable[[int], type], what: str):
    from flamino_core.jobs.ray_pool import stream_on_ray

    actors, cpus = _actors()
    # Joined once and kept for the server's life (shutdown=False): the next job reuses the connection.
    return stream_on_ray(items, actor, ray_address(), actors, cpus, None, LOG.info, what=what, shutdown=False)


# --- the work ------------------------------------------------------------------------------------------
def record_outputs_on_ray(model: str, fingerprint: str, num_layers: int, sequences: Iterable[str], *,
                          store: ResultStore, on_record: Callable[[str, passes.RecordOutputs], None],
                          cancelled: Callable[[], bool] = lambda: False) -> None:
    """Each sequence's ``passes.RecordOutputs`` computed on Ray, stored and reported as it arrives.

    Raises:
      passes.Cancelled: ``cancelled()`` said stop (what arrived is stored).
    """
    unique = list(dict.fromkeys(sequences))
    if not unique:
        return
    items = [{"sequences": "\n".join(unique[i:i + RECORDS_PER_ITEM])} for i in range(0, len(unique), RECORDS_PER_ITEM)]
    rows = _stream(items, _actor_class(RecordOutputsActor, model, fingerprint), "groups of records")
    try:
        for row in rows:
            group = str(row["sequences"]).split("\n")
            means = np.frombuffer(row["means"], dtype=np.float32).reshape(len(group), num_layers + 1, -1)
            entropy = np.frombuffer(row["entropy"], dtype=np.float32)
            at = 0
            for sequence, layers in zip(group, means):
                by_layer = {layer: layers[layer].copy() for layer in range(num_layers + 1)}
                record = passes.RecordOutputs(sequence, by_layer, entropy[at:at + len(sequence)].copy())
                at += len(sequence)
                passes.keep_record_outputs(store, fingerprint, num_layers, sequence, record)
                on_record(sequence, record)
            if cancelled():
                raise passes.Cancelled("stopped on request (what arrived is kept)")
    finally:
        rows.close()


def masked_on_ray(model: str, fingerprint: str, work: Iterable[tuple[str, list[int]]], *, store: ResultStore,
                  on_chunk: Callable[[str, list[int]], None], cancelled: Callable[[], bool] = lambda: False,
                  chunk: int = passes.CHUNK) -> None:
    """The masked passes of each (sequence, positions) computed on Ray, ``chunk`` positions per
    actor call, stored and reported as each chunk arrives.

    Raises:
      passes.Cancelled: ``cancelled()`` said stop (what arrived is stored).
    """
    items = [{"sequence": sequence, "positions": np.asarray(positions[i:i + chunk], np.int64).tobytes()}
             for sequence, positions in work for i in range(0, len(positions), chunk)]
    if not items:
        return
    rows = _stream(items, _actor_class(MaskedActor, model, fingerprint), "chunks of masked positions")
    try:
        for row in rows:
            sequence = str(row["sequence"])
            positions = np.frombuffer(row["positions"], dtype=np.int64).tolist()
            log_probs = np.frombuffer(row["log_probs"], dtype=np.float32).reshape(len(positions), -1)
            store.put_masked(fingerprint, sequence, positions, log_probs)
            on_chunk(sequence, positions)
            if cancelled():
                raise passes.Cancelled("stopped on request (what arrived is kept)")
    finally:
        rows.close()
