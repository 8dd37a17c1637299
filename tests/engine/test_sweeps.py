"""engine.sweeps: one executor whose back ends (this process, a local process pool, a Ray cluster) give the same
bits, which survives a worker killed mid-cell (cell retried, written once) and a driver killed mid-sweep (resumed
without recomputing a finished cell, no half-written cell visible), and keeps a failed cell's traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
from conftest import ray_environment

# sweep_helpers is beside this file: pytest puts tests/ (conftest's folder, no package) on sys.path, and spawned
# workers inherit sys.path
from sweep_helpers import (
    NumberCell,
    compute_and_wait_to_be_killed,
    compute_square,
    compute_square_noting_the_environment,
)

from engine.faithfulness.benchmark import Cell, run_sweep
from engine.faithfulness.evaluation import EvaluationCell, evaluation_store, run_suite
from engine.models import save_classifier
from engine.results import ResultsStore
from engine.runtime import PROJECT_ROOT
from engine.sweeps import Backend, SweepReport, provenance

LEVELS = (0.0, 0.5, 1.0)


def _bench_cells(model: str, limit: int = 12) -> list[Cell]:
    return [Cell(model=model, dataset="toy", measure=m, seed=s, limit=limit, ratios=LEVELS)
            for m in ("random", "loo-sign") for s in (0, 1)]


def _rows(root: Path, run: str) -> pd.DataFrame:
    """Every stored row of the run minus the timing columns (wall time differs from run to run), in a fixed order."""
    df = ResultsStore(root).load(run)
    df = df.drop(columns=[c for c in df.columns if "seconds" in c])
    return df.sort_values(["measure", "seed", "step", "metric"]).reset_index(drop=True)


def _cell_files(root: Path, run: str) -> dict[str, tuple[int, int]]:
    """name -> (inode, mtime in ns) of every visible file of the run's cells."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (root / run / "cells").glob("[!.]*")}


def _assert_whole(root: Path, run: str, n: int) -> None:
    """Exactly n cells, each with both files, no other visible file."""
    files = sorted(p.name for p in (root / run / "cells").glob("[!.]*"))
    stems = {f.rsplit(".", 1)[0] for f in files}
    assert len(stems) == n and files == sorted([f"{s}.json" for s in stems] + [f"{s}.parquet" for s in stems]), files


def _kill_when_marked(marker: Path, timeout: float = 120) -> threading.Thread:
    """A thread that SIGKILLs the pid written to `marker` as soon as it appears."""
    def watch():
        deadline = time.time() + timeout
        while time.time() < deadline:
            if marker.exists():
                os.kill(int(marker.read_text()), signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.fixture()
def one_thread_env(monkeypatch):
    """One torch thread per cell everywhere (what a 2-worker pool on 2 cores gets), so the bits compared are those of
    the same arithmetic."""
    monkeypatch.setenv("ENGINE_THREADS", "1")


def test_provenance_has_one_set_of_field_names(toy_classifier):
    """provenance() gives the same fields for every kind of result, with checkpoint fields when given a model."""
    started = time.time()
    bare = provenance("cmd", started, seeds=[0])
    assert {"command", "code_version", "created", "seconds", "machine", "runtime", "seeds"} <= set(bare)
    assert "checkpoint" not in bare
    full = provenance("cmd", started, toy_classifier, n_examples=3, checkpoint_sha256="abc")
    assert full["checkpoint_sha256"] == "abc" and full["n_examples"] == 3 and "model_runtime" in full


def test_provenance_keeps_a_passed_checkpoint_hash_without_a_classifier():
    """A caller that hashed the weights but holds no classifier (the simulability teacher's view) still gets
    `checkpoint_sha256` recorded; no other checkpoint field is invented."""
    record = provenance("cmd", time.time(), checkpoint_sha256="abc")
    assert record["checkpoint_sha256"] == "abc"
    assert "checkpoint" not in record and "model_runtime" not in record


def test_pool_workers_start_whatever_module_the_parent_has_as_main(tmp_path, monkeypatch, one_thread_env):
    """Spawn re-runs the parent's __main__ file in every worker; after a Streamlit page ran in this process that
    file is a page script. With a __main__ whose file raises on import, a pool sweep still computes every cell,
    in worker processes, with no worker lost."""
    import types

    from engine.sweeps import run_cells

    page = tmp_path / "page.py"
    page.write_text("raise RuntimeError('a page script run outside Streamlit')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(page)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    cells = [NumberCell(n) for n in range(3)]
    report = run_cells(cells, compute_square, ResultsStore(tmp_path), "pool", backend=Backend("pool", workers=2,
                                                                                               max_retries=0))
    assert sys.modules["__main__"] is main, "the parent's __main__ is put back"
    assert not report.failed and not report.retried, (report.failed, report.tracebacks)
    assert len(report.done) == 3
    pids = {e["provenance"]["pid"] for e in ResultsStore(tmp_path).provenance("pool")}
    assert os.getpid() not in pids, "computed in the workers, not the driver"


def test_pool_workers_take_the_drivers_environment_of_when_they_start(tmp_path, monkeypatch, one_thread_env):
    """Pool workers fork from a server started with the driver's environment of its first pool; each worker still
    sees the environment of the moment it starts, as a spawned one would: a variable changed between two pools
    (a test's results folder, a user's ENGINE_THREADS) reaches the second pool's workers, and one removed is gone."""
    from engine.sweeps import run_cells

    seen = {}
    for run, mark in (("first", "before"), ("second", "after"), ("third", None)):
        if mark is None:
            monkeypatch.delenv("ENGINE_TEST_MARK")
        else:
            monkeypatch.setenv("ENGINE_TEST_MARK", mark)
        report = run_cells([NumberCell(n) for n in range(2)], compute_square_noting_the_environment,
                           ResultsStore(tmp_path), run, backend=Backend("pool", workers=2, max_retries=0))
        assert len(report.done) == 2, report.tracebacks
        seen[run] = {(e["provenance"]["mark"], e["provenance"]["threads"]) for e in ResultsStore(tmp_path).provenance(run)}
    assert seen == {"first": {("before", "1")}, "second": {("after", "1")}, "third": {(None, "1")}}, seen


def test_backend_from_options_prefers_ray_then_a_pool_and_refuses_unknown_kinds():
    assert Backend.from_options(workers=4, ray="auto").kind == "ray"
    assert Backend.from_options(workers=4).kind == "pool"
    assert Backend.from_options(workers=1).kind == "process"
    with pytest.raises(ValueError, match="process, pool, ray"):
        Backend(kind="threads")


def test_a_pool_worker_killed_mid_cell_has_its_cell_retried_once(models_cache, toy_classifier, tmp_path,
                                                                 one_thread_env, monkeypatch):
    """SIGKILL the worker holding a cell after its first batch: a new worker runs the cell again, every cell is
    written exactly once, the rows are those of one process, bit for bit, and the driver loaded no model (no
    ensure_masf pass before the pool). A cell that fails in a worker comes back with the worker's whole traceback
    (down to load_classifier) and the others go on."""
    save_classifier(toy_classifier, "toy-kill")
    cells = _bench_cells("toy-kill")
    broken = Cell(model="no-such-checkpoint", dataset="toy", measure="random", seed=0, limit=16, ratios=LEVELS)
    run_sweep(cells, run="one", results_dir=tmp_path)
    import engine.models

    def refuse(*args, **kwargs):
        raise AssertionError("the driver loaded a model: on the pool path only the cells do")

    monkeypatch.setattr(engine.models, "load_classifier", refuse)
    watcher = _kill_when_marked(tmp_path / "victim.pid")
    from engine.results import ResultsStore as Store
    from engine.sweeps import run_cells

    compute = partial(compute_and_wait_to_be_killed, marker_dir=str(tmp_path), victim="loo-sign/0")
    report = run_cells([*cells, broken], compute, Store(tmp_path), "pool", backend=Backend("pool", workers=2))
    watcher.join(1)
    assert (tmp_path / "victim.pid").exists(), "the victim cell never ran"
    assert len(report.retried) == 1 and report.retried[0][0]["measure"] == "loo-sign", report.retried
    assert "exit code -9" in report.retried[0][1]
    assert len(report.failed) == 1 and report.failed[0][0]["model"] == "no-such-checkpoint" and len(report.done) == 4
    assert report.tracebacks[0].startswith("Traceback (most recent call last)") and "load_classifier" in report.tracebacks[0]
    assert len(list((tmp_path / "pool" / "failed").glob("*.txt"))) == 1
    assert sorted(json.dumps(k, sort_keys=True) for k in report.done) == sorted(
        json.dumps(c.key(), sort_keys=True) for c in cells), "every cell once"
    _assert_whole(tmp_path, "pool", 4)
    recorded = {e["cell"]["measure"] + str(e["cell"]["seed"]): e["provenance"]["sweep"]["attempt"]
                for e in Store(tmp_path).provenance("pool")}
    assert recorded == {"random0": 1, "random1": 1, "loo-sign0": 2, "loo-sign1": 1}
    pd.testing.assert_frame_equal(_rows(tmp_path, "one").drop(columns="run"), _rows(tmp_path, "pool").drop(columns="run"),
                                  check_exact=True)


DRIVER = """
import sys
from engine.faithfulness.benchmark import Cell, run_sweep
cells = [Cell(model="toy-driver", dataset="toy", measure=m, seed=s, limit=16, ratios=(0.0, 0.5, 1.0))
         for m in ("random", "loo-sign") for s in (0, 1)]
run_sweep(cells, run="resume", results_dir=sys.argv[1])
"""


def test_a_driver_killed_mid_sweep_resumes_without_recomputing_a_finished_cell(models_cache, toy_classifier, tmp_path,
                                                                               one_thread_env):
    """Kill the sweep's process (SIGKILL) once it has written a cell; the run then shows only whole cells, and the
    next sweep skips every finished cell (its files keep their inode and mtime) and computes only the others."""
    save_classifier(toy_classifier, "toy-driver")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    cells_dir = tmp_path / "resume" / "cells"
    deadline = time.time() + 240
    while time.time() < deadline and driver.poll() is None and len(list(cells_dir.glob("[!.]*.json"))) < 1:
        time.sleep(0.02)
    assert driver.poll() is None, driver.stderr.read().decode()[-2000:]
    driver.kill()
    driver.wait()
    before = _cell_files(tmp_path, "resume")
    finished = {p.stem for p in cells_dir.glob("[!.]*.json")}
    assert 1 <= len(finished) < 4
    half = [p.stem for p in cells_dir.glob("[!.]*.parquet") if p.stem not in finished]
    assert len(ResultsStore(tmp_path).load("resume").groupby(["measure", "seed"])) == len(finished), (
        "a cell without its provenance is not visible", half)

    report = run_sweep([Cell(model="toy-driver", dataset="toy", measure=m, seed=s, limit=16, ratios=LEVELS)
                        for m in ("random", "loo-sign") for s in (0, 1)], run="resume", results_dir=tmp_path)
    assert len(report.skipped) == len(finished) and len(report.done) == 4 - len(finished)
    after = _cell_files(tmp_path, "resume")
    for stem in finished:  # not recomputed, not rewritten
        assert after[f"{stem}.json"] == before[f"{stem}.json"] and after[f"{stem}.parquet"] == before[f"{stem}.parquet"]
    _assert_whole(tmp_path, "resume", 4)


def test_a_failed_report_line_names_the_error_when_given_traceback_text(tmp_path):
    """A traceback that crossed a process boundary as text is kept whole and its last line names the error."""
    report = SweepReport(run="r")
    text = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: bad cell\n'
    report.fail({"model": "m", "measure": "x", "seed": 0}, text, tmp_path)
    assert report.tracebacks == [text] and report.failed[0][1].startswith("ValueError: bad cell")
    assert text in next((tmp_path / "r" / "failed").glob("*.txt")).read_text(encoding="utf-8")


# -- Ray: the session's local cluster (conftest.local_ray: 2 CPUs, small object store) ----------------------------

@pytest.fixture(scope="module")
def ray_cluster(local_ray, toy_classifier):
    """The local Ray cluster, its models cache (returned) holding the toy checkpoint, its environment (one torch
    thread) in this process too for the module's tests."""
    with ray_environment(local_ray):
        save_classifier(toy_classifier, "toy-ray")
        yield Path(local_ray["ENGINE_MODELS_CACHE"])


@pytest.mark.ray
def test_ray_gives_the_bits_of_one_process_for_benchmark_and_evaluation(ray_cluster, tmp_path):
    """Benchmark and evaluation cells as Ray tasks write the rows the one-process sweep writes, bit for bit, and a
    second sweep sends nothing to Ray (every cell is in the store)."""
    cells = _bench_cells("toy-ray", limit=12)
    run_sweep(cells, run="one", results_dir=tmp_path)
    remote = run_sweep(cells, run="ray", results_dir=tmp_path, ray_address="local")
    assert not remote.failed and len(remote.done) == 4 and remote.backend == "ray"
    pd.testing.assert_frame_equal(_rows(tmp_path, "one").drop(columns="run"), _rows(tmp_path, "ray").drop(columns="run"),
                                  check_exact=True)
    again = run_sweep(cells, run="ray", results_dir=tmp_path, ray_address="local")
    assert len(again.skipped) == 4 and not again.done

    evaluation = [EvaluationCell(model="toy-ray", dataset="toy", measure=m, seed=0, limit=12, soft_draws=2,
                                 metrics=("comprehensiveness", "soft")) for m in ("random", "grad-l2")]
    run_suite(evaluation, run="one", results_dir=tmp_path / "evaluation")
    on_ray = run_suite(evaluation, run="ray", results_dir=tmp_path / "evaluation", backend=Backend("ray", address="local"))
    assert not on_ray.failed and len(on_ray.done) == 2
    a = evaluation_store(tmp_path / "evaluation").load("one").drop(columns="run")
    b = evaluation_store(tmp_path / "evaluation").load("ray").drop(columns="run")
    keep = [c for c in a.columns if "seconds" not in c]
    pd.testing.assert_frame_equal(a[keep].sort_values(["measure", "step"]).reset_index(drop=True),
                                  b[keep].sort_values(["measure", "step"]).reset_index(drop=True), check_exact=True)


@pytest.mark.ray
def test_a_ray_worker_killed_mid_cell_has_its_task_retried_and_the_cell_written_once(ray_cluster, tmp_path):
    """SIGKILL the Ray worker process holding a cell after its first batch: Ray runs the task again (max_retries),
    the driver writes every cell exactly once, and the rows equal the one-process rows bit for bit."""
    from engine.sweeps import run_cells

    cells = _bench_cells("toy-ray", limit=12)
    run_sweep(cells, run="one", results_dir=tmp_path)
    watcher = _kill_when_marked(tmp_path / "victim.pid")
    compute = partial(compute_and_wait_to_be_killed, marker_dir=str(tmp_path), victim="loo-sign/1")
    report = run_cells(cells, compute, ResultsStore(tmp_path), "ray", backend=Backend("ray", address="local"))
    watcher.join(1)
    assert (tmp_path / "victim.pid").exists(), "the victim cell never ran"
    assert not report.failed, report.tracebacks
    assert sorted(json.dumps(k, sort_keys=True) for k in report.done) == sorted(
        json.dumps(c.key(), sort_keys=True) for c in cells), "every cell once"
    _assert_whole(tmp_path, "ray", 4)
    killed = int((tmp_path / "victim.pid").read_text())
    workers = {e["cell"]["measure"] + str(e["cell"]["seed"]): e["provenance"]["sweep"]["worker"]
               for e in ResultsStore(tmp_path).provenance("ray")}
    assert not workers["loo-sign1"].endswith(f"pid {killed}"), "the retried cell ran in another worker"
    attempts = {e["cell"]["measure"] + str(e["cell"]["seed"]): e["provenance"]["sweep"]["attempt"]
                for e in ResultsStore(tmp_path).provenance("ray")}
    assert attempts["loo-sign1"] == 2 and set(attempts.values()) == {1, 2}, f"the real attempt of each cell: {attempts}"
    assert [k for k, _ in report.retried] == [c.key() for c in cells if c.measure == "loo-sign" and c.seed == 1]
    pd.testing.assert_frame_equal(_rows(tmp_path, "one").drop(columns="run"), _rows(tmp_path, "ray").drop(columns="run"),
                                  check_exact=True)


def test_every_sweep_option_is_parsed_and_imported_scores_stay_in_this_process(models_cache, capsys, tmp_path):
    """benchmark and evaluate take --workers and --ray; evaluate refuses --scores with workers before any work
    (imported scores live in this process's measure registry, which workers do not share)."""
    from engine.cli import main

    scores = tmp_path / "s.csv"
    scores.write_text("text,score\n", encoding="utf-8")
    argv = ["metrics", "--model", "m", "--dataset", "toy", "--scores", str(scores), "--workers", "2"]
    assert main(argv) == 2
    assert "--scores runs in this process" in capsys.readouterr().err
    assert main([*argv[:-2], "--ray", "auto"]) == 2
    with pytest.raises(SystemExit):
        main(["mask-sweep", "--datasets", "toy", "--measures", "random", "--workers", "0"])
    assert "whole number >= 1" in capsys.readouterr().err
