"""Ray started and stopped by ``stream_on_ray`` (a local batch), then a cluster joined, then a
local Ray again, all in one Python process: a notebook, or the test suite.

Ray's ``ray.init()`` of a local cluster turns token authentication on for the whole process and
``ray.shutdown()`` left it on: a later join of a cluster without authentication had every actor
cancelled before it ran (``ray_driver._restore_auth_mode``). The last local start runs with
RAY_ADDRESS naming the cluster, as a notebook set up for that cluster would have it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from flamino_core.batch.ray_driver import stream_on_ray

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_a_local_ray_then_a_joined_cluster_then_a_local_ray_again_in_one_process(monkeypatch):
    if ray.is_initialized():  # a connection another test kept: this one starts from none
        ray.shutdown()
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # as in a fresh process: Ray picks the mode
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    with _ray_head() as head:  # comes up while the local Ray runs (its own, at address "local")
        local = _doubled_on_ray("local")
        assert local["x"] == [0, 2, 4, 6] and not ray.is_initialized()
        assert "RAY_AUTH_MODE" not in os.environ  # Ray set "token" for its cluster; put back

        address = head()
        monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # the cluster has no token to share
        joined = _doubled_on_ray(address, shutdown=False)
        assert joined["x"] == [0, 2, 4, 6]  # before: ActorDiedError, "cancelled before it started running"
        head_node = ray.get_runtime_context().get_node_id()
        assert set(joined["node"]) == {head_node}
        ray.shutdown()
        monkeypatch.delenv("RAY_AUTH_MODE")

        monkeypatch.setenv("RAY_ADDRESS", address)  # "local" still starts a Ray of its own
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


@contextlib.contextmanager
def _ray_head():
    """``ray start --head --block`` on 127.0.0.1, without authentication, as tests/test_jobs_ray.py
    starts it; yields a function that waits until it is up and returns its address. Stopped by
    its process group (its own session), then whatever of it is left (Ray's agents outlive it)
    by the files they hold in its temp folder."""
    from flamino_core.batch.ray_watchdog import stop_cluster

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="/tmp/fr-")  # short: Ray's socket paths must fit 107 characters
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
               f"--port={port}", "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
               f"--temp-dir={temp}", "--object-store-memory=150000000"]
    head = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "RAY_AUTH_MODE": "disabled"})

    def address() -> str:
        deadline = time.monotonic() + 180
        while True:  # the head is up when its GCS port answers
            assert head.poll() is None, f"ray start exited with {head.returncode}"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return f"127.0.0.1:{port}"
            assert time.monotonic() < deadline, "the Ray head did not come up"
            time.sleep(0.5)

    try:
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        # Killed outright: `ray start --block` took over 30 s to stop on SIGTERM, and nothing of
        # this cluster is kept.
        os.killpg(head.pid, signal.SIGKILL)
        head.wait(30)
        stop_cluster(temp, grace=1.0)
        shutil.rmtree(temp, ignore_errors=True)
