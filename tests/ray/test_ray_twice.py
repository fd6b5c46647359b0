"""Ray started and stopped by ``stream_on_ray`` (a local batch), then a cluster joined, then a
local Ray again, all in one Python process: a notebook, or the test suite.

Ray's ``ray.init()`` of a local cluster turns token authentication on for the whole process and
``ray.shutdown()`` left it on: a later join of a cluster without authentication had every actor
cancelled before it ran (``jobs.ray_pool._restore_auth_mode``). The last local start runs with
RAY_ADDRESS naming the cluster, as a notebook set up for that cluster would have it. The cluster
is the run's Ray head (``ray_fixtures.ray_head``).
"""

from __future__ import annotations

import os

import pytest

from flamino_core.jobs.ray_pool import stream_on_ray

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_a_local_ray_then_a_joined_cluster_then_a_local_ray_again_in_one_process(ray_head, monkeypatch):
    if ray.is_initialized():  # a connection another test kept: this one starts from none
        ray.shutdown()
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # as in a fresh process: Ray picks the mode
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    local = _doubled_on_ray("local")
    assert local["x"] == [0, 2, 4, 6] and not ray.is_initialized()
    assert "RAY_AUTH_MODE" not in os.environ  # Ray set "token" for its cluster; put back

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the run's head has no token to share
    joined = _doubled_on_ray(ray_head, shutdown=False)
    assert joined["x"] == [0, 2, 4, 6]  # before: ActorDiedError, "cancelled before it started running"
    head_node = ray.get_runtime_context().get_node_id()
    assert set(joined["node"]) == {head_node}
    ray.shutdown()
    monkeypatch.delenv("RAY_AUTH_MODE")

    monkeypatch.setenv("RAY_ADDRESS", ray_head)  # "local" still starts a Ray of its own
    again = _doubled_on_ray("local")
    assert again["x"] == [0, 2, 4, 6] and head_node not in again["node"]
    assert not ray.is_initialized() and "RAY_AUTH_MODE" not in os.environ


def _doubled_on_ray(address: str, shutdown: bool = True) -> dict[str, list]:
    """Four numbers doubled by a Ray actor at ``address``: the values and the nodes that did it."""
    rows = list(stream_on_ray([{"x": i} for i in range(4)], _doubler, address, 1, 1.0, 0.0, lambda m: None,
                              shutdown=shutdown))
    return {"x": sorted(int(r["x"]) for r in rows), "node": sorted({str(r["node"]) for r in rows})}


def _doubler(cores: int) -> type:
    # Made here, so Ray sends the class itself: the cluster's workers cannot import tests/.
    class Doubler:
        def __call__(self, batch: dict) -> dict:
            import numpy as np
            import ray

            return {"x": batch["x"] * 2, "node": np.array([ray.get_runtime_context().get_node_id()] * len(batch["x"]))}

    return Doubler
