"""One Ray instance per test run (per xdist worker; the Ray tests are one group, so one in all)
for the tests that only need "a Ray cluster": ``ray start --head --block`` on 127.0.0.1. Tests
that kill or restart Ray (``test_batch``'s killed worker, ``test_batch_cluster``'s two nodes)
start their own.

Started lazily by the first test that asks for it and stopped at the end of the run, on every
exit path (``atexit`` too: an interrupted run leaves no Ray behind). It inherits the run's
environment (``conftest.pytest_configure``): its actors compile into the run's compile cache and
never write to ``~/.cache``.
"""

from __future__ import annotations

import atexit
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

# Two CPUs: run_batch's two-actor job fits; the app's jobs ask for one actor (FLAMINO_RAY_ACTORS).
RAY_HEAD_CPUS = 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_head():
    """The address of the run's Ray head. Ray's own processes share its fate (they are killed
    when it dies), so stopping this one process (by its id) stops the instance."""
    ray = pytest.importorskip("ray")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="/tmp/fr-")  # short: Ray's socket paths must fit 107 characters
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
               f"--port={port}", f"--num-cpus={RAY_HEAD_CPUS}", "--include-dashboard=false",
               "--disable-usage-stats", f"--temp-dir={temp}", "--object-store-memory=150000000"]
    # A test cluster on the loopback address only: no token to share with its clients.
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    head = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
                            env=env)

    def stop() -> None:
        from flamino_core.jobs.ray_watchdog import stop_cluster

        if ray.is_initialized():
            ray.shutdown()
        # Killed outright, with its process group: `ray start --block` took over 30 s to stop on
        # SIGTERM, and left its dashboard and runtime-env agents running; those are stopped by
        # the files they hold in its temp folder. Nothing of this cluster is kept.
        if head.poll() is None:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(30)
        stop_cluster(temp, grace=1.0)
        shutil.rmtree(temp, ignore_errors=True)

    atexit.register(stop)  # even if the test run is interrupted
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:  # the head is up when its GCS port answers
            if head.poll() is not None:
                pytest.fail(f"ray start exited with {head.returncode}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                pytest.fail("the Ray head did not come up")
            time.sleep(0.5)
        yield address
    finally:
        stop()
        atexit.unregister(stop)
