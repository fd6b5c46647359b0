"""Ray started or joined, a pool of model actors, items streamed through it: the one Ray Data
pipeline of flamino (``stream_on_ray``), for ``flamino batch``'s shards (``batch.ray_driver``) and
the app's set-level jobs (``on_ray``) alike; CPU actors pinned to cores of their own
(``pin_to_free_cores``); a watchdog (``ray_watchdog``) stops a cluster started here when this
process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from flamino_core.atomic import open_own_file

LOCAL_OBJECT_STORE_BYTES = 500 * 1024**2
EXECUTOR_END_SECONDS = 60.0  # at most this long for a finished dataset's executor thread (_wait_for_executor)
AUTH_MODE = "RAY_AUTH_MODE"  # Ray's authentication mode: "token", "disabled" (see _restore_auth_mode)


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot hold the actors asked for; the message says which."""


def stream_on_ray(items: list[dict], worker: Callable[[int], type], address: str | None, actors: int | None,
                  cpus_per_actor: float, gpus_per_actor: float | None, say: Callable[[str], None],
                  *, used: list[int] | None = None, what: str = "items", shutdown: bool = True) -> Iterator[dict]:
    """The rows a pool of model actors makes of ``items``, one item per call, as they finish
    (Ray is joined or started and the pool planned here, before the first row is asked for).

    The one Ray Data pipeline of flamino: ``flamino batch`` streams shard numbers through it,
    the app (``jobs.on_ray``) a set's records. Ray is joined at ``address`` (or started here for
    "local"/None, on 127.0.0.1 only, and shut down with its agents when the rows are done or the
    iteration is abandoned, unless ``shutdown`` is False; ``ray_watchdog`` stops a cluster started
    here if this process dies first); Ray Data restarts a killed actor and retries its item.

    Args:
      items: one dict per call of an actor.
      worker: ``worker(cores)``: the actor class (``cores``: CPU cores it pins itself to, 0: GPU).
      used: filled with the number of actors.
    """
    local = address in ("local", None)
    ray = _import_ray()
    started = _start_ray(ray, address, local) if not ray.is_initialized() else None
    to_shut_down = (ray, started) if started is not None and shutdown else None
    try:
        resources = ray.cluster_resources()
        pool = _plan_pool(resources, len(items), actors, cpus_per_actor, gpus_per_actor)
        if used is not None:
            used[:] = [pool.actors]
        device = f"{pool.gpus:g} GPU" if pool.gpus else f"{pool.tpus} TPU" if pool.tpus else f"{pool.cpus:g} CPU"
        say(f"{len(items)} {what} on {pool.actors} actor(s), {device} each (Ray: {int(resources.get('CPU', 0))} CPUs, "
            f"{int(resources.get('GPU', 0))} GPUs, {int(resources.get('TPU', 0))} TPUs)")
        dataset = _pooled_dataset(ray, items, worker, pool)
    except BaseException:
        if to_shut_down is not None:
            _shut_down(*to_shut_down)
        raise
    return _rows(dataset, to_shut_down)


def _import_ray():
    try:
        import ray
        import ray.data
    except ImportError:
        raise RayUnavailable("flamino runs this on Ray, which is not installed: pip install 'flamino[batch]'") from None
    return ray


class _Started(NamedTuple):
    """A Ray started (``local``) or joined by ``stream_on_ray``: what shutting it down must undo."""

    local: bool
    watchdog: subprocess.Popen | None  # of a cluster started here
    auth_mode: str | None  # RAY_AUTH_MODE before a cluster was started here (None: unset)


def _start_ray(ray, address: str | None, local: bool) -> _Started:
    """Ray started on this machine (``local``) or joined at ``address``."""
    common = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    auth_mode = os.environ.get(AUTH_MODE)
    with warnings.catch_warnings():
        # Ray starts its processes with fork + exec, which is safe next to JAX's threads.
        warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
        if local:
            try:
                with _clusters_off():
                    # address "local": a new cluster even where RAY_ADDRESS (or a `ray start` on this
                    # machine, /tmp/ray/ray_current_cluster) names one, which address None would join.
                    ray.init(address="local", num_cpus=len(os.sched_getaffinity(0)),
                             object_store_memory=LOCAL_OBJECT_STORE_BYTES, **common)
            except BaseException:
                _restore_auth_mode(auth_mode)
                raise
        else:
            ray.init(address=address, **common)
    return _Started(local, _watch(_session_dir(ray)) if local else None, auth_mode)


class _Pool(NamedTuple):
    """The actor pool planned for a cluster: how many actors and what each reserves."""

    actors: int
    cpus: float  # per actor
    gpus: float  # per actor
    cores: int  # CPU cores each actor pins itself to (0: an accelerator actor, no pinning)
    env: dict[str, str]  # environment variables of each actor
    tpus: int = 0  # per actor (Ray's custom resource "TPU": one chip)


def accelerator_options(resources: dict, gpus_per_actor: float | None = None) -> dict:
    """The accelerator each model actor requests on a cluster with these ``ray.cluster_resources()``:
    one GPU where the cluster has GPUs (or ``gpus_per_actor`` when given), one TPU chip (Ray's
    "TPU" resource) where it has TPUs, nothing on a CPU cluster. One actor per device: JAX in
    an actor then sees the device Ray gave it, and the pool holds as many actors as devices."""
    if gpus_per_actor is None and resources.get("GPU", 0) < 1 and resources.get("TPU", 0) >= 1:
        return {"resources": {"TPU": 1}}
    if gpus_per_actor is None:
        gpus_per_actor = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
    return {"num_gpus": gpus_per_actor} if gpus_per_actor > 0 else {}


def _plan_pool(resources: dict, n_items: int, actors: int | None, cpus_per_actor: float,
               gpus_per_actor: float | None) -> _Pool:
    """As many actors as asked (default: as fit the cluster's accelerators, else its CPUs), never more than items."""
    accelerator = accelerator_options(resources, gpus_per_actor)
    if "resources" in accelerator:
        fit = int(resources["TPU"])
        return _Pool(max(1, min(actors or fit, n_items)), cpus_per_actor, 0.0, 0, {}, 1)
    gpus_per_actor = accelerator.get("num_gpus", 0.0)
    if gpus_per_actor > 0:
        fit = int(resources.get("GPU", 0) // gpus_per_actor)
        if fit < 1:
            raise RayUnavailable(f"the Ray cluster has no GPU for --gpus-per-actor {gpus_per_actor:g}")
    else:
        fit = int(resources.get("CPU", 1) // cpus_per_actor)
    env = {}
    if 0 < gpus_per_actor < 1:  # several actors share a GPU: JAX must not take 75% each
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.75 * gpus_per_actor:.3f}"
    cores = 0 if gpus_per_actor else max(1, int(cpus_per_actor))
    return _Pool(max(1, min(actors or fit, n_items)), cpus_per_actor, gpus_per_actor, cores, env)


def _pooled_dataset(ray, items: list[dict], worker: Callable[[int], type], pool: _Pool):
    """The Ray Data dataset that maps ``items`` through ``pool``'s actors, one item per call."""
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.max_consecutive_actor_init_deaths = 3
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    dataset = ray.data.from_items(items, override_num_blocks=len(items))
    return dataset.map_batches(
        worker(pool.cores),
        batch_size=1,
        # One shard at a time per actor: a shard is minutes of work and its argument one number,
        # so there is nothing to prefetch, and an actor never holds queued shards while another
        # (a node that started later) idles at the end of a job.
        compute=ray.data.ActorPoolStrategy(size=pool.actors, max_tasks_in_flight_per_actor=1),
        num_cpus=pool.cpus,
        num_gpus=pool.gpus,
        **({"resources": {"TPU": pool.tpus}} if pool.tpus else {}),  # one TPU chip an actor
        runtime_env={"env_vars": pool.env} if pool.env else None,
    )  # Ray Data restarts a killed actor and retries its item (see process_shard for repeats)


@contextlib.contextmanager
def _clusters_off():
    """Ray with multi-node clusters off while it starts this machine's cluster, which then listens
    on 127.0.0.1 only: with them on, Ray turns a node address of 127.0.0.1 into the machine's
    network address and binds its servers to every interface (off is what it does on macOS).
    The variable is read by the processes Ray starts now; the constant by this process. Both
    are put back afterwards: a later cluster of several nodes (joined, or a test's ``ray
    start``) must not inherit the switch."""
    from ray._private import ray_constants

    name = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
    before_env, before = os.environ.get(name), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[name] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before_env


def _rows(dataset, to_shut_down) -> Iterator[dict]:
    """The dataset's rows; Ray shut down after the last one (or when the iteration is abandoned)."""
    try:
        yield from dataset.iter_rows()
    finally:
        _wait_for_executor(dataset)
        if to_shut_down is not None:
            _shut_down(*to_shut_down)


def _wait_for_executor(dataset, timeout: float = EXECUTOR_END_SECONDS) -> None:
    """Wait for the thread that ran ``dataset`` (Ray Data's ``StreamingExecutor-<dataset id>``)
    to end. Ray Data's shutdown of it waits 2 s; under load it ran on, and when it used Ray after
    a ``ray.shutdown()`` (ours with ``shutdown``, or the caller's), Ray ended the whole process
    ("The core worker has already been shutdown ... The process will exit": a pytest worker in
    `make test`, 2026-12-06). Only this dataset's thread: another job's may run on."""
    prefix = f"StreamingExecutor-{dataset.get_dataset_id().rsplit('_', 1)[0]}_"
    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread.name.startswith(prefix) and thread is not threading.current_thread():
            thread.join(max(deadline - time.monotonic(), 0.0))


def _shut_down(ray, started: _Started) -> None:
    """Ray stopped, with the agents it leaves behind (seen with its dashboard and runtime-env
    agents) on a cluster started here, the watchdog no longer needed, and this process's
    authentication mode as it was before (``_restore_auth_mode``)."""
    session = _session_dir(ray) if started.local else None
    try:
        ray.shutdown()
        if session:
            from flamino_core.jobs.ray_watchdog import stop_cluster

            stop_cluster(session)
        if started.watchdog is not None:
            started.watchdog.kill()
            started.watchdog.wait()
    finally:
        if started.local:
            _restore_auth_mode(started.auth_mode)


def _restore_auth_mode(before: str | None) -> None:
    """Ray's authentication mode in this process put back to ``before`` (RAY_AUTH_MODE's value
    before a local cluster was started here; None: unset).

    ``ray.init()`` of a new cluster, with RAY_AUTH_MODE unset, turns token authentication on
    for the whole process (``ray._private.authentication.authentication_token_setup``:
    ``enable_token_auth_by_default`` -> ``_enable_token_auth``: ``os.environ["RAY_AUTH_MODE"] =
    "token"`` and ``Config.initialize("")``, which reloads the C++ ``RayConfig`` singleton), and
    the C++ ``AuthenticationTokenLoader`` singleton caches the token (~/.ray/auth_token), which
    it then hands out whatever the mode. ``ray.shutdown()`` undoes none of it. A later
    ``ray.init(address=...)`` in this process, of a cluster without authentication (a notebook
    that ran a local batch, or the test suite), had the token cached (or loaded it while the
    stale config still said "token"), and its driver's gRPC server demanded it of the cluster's
    workers, which send none ("Missing authorization header in request!" in the driver's log):
    Ray Data saw every actor cancelled ("The actor never ran - it was cancelled before it
    started running"). Setting RAY_AUTH_MODE=disabled before the join is not enough, nor is
    reloading the config or emptying the cache alone: both are done here, from the restored
    variable. A later local cluster turns token authentication on again.
    """
    if os.environ.get(AUTH_MODE) == before:
        return
    if before is None:
        os.environ.pop(AUTH_MODE, None)
    else:
        os.environ[AUTH_MODE] = before
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # a Ray without token authentication
        return
    Config.initialize("")  # re-reads RAY_AUTH_MODE, as _enable_token_auth does
    AuthenticationTokenLoader.instance().reset_cache()  # the token is loaded again only if asked for


def _session_dir(ray) -> str | None:
    node = getattr(ray._private.worker, "_global_node", None)
    return getattr(node, "get_session_dir_path", lambda: None)() if node is not None else None


def _watch(session_dir: str | None):
    """``ray_watchdog`` on this process and the cluster it started (None without a session)."""
    if not session_dir:
        return None
    return subprocess.Popen(
        [sys.executable, "-m", "flamino_core.jobs.ray_watchdog", str(os.getpid()), session_dir],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )



def pin_to_free_cores(count: int, claims_dir: str | os.PathLike | None = None):
    """Pin this process to ``count`` cores no other flamino actor on this machine holds.

    XLA's CPU backend runs a thread pool as wide as the cores a process may use and ignores
    the old ``--xla_cpu_multi_thread_eigen`` flag, so without this every actor would spread
    over every core. Claims are ``flock``s on one file per core, held while the actor lives
    and released by the kernel when it dies. Returns the open claim files (None: no free
    cores, the process stays unpinned).
    """
    cores = sorted(os.sched_getaffinity(0))
    claims_dir = Path(claims_dir or Path(tempfile.gettempdir()) / "flamino-batch-cores")
    claims_dir.mkdir(exist_ok=True)
    for first in range(0, len(cores) - count + 1, count):
        group = cores[first:first + count]
        held = []
        for core in group:
            try:  # a shared temporary folder: never through a link someone put there
                handle = open_own_file(claims_dir / f"core-{core}.lock", "w")
            except OSError:
                break
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                break
            held.append(handle)
        if len(held) == count:
            for thread in os.listdir("/proc/self/task"):  # every thread; later ones inherit it
                try:
                    os.sched_setaffinity(int(thread), group)
                except OSError:  # the thread has ended
                    pass
            return held
        for handle in held:
            handle.close()
    return None


