"""Ray cells record the attempt Ray ran them on: the driver side, with Ray's scheduling replaced by
a stand-in that runs each task at once and reports it as its second attempt for one cell. The real Ray path (a worker
killed mid-cell) is tests/engine/test_sweeps.py::test_a_ray_worker_killed_mid_cell_has_its_task_retried_and_the_cell_written_once."""
from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pandas as pd

import engine.sweeps.executor as executor
from engine.sweeps.cells import CellResult
from engine.sweeps.report import SweepReport


@dataclass(frozen=True)
class _Cell:
    name: str

    def key(self) -> dict:
        return {"name": self.name}


def _compute(cell, context):
    return CellResult(pd.DataFrame({"attempt_seen": [context.attempt]}), {"cell": cell.name})


def _fake_ray() -> types.ModuleType:
    """What _run_ray calls on `ray`, each task run when it is submitted."""
    ray = types.ModuleType("ray")
    ray.is_initialized = lambda: True  # the sweep does not own the cluster: no init, no shutdown
    ray.cluster_resources = lambda: {}
    ray.get_gpu_ids = lambda: []
    ray.get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: "node0123456789ab")
    ray.remote = lambda **options: (lambda fn: types.SimpleNamespace(remote=lambda *a: (lambda: fn(*a))))
    ray.wait = lambda pending, num_returns=1: (pending[:1], pending[1:])
    ray.get = lambda ref: ref()
    return ray


def test_a_cell_ray_ran_again_records_its_real_attempt(monkeypatch):
    """The attempt Ray reports inside the task reaches the cell's context and its stored provenance ("sweep":
    {"attempt": 2}), and the sweep report lists the cell as retried; a first-run cell records 1."""
    monkeypatch.setitem(sys.modules, "ray", _fake_ray())
    running = {}
    monkeypatch.setattr(executor, "ray_attempt", lambda: 2 if running["cell"] == "again" else 1)
    finished = {}

    def finish(cell, outcome, error=None, attempt=1):
        assert error is None and outcome.error is None, outcome.error
        finished[cell.name] = (attempt, int(outcome.result.rows["attempt_seen"].iloc[0]))

    cells = [_Cell("first"), _Cell("again")]

    def remote_execute(compute, cell, command):  # the task as Ray runs it: on its first or its second attempt
        running["cell"] = cell.name
        return original(compute, cell, command)

    original = executor._ray_execute
    monkeypatch.setattr(executor, "_ray_execute", remote_execute)
    report = SweepReport(run="r", backend="ray")
    executor._run_ray(cells, _compute, executor.Backend("ray", address="auto"), "cmd", finish, report)
    assert finished == {"first": (1, 1), "again": (2, 2)}
    assert [key for key, _ in report.retried] == [{"name": "again"}]


def test_the_attempt_is_read_from_rays_core_worker():
    """Ray numbers a task's attempts from 0 and exposes the current one on its core worker (not on the public
    runtime context, as of 2.60): the call the executor makes exists in the installed Ray."""
    import pytest

    raylet = pytest.importorskip("ray._raylet")
    assert hasattr(raylet.CoreWorker, "get_current_task_attempt_number")
