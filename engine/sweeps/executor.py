"""The one executor of sweeps, with three back ends: this process, a local process pool, a Ray cluster.

Every back end runs the same function on the same cell (`_execute`: the compute function, its exceptions turned
into traceback text where the cell ran) and hands the result to the driver, which writes it; so the rows are
the same bits whatever the back end, given the same threads per cell (ENGINE_THREADS) and device.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import socket
import sys
import time
import traceback
import types
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from engine.errors import Cancelled, InvalidInputError
from engine.sweeps.cells import CellContext, CellResult, pending_cells
from engine.sweeps.report import SweepReport

_log = logging.getLogger(__name__)

BACKENDS = ("process", "pool", "ray")

#: The share of a GPU one Ray cell asks for: a cell's model, batches and MaSF features of the packaged models
#: take a few GiB, so several cells share a GPU instead of all loading onto cuda:0 while the others idle.
RAY_GPU_FRACTION = 0.25


@dataclass(frozen=True)
class Backend:
    """Where the cells of a sweep run.

    Attributes:
        kind: 'process' (one after another in this process; progress within a cell and cancelling work),
            'pool' (`workers` local processes, forked from a fork server that imported torch and the engine once
            (`pool_context`); a worker that dies is replaced and its cell sent again)
            or 'ray' (tasks on the Ray cluster at `address`; a task whose worker or node dies is retried by Ray).
        workers: processes of the pool.
        address: Ray: 'auto' (the cluster started on this machine with `ray start`), 'local' (a private
            cluster of this machine for this sweep), or the head's address ('10.0.0.1:6379', 'ray://...').
        max_retries: how many times a cell whose worker died is sent again before it is reported failed.
        num_cpus: Ray: CPUs one cell asks for (and its torch threads unless ENGINE_THREADS is set).
        resources: Ray: custom resources one cell asks for (e.g. {"sweep": 1} to run only on nodes started
            with `--resources '{"sweep": 1}'`).
    """

    kind: str = "process"
    workers: int = 1
    address: str | None = None
    max_retries: int = 2
    num_cpus: float = 1
    resources: dict = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self):
        if self.kind not in BACKENDS:
            raise InvalidInputError(f"unknown sweep back end {self.kind!r}; known: {', '.join(BACKENDS)}")
        if self.kind == "ray" and not self.address:
            raise InvalidInputError("the ray back end needs an address: 'auto', 'local' or the head's host:port")
        if self.workers < 1 or self.max_retries < 0:
            raise InvalidInputError(f"workers must be >= 1 and max_retries >= 0, got {self.workers}, {self.max_retries}")

    @classmethod
    def from_options(cls, workers: int | None = 1, ray: str | None = None, max_retries: int = 2) -> Backend:
        """The back end the CLI options ask for: `--ray ADDRESS` wins, else `--workers N` > 1 a pool, else this
        process.

        Args:
            workers: local worker processes (None or 1: this process); with ray='local', its CPUs.
            ray: a Ray address ('auto', 'local', host:port), or None.
            max_retries: retries of a cell whose worker died.

        Returns:
            The Backend.
        """
        if ray:  # workers: the CPUs of a private cluster ('local')
            return cls("ray", workers=max(1, int(workers or 1)), address=ray, max_retries=max_retries)
        if workers and workers > 1:
            return cls("pool", workers=int(workers), max_retries=max_retries)
        return cls("process", max_retries=max_retries)


@dataclass
class _Outcome:
    """A cell's result (or the traceback of its failure) on its way back to the driver."""

    result: CellResult | None
    error: str | None
    where: str
    attempt: int | None = None  # set by a back end that retries on its own (Ray): which run of the cell this was


def _where() -> str:
    return f"{socket.gethostname()} pid {os.getpid()}"


def _execute(compute: Callable, cell, context: CellContext) -> _Outcome:
    """Run compute(cell, context) and catch its failure as text (a traceback crosses process boundaries as text,
    whole, where exceptions lose their stack). Cancelled propagates: the user stopped the sweep."""
    try:
        result = compute(cell, context)
    except Cancelled:
        raise
    except Exception:
        return _Outcome(None, traceback.format_exc(), _where())
    if not isinstance(result, CellResult):
        return _Outcome(None, f"TypeError: {compute.__qualname__} returned {type(result).__name__}, not a CellResult",
                        _where())
    return _Outcome(result, None, _where())


def run_cells(cells: Sequence, compute: Callable[[object, CellContext], CellResult], store, run: str, *,
              backend: Backend | None = None, command: str | None = None,
              progress: Callable[[int, int, dict], None] | None = None,
              cell_progress: Callable[[object, int, int], None] | None = None,
              started: Callable[[dict, str], None] | None = None,
              should_stop: Callable[[], bool] | None = None, check_weights: bool = True) -> SweepReport:
    """Compute every cell of `run` not yet in `store` on `backend` and write each to the store as it finishes.

    Args:
        cells: the sweep's cells (frozen dataclasses with `key()`); those already stored are skipped.
        compute: cell, CellContext -> CellResult; a module-level function (workers import it by name) or a
            functools.partial of one (for extra arguments such as a batch size).
        store: the ResultsStore written to (only by this process).
        run: the run folder's name.
        backend: where to run (default: this process).
        command: the command line recorded in provenance.
        progress: progress(i, total, key) after each finished or failed cell (total: the cells to compute).
        cell_progress: cell_progress(cell, examples done, examples total) within a cell; back end 'process' only.
        started: started(key, where) when a cell is sent to a worker ('process' and 'pool'; where: host and pid).
        should_stop: returns True to cancel ('process' only: raises Cancelled between batches).
        check_weights: refuse cells whose checkpoint's weights differ from the run's earlier cells'.

    Returns:
        The SweepReport: done, skipped, failed (with tracebacks), retried.
    """
    backend = backend or Backend()
    report = SweepReport(run=run, backend=backend.kind)
    todo = pending_cells(store, run, cells, report.skipped, check_weights=check_weights)
    if not todo:
        return report
    total = len(todo)
    count = {"i": 0}

    def finish(cell, outcome: _Outcome | None, error: BaseException | str | None = None, attempt: int = 1) -> None:
        key = cell.key()
        if outcome is not None and outcome.error is None:
            prov = {**outcome.result.provenance,
                    "sweep": {"backend": backend.kind, "worker": outcome.where, "attempt": attempt}}
            try:
                store.write_cell(run, key, outcome.result.rows, prov)
            except Exception as err:  # e.g. rows without the store's columns: a bug of that cell's kind
                report.fail(key, err, store.root)
            else:
                report.done.append(key)
                _forget_failure(store, run, key)
        else:
            report.fail(key, error if error is not None else outcome.error, store.root)
        count["i"] += 1
        if progress is not None:
            progress(count["i"], total, key)

    if backend.kind == "ray":
        _run_ray(todo, compute, backend, command, finish, report)
    elif backend.kind == "pool" and len(todo) > 1:
        _run_pool(todo, compute, backend, command, finish, report, started)
    else:
        for cell in todo:
            within = None if cell_progress is None else (lambda done, n, _cell=cell: cell_progress(_cell, done, n))
            if started is not None:
                started(cell.key(), _where())
            finish(cell, _execute(compute, cell, CellContext(command, within, should_stop)))
    return report


def _forget_failure(store, run: str, key: dict) -> None:
    """A cell that failed in an earlier sweep and is now computed keeps no stale traceback file."""
    from engine.results.store import cell_key

    (store.root / run / "failed" / f"{cell_key(key)}.txt").unlink(missing_ok=True)


# -- local process pool ------------------------------------------------------------------------------------

#: What the pool's fork server imports once, so that each worker forked from it starts with them: a spawned worker
#: spends seconds importing torch, transformers and the engine before its first cell (docs/methods.md#notes-behind-the-code). Only
#: modules of this layer and below (the cells' own modules are light once these are in); importing them starts no
#: thread, so forking the server is safe.
_POOL_PRELOAD = ["torch", "transformers", "pandas", "pyarrow.parquet", "scipy.stats", "engine.runtime", "engine.models",
                 "engine.importance", "engine.results", "engine.sweeps.executor"]


def pool_context():
    """The multiprocessing context of pool workers: a fork server that preloads `_POOL_PRELOAD` (started once per
    driver process; later pools fork from the same server). Not plain fork: that would copy the driver's torch
    threads, locks and whatever a test or a page patched. As under spawn, each worker gets the driver's `__main__`
    handling, sys.path and working folder from multiprocessing's preparation, and its environment from
    `_adopt_environment` (the server's own is the driver's at the server's start)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_POOL_PRELOAD)
    return ctx


def _adopt_environment(environ: dict) -> None:
    """Make this worker's environment the driver's at the time the worker was started, as a spawned process's would
    be: the fork server was started with the driver's environment of then, and settings (ENGINE_THREADS, the models
    cache, the results folder) may have changed since."""
    if dict(os.environ) != environ:
        os.environ.clear()
        os.environ.update(environ)


def _pool_worker(conn, environ: dict) -> None:
    """A pool worker's loop: take the driver's environment, then receive (compute, cell, command, attempt), send back
    its _Outcome; None ends it."""
    _adopt_environment(environ)
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the driver is gone
            return
        if task is None:
            return
        compute, cell, command, attempt = task
        conn.send(_execute(compute, cell, CellContext(command=command, attempt=attempt)))


def _defined_in_main(compute, cell) -> bool:
    """Whether a worker needs the parent's `__main__` to unpickle its task: the compute function (or the one a
    functools.partial wraps) or the cell's class was defined in the script the parent runs."""
    func = getattr(compute, "func", compute)
    return "__main__" in (getattr(func, "__module__", None), type(cell).__module__)


@contextmanager
def _workers_main(keep: bool):
    """While workers start: the `__main__` that multiprocessing's spawn preparation re-runs in each of them (the fork
    server's workers run it too).

    Spawn records `sys.modules['__main__']` (its `__spec__` name, else its `__file__`) when a process starts, and the
    child runs that file again before its target. Under Streamlit (a page run by the server, or an AppTest that
    leaves its page there) that file is a page script, which cannot run outside a session and kills every worker
    before its first cell. The workers import everything they run by module name, so unless the task itself
    lives in `__main__` (`keep`), they start with a bare stand-in that names no file: nothing is re-run."""
    if keep:
        yield
        return
    real = sys.modules.get("__main__")
    stand_in = types.ModuleType("__main__")  # no __file__, __spec__ None: spawn's preparation records no main
    sys.modules["__main__"] = stand_in
    try:
        yield
    finally:
        # Only undo our own swap: another thread (a Streamlit session's script run) may have set its page since.
        if sys.modules.get("__main__") is stand_in and real is not None:
            sys.modules["__main__"] = real


@dataclass
class _Slot:
    process: object
    conn: object
    task: int | None = None  # index into the cells of the sweep, or None when idle


def _run_pool(todo: list, compute, backend: Backend, command, finish, report: SweepReport, started) -> None:
    """The cells on `backend.workers` worker processes (`pool_context`), one cell at a time each. A worker that dies (killed,
    out of memory) is replaced, and its cell alone is sent again, up to max_retries times: the driver knows
    which cell each worker holds, unlike concurrent.futures, whose pool breaks as a whole."""
    import engine.settings as settings

    settings.set_threads_for_workers(backend.workers)  # workers share the cores: each takes its part
    ctx = pool_context()

    keep_main = _defined_in_main(compute, todo[0])

    def spawn() -> _Slot:
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_pool_worker, args=(child, dict(os.environ)), daemon=True,
                              name="engine-sweep-worker")
        with _workers_main(keep_main):
            process.start()
        child.close()
        return _Slot(process, parent)

    queue = deque(range(len(todo)))
    attempts = [0] * len(todo)
    slots = [spawn() for _ in range(min(backend.workers, len(todo)))]
    try:
        while queue or any(s.task is not None for s in slots):
            for n, slot in enumerate(slots):
                if slot.task is None and queue:
                    if not slot.process.is_alive():  # died while idle: replace it, nothing to retry
                        slots[n] = slot = spawn()
                    i = queue.popleft()
                    attempts[i] += 1
                    slot.task = i
                    try:
                        slot.conn.send((compute, todo[i], command, attempts[i]))
                    except OSError:  # it died just now: its sentinel says so below, and the cell is sent again
                        pass
                    if started is not None:
                        started(todo[i].key(), f"{socket.gethostname()} pid {slot.process.pid}")
            busy = [s for s in slots if s.task is not None]
            wait([s.conn for s in busy] + [s.process.sentinel for s in busy])
            for n, slot in enumerate(slots):
                if slot.task is None:
                    continue
                outcome = None
                try:
                    if slot.conn.poll():
                        outcome = slot.conn.recv()
                except (EOFError, OSError):
                    outcome = None
                i = slot.task
                if outcome is not None:
                    slot.task = None
                    finish(todo[i], outcome, attempt=attempts[i])
                    continue
                if slot.process.is_alive():
                    continue
                slot.process.join()
                why = f"worker {slot.process.pid} died (exit code {slot.process.exitcode}) during attempt {attempts[i]}"
                _log.warning("cell %s: %s", todo[i].key(), why)
                slot.conn.close()
                slots[n] = spawn()
                if attempts[i] <= backend.max_retries:
                    report.retried.append((todo[i].key(), why))
                    queue.appendleft(i)
                else:
                    finish(todo[i], None, f"WorkerDied: {why}; gave up after {attempts[i]} attempts")
    finally:
        for slot in slots:
            try:
                slot.conn.send(None)
            except (OSError, ValueError):
                pass
        deadline = time.time() + 10
        for slot in slots:
            slot.process.join(max(0.0, deadline - time.time()))
            if slot.process.is_alive():  # interrupted mid-cell: its result would be thrown away anyway
                slot.process.kill()
                slot.process.join()


# -- Ray ----------------------------------------------------------------------------------------------------

def ray_task_options(cluster_gpus: float, fraction: float = RAY_GPU_FRACTION) -> dict:
    """Ray resources of one cell: a GPU fraction when the cluster has GPUs, none otherwise (CPU-only clusters).
    Ray then makes the assigned GPU the task's only visible one and gives a GPU task a fresh worker each time."""
    return {"num_gpus": fraction} if cluster_gpus and cluster_gpus > 0 else {}


def ray_device(gpu_ids: Sequence, visible: str | None) -> str:
    """The torch device of the GPU Ray assigned to this task: ids from `ray.get_gpu_ids()`, `visible` the task's
    CUDA_VISIBLE_DEVICES (which Ray sets to the assigned ids, so the first assigned GPU is usually cuda:0).
    'cpu' for a task given no GPU, so it never loads onto a GPU it did not ask for."""
    if not gpu_ids:
        return "cpu"
    first = str(gpu_ids[0])
    listed = [v.strip() for v in (visible or "").split(",") if v.strip()]
    return f"cuda:{listed.index(first)}" if first in listed else f"cuda:{first}"


def ray_attempt() -> int:
    """Which run of the current Ray task this is, from 1 (Ray counts from 0 and runs a task again when its worker or
    node died). Ray 2.60's public runtime context does not expose it; its core worker does."""
    from ray._private.worker import global_worker

    return int(global_worker.core_worker.get_current_task_attempt_number()) + 1


def _ray_execute(compute, cell, command) -> _Outcome:
    """`_execute` in a Ray task, on the device Ray assigned to it, knowing which attempt of the task it is."""
    import ray

    os.environ["ENGINE_DEVICE"] = ray_device(ray.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"))
    attempt = ray_attempt()
    outcome = _execute(compute, cell, CellContext(command=command, attempt=attempt))
    outcome.where = f"ray node {ray.get_runtime_context().get_node_id()[:12]}, {outcome.where}"
    outcome.attempt = attempt
    return outcome


def ray_runtime_env(num_cpus: float = 1) -> dict:
    """The environment of the Ray workers: this checkout on PYTHONPATH (nodes run the same code from the same
    path) and the driver's ENGINE_* settings (models cache, dtype, attention ...; not the device, which Ray
    assigns), with ENGINE_THREADS = the task's CPUs unless set."""
    import engine.settings as settings

    env = {name: os.environ[name] for name in settings.SETTINGS if name in os.environ and name != "ENGINE_DEVICE"}
    # the offline policy of the driver's entry point (settings.offline): a worker imports the engine, which sets none
    env.update({name: os.environ[name] for name in settings.HUB_VARIABLES if name in os.environ})
    env.setdefault("ENGINE_THREADS", str(max(1, int(num_cpus))))
    paths = [str(settings.PROJECT_ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return {"env_vars": env}


def _run_ray(todo: list, compute, backend: Backend, command, finish, report: SweepReport) -> None:
    """The cells as Ray tasks. A task whose worker process or node dies is retried by Ray (max_retries; never
    for an exception of the cell, which comes back as traceback text); one that still fails is reported."""
    try:
        import ray
    except ImportError as err:
        raise InvalidInputError("--ray needs Ray: pip install 'ray[default]'") from err

    owned = not ray.is_initialized()
    if owned:
        env = ray_runtime_env(backend.num_cpus)
        if backend.address == "local":  # a private cluster for this sweep, kept small: it shares the machine
            ray.init(num_cpus=max(1, backend.workers), object_store_memory=200_000_000, include_dashboard=False,
                     runtime_env=env, log_to_driver=False)
        else:
            ray.init(address=backend.address, runtime_env=env, log_to_driver=False)
    try:
        options = {"num_cpus": backend.num_cpus, "max_retries": backend.max_retries, "retry_exceptions": False,
                   **ray_task_options(ray.cluster_resources().get("GPU", 0))}
        if backend.resources:
            options["resources"] = dict(backend.resources)
        remote = ray.remote(**options)(_ray_execute)
        refs = {remote.remote(compute, cell, command): cell for cell in todo}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            cell = refs[ready[0]]
            try:
                outcome = ray.get(ready[0])
            except Exception as err:  # the task's worker or node died on every attempt: reported, the rest go on
                finish(cell, None, err)
            else:
                if outcome.attempt is not None and outcome.attempt > 1:
                    report.retried.append((cell.key(), f"Ray ran the task {outcome.attempt} times: its worker or node died"))
                finish(cell, outcome, attempt=outcome.attempt or 1)
    finally:
        if owned:
            ray.shutdown()
