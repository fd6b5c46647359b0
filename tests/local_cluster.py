"""A Ray cluster of several nodes on this machine, for tests/ray/test_batch_cluster.py and
benchmarks/scale_nodes.py: ``ray start`` nodes on 127.0.0.1, each on a CPU set of its own,
joined the way docs/scale.md tells a user to join real machines, with a token of their own
(``RAY_AUTH_TOKEN``).

Every process the cluster starts is stopped on every way out (``LocalCluster.stop``: SIGTERM
to each ``ray start --block``, which drains and stops what it started, then SIGKILL to
anything of theirs still alive): on leaving the ``with`` block normally or by an exception; a
SIGTERM to this process becomes such an exception while the cluster runs; and if this process
is killed outright, each ``ray start`` gets SIGTERM from the kernel as its parent dies
(``setpriv --pdeathsig``). ``alive()`` lists what is left, for a test to check.

The nodes are started through util-linux's ``setpriv`` and ``taskset`` rather than a Python
``preexec_fn``: the parent may run JAX's threads, and Python code between fork and exec in a
multithreaded process can deadlock.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


class LocalCluster:
    """A head node and one more node on this machine, on disjoint CPU sets; a context manager."""

    def __init__(self, cpu_sets: list[list[int]], env: dict, join_timeout_s: float = 240):
        # A short folder of its own: Ray's socket paths must fit in 107 bytes, and its logs stay apart.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="flamino-ray-", dir="/tmp"))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        # Without RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: a local flamino run earlier in this process sets
        # it to 0 (its one-machine cluster then listens on 127.0.0.1 only, ray_driver), which a
        # `ray start` of a multi-node cluster refuses.
        env = {k: v for k, v in env.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
        # No drain on SIGTERM: a node of Ray 2.60 given SIGTERM first asks the cluster to drain
        # it and waits up to RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S (30 s) for its raylet to leave;
        # these nodes' jobs are over when they are stopped, and each stop sat out the whole 30 s
        # (three per run: 32 s of the two-node test's 110 s, quiet, 2026-12-07). SIGTERM still
        # stops each node and what it started (``stop`` checks nothing is left).
        self.env = {**env, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
        self.cpu_sets = cpu_sets
        # How long a node other than the head may take to join. A node with no cluster at its
        # address never gives up by itself (`ray start` retried 127.0.0.1:1 for over 6 minutes
        # here); the default leaves a loaded machine time for a real join.
        self.join_timeout_s = join_timeout_s
        self.starters: list[subprocess.Popen] = []
        self.seen: dict[int, float] = {}  # pid -> create time of every process the cluster started
        self._sigterm = None

    def __enter__(self) -> "LocalCluster":
        self._sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._start_node(["--head", f"--port={self.port}", "--include-dashboard=false"], self.cpu_sets[0])
            for cpus in self.cpu_sets[1:]:
                self._start_node([f"--address={self.address}"], cpus)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            signal.signal(signal.SIGTERM, self._sigterm)

    def _start_node(self, args: list[str], cpus: list[int]) -> None:
        log = self.temp_dir / f"node-{len(self.starters)}.log"
        common = ["--block", "--node-ip-address=127.0.0.1", f"--num-cpus={len(cpus)}", "--num-gpus=0",
                  "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={self.temp_dir}"]
        with open(log, "w") as handle:
            starter = subprocess.Popen(
                ["setpriv", "--pdeathsig", "TERM", "taskset", "--cpu-list", ",".join(map(str, cpus)),
                 str(RAY), "start", *args, *common],
                stdout=handle, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
            )
        self.starters.append(starter)
        deadline = time.monotonic() + (240 if "--head" in args else self.join_timeout_s)
        while "Ray runtime started" not in log.read_text():
            if starter.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start did not start a node: {log.read_text()[-3000:]}")
            self.remember()
            time.sleep(0.5)
        self.remember()

    def remember(self) -> None:
        """Note every process the nodes have started so far (Ray's workers included)."""
        import psutil

        for starter in self.starters:
            try:
                for process in [psutil.Process(starter.pid), *psutil.Process(starter.pid).children(recursive=True)]:
                    self.seen.setdefault(process.pid, process.create_time())
            except psutil.NoSuchProcess:
                pass

    def alive(self) -> list:
        """Processes the cluster started that still run (a pid reused by another process is not counted)."""
        import psutil

        left = []
        for pid, created in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE:
                    left.append(process)
            except psutil.NoSuchProcess:
                pass
        return left

    def stop(self) -> None:
        """SIGTERM to each ``ray start --block`` (it drains and stops what it started), then SIGKILL
        to anything of the cluster still alive after 45 s, then the folder is removed."""
        import psutil

        self.remember()
        for starter in self.starters:
            if starter.poll() is None:
                starter.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 45  # Ray drains a node for up to 30 s
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.5)
        for process in self.alive():
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        for starter in self.starters:
            try:
                starter.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        psutil.wait_procs(self.alive(), timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
