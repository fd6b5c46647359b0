"""``flamino batch`` on a two-node Ray cluster: the same rows as on one node.

The cluster (``local_cluster.LocalCluster``) is two ``ray start`` nodes on this machine, both on
127.0.0.1, the head on the first half of this process's cores and the other node on the rest.
The tests check that no process of it is left: after a passing run, after an error inside the
``with`` block, after a node that fails to start.

Select with ``pytest -m ray``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flamino_core.batch import read_results, to_numpy
from local_cluster import LocalCluster

pytestmark = [
    pytest.mark.ray,
    pytest.mark.skipif(not (shutil.which("setpriv") and shutil.which("taskset")), reason="needs util-linux's setpriv and taskset"),
]

TINY = "random:tiny"


def _proteome(path: Path, n: int) -> Path:
    rng = np.random.default_rng(22)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY"))
    path.write_text("".join(f">p{i} protein {i}\n{''.join(rng.choice(letters, size=int(rng.integers(20, 90))))}\n"
                            for i in range(n)))
    return path


def _batch(fasta: Path, out: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "flamino_core.cli", "batch", "embed", str(fasta), "-m", TINY, "-o", str(out),
               "--shard-size", "4", "--include", "mean,per_tok", *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def test_two_node_cluster_gives_the_rows_of_one_node(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("two nodes on separate CPU sets need at least two cores")
    half = len(cores) // 2
    fasta = _proteome(tmp_path / "proteome.fa", 24)
    env = dict(os.environ)
    one = _batch(fasta, tmp_path / "one-node", env)  # --ray-address local: Ray inside the command
    assert one.returncode == 0, one.stderr[-3000:]

    with LocalCluster([cores[:half], cores[half:]], env) as cluster:
        # The job starts only when both actors are up, so that both nodes get shards however
        # slowly this machine starts them (a Ray Data setting read from the environment).
        two = _batch(fasta, tmp_path / "two-nodes", {**cluster.env, "RAY_DATA_DEFAULT_WAIT_FOR_MIN_ACTORS_S": "600"},
                     "--ray-address", cluster.address, "--actors", "2")
        cluster.remember()
        assert two.returncode == 0, two.stderr[-3000:]
    assert cluster.alive() == [], f"Ray processes left running: {cluster.alive()}"

    run = json.loads((tmp_path / "two-nodes" / "manifest.json").read_text())["runs"][-1]
    assert run["actors"] == 2 and len(run["nodes"]) == 2, run  # both nodes computed shards
    assert sum(n["shards"] for n in run["nodes"].values()) == 6
    a, b = read_results(tmp_path / "one-node"), read_results(tmp_path / "two-nodes")
    for column in ("index", "file", "id", "description", "seq_sha256", "length", "warnings"):
        assert a.column(column).to_pylist() == b.column(column).to_pylist(), column
    # A row never depends on which actor or node computed it: the same engine on the same
    # shard; the tolerance is docs/scale.md's (threads and summation order may differ).
    for column in ("mean", "per_tok"):
        for x, y in zip(to_numpy(a.column(column)), to_numpy(b.column(column))):
            np.testing.assert_allclose(x, y, atol=1e-5, rtol=0)


def test_cluster_is_stopped_after_an_error_and_when_a_node_fails_to_start():
    """The other ways out: an error inside the ``with`` block, and a node that cannot join (no
    cluster at its address); nothing is left running after either."""
    cores = sorted(os.sched_getaffinity(0))
    cluster = LocalCluster([cores], dict(os.environ))
    with pytest.raises(ZeroDivisionError):
        with cluster:
            assert cluster.alive()
            1 / 0
    assert cluster.seen and cluster.alive() == [] and not cluster.temp_dir.exists()

    # No cluster listens at 127.0.0.1:1: the second node never joins, and after 20 s (not the 240 s
    # a real join may take under load: this test's 4 minutes until 2026-12-06) it is given up on.
    cluster = LocalCluster([cores, cores], dict(os.environ), join_timeout_s=20)
    cluster.address = "127.0.0.1:1"
    with pytest.raises(RuntimeError, match="did not start a node"):
        with cluster:
            pass
    assert cluster.seen and cluster.alive() == []
