"""Stops a local Ray cluster's processes when the batch job that started it dies, however it dies.

``ray.shutdown()`` in a ``finally`` runs on every exit path that runs Python (errors, Ctrl-C,
SIGTERM turned into an exception); after ``kill -9`` nothing of the job runs, and Ray's dashboard
and runtime-env agents were seen running on. So the job starts this as a process of its own
session, which polls the job's pid and, when it is gone, stops every process that holds a file
in the cluster's session folder (every Ray process keeps its log there open: the GCS, the raylet,
the agents, the workers, whose names Ray rewrites).

Run as ``python -m flamino_core.jobs.ray_watchdog JOB_PID SESSION_DIR``.
"""

from __future__ import annotations

import os
import sys
import time

POLL_SECONDS = 1.0
GRACE_SECONDS = 5.0  # between SIGTERM and SIGKILL


def cluster_processes(session_dir: str) -> list:
    """The processes (psutil) that hold a file under ``session_dir``, this one excepted."""
    import psutil  # Ray depends on it

    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if any(f.path.startswith(session_dir) for f in process.open_files()):
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def stop_cluster(session_dir: str, grace: float = GRACE_SECONDS) -> int:
    """SIGTERM every process of the cluster, SIGKILL those left after ``grace`` seconds; how many."""
    import psutil

    processes = cluster_processes(session_dir)
    for process in processes:
        try:
            process.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            pass
    return len(processes)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead
    except (OSError, IndexError):
        return False


def main(argv: list[str]) -> int:
    job_pid, session_dir = int(argv[0]), argv[1]
    while _alive(job_pid):
        time.sleep(POLL_SECONDS)
    stop_cluster(session_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
