"""The end of a Ray Data pipeline (``ray_pool._rows``): Ray is shut down only once the thread that
ran the dataset has ended. In `make test` (2026-12-06) Ray Data's executor thread outlived its own
2-second join under load, used Ray after ``ray.shutdown()``, and Ray ended the pytest worker's
whole process ("The core worker has already been shutdown ... The process will exit"). A fake
dataset (no Ray needed) whose executor thread ends 0.5 s after its last row stands in for it.
"""

from __future__ import annotations

import threading
import time

from flamino_core.jobs import ray_pool


class SlowToEnd:
    """A dataset whose rows come from a thread named as Ray Data names it, which runs on a while
    after the last row; and another dataset's thread, which this one must not wait for."""

    def __init__(self, uuid: str, linger: float):
        self.uuid, self.linger = uuid, linger
        self.thread: threading.Thread | None = None

    def get_dataset_id(self) -> str:
        return f"dataset_{self.uuid}_0"

    def iter_rows(self):
        self.thread = threading.Thread(target=time.sleep, args=(self.linger,),
                                       name=f"StreamingExecutor-dataset_{self.uuid}_0", daemon=True)
        self.thread.start()
        yield {"x": 1}
        yield {"x": 2}


def test_ray_is_shut_down_after_the_datasets_executor_thread_ends(monkeypatch):
    seen = []
    monkeypatch.setattr(ray_pool, "_shut_down", lambda *args: seen.append(dataset.thread.is_alive()))
    other = SlowToEnd("another", 30.0)  # another job's pipeline, still running
    list(other.iter_rows())
    dataset = SlowToEnd("abc", 0.5)
    started = time.monotonic()
    assert [r["x"] for r in ray_pool._rows(dataset, ("ray", "started"))] == [1, 2]
    assert seen == [False]  # its executor had ended when Ray was shut down
    assert time.monotonic() - started < 10  # and the other job's thread was not waited for
    assert other.thread.is_alive()


def test_an_abandoned_iteration_waits_the_same_way(monkeypatch):
    seen = []
    monkeypatch.setattr(ray_pool, "_shut_down", lambda *args: seen.append(dataset.thread.is_alive()))
    dataset = SlowToEnd("def", 0.5)
    rows = ray_pool._rows(dataset, ("ray", "started"))
    next(rows)
    rows.close()  # the caller stopped reading (a cancelled job)
    assert seen == [False]
