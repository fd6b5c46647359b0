"""The accelerator a model actor requests on Ray (``jobs.ray_pool.accelerator_options``), from the
cluster's resources as ``ray.cluster_resources()`` reports them, and the pool planned from it: one
actor per device on a GPU or TPU cluster, CPU actors pinned to cores elsewhere. Pure functions:
no Ray cluster is started."""

from __future__ import annotations

import pytest

from flamino_core.jobs.ray_pool import RayUnavailable, _plan_pool, accelerator_options

CPU_CLUSTER = {"CPU": 16.0, "memory": 6.4e10, "node:__internal_head__": 1.0}
GPU_CLUSTER = {**CPU_CLUSTER, "GPU": 4.0, "accelerator_type:A100": 1.0}
TPU_CLUSTER = {**CPU_CLUSTER, "TPU": 8.0, "TPU-v5litepod-8-head": 1.0, "accelerator_type:TPU-V5LITEPOD": 1.0}


def test_actors_request_the_clusters_accelerator():
    assert accelerator_options(CPU_CLUSTER) == {}
    assert accelerator_options(GPU_CLUSTER) == {"num_gpus": 1.0}
    assert accelerator_options(TPU_CLUSTER) == {"resources": {"TPU": 1}}
    # Asked by name: several actors share a GPU, or a GPU cluster runs CPU actors.
    assert accelerator_options(GPU_CLUSTER, 0.5) == {"num_gpus": 0.5}
    assert accelerator_options(GPU_CLUSTER, 0.0) == {}


def test_one_actor_per_device():
    tpu = _plan_pool(TPU_CLUSTER, n_items=100, actors=None, cpus_per_actor=1.0, gpus_per_actor=None)
    assert (tpu.actors, tpu.tpus, tpu.gpus, tpu.cores) == (8, 1, 0.0, 0)  # no core pinning: the chip computes
    gpu = _plan_pool(GPU_CLUSTER, n_items=100, actors=None, cpus_per_actor=1.0, gpus_per_actor=None)
    assert (gpu.actors, gpu.gpus, gpu.tpus, gpu.cores) == (4, 1.0, 0, 0)
    cpu = _plan_pool(CPU_CLUSTER, n_items=100, actors=None, cpus_per_actor=4.0, gpus_per_actor=None)
    assert (cpu.actors, cpu.gpus, cpu.tpus, cpu.cores) == (4, 0.0, 0, 4)
    # Never more actors than items.
    assert _plan_pool(TPU_CLUSTER, n_items=3, actors=None, cpus_per_actor=1.0, gpus_per_actor=None).actors == 3


def test_a_gpu_asked_of_a_cluster_without_one_is_refused():
    with pytest.raises(RayUnavailable, match="no GPU"):
        _plan_pool(TPU_CLUSTER, n_items=4, actors=None, cpus_per_actor=1.0, gpus_per_actor=1.0)
