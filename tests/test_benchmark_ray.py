"""Benchmark cells on a (local, 2-CPU) Ray cluster write the same rows to the same store as the local path."""
from __future__ import annotations

import pandas as pd
import pytest

from engine.faithfulness.benchmark import Cell, run_sweep
from engine.models import save_classifier
from engine.results import ResultsStore
from engine.runtime import PROJECT_ROOT

ray = pytest.importorskip("ray")


def test_ray_sweep_equals_the_local_sweep(models_cache, toy_classifier, tmp_path):
    save_classifier(toy_classifier, "toy-ray")
    cells = [Cell(model="toy-ray", dataset="toy", measure=m, seed=0, limit=24, ratios=(0.0, 0.5, 1.0))
             for m in ("random", "grad-l2")]
    local = run_sweep(cells, run="local", results_dir=tmp_path / "local")
    env = {"ENGINE_MODELS_CACHE": str(models_cache), "PYTHONPATH": str(PROJECT_ROOT), "ENGINE_THREADS": "1"}
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": env}, log_to_driver=False)
    try:
        remote = run_sweep(cells, run="ray", results_dir=tmp_path / "ray", ray_address="local")
    finally:
        ray.shutdown()
    assert not remote.failed, remote.failed
    assert len(remote.done) == len(local.done) == 2
    columns = ["measure", "ratio", "value", "p_value"]
    a = ResultsStore(tmp_path / "local").load("local")[columns].sort_values(columns[:2]).reset_index(drop=True)
    b = ResultsStore(tmp_path / "ray").load("ray")[columns].sort_values(columns[:2]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    again = run_sweep(cells, run="ray", results_dir=tmp_path / "ray", ray_address="local")
    assert len(again.skipped) == 2 and not again.done, "cells in the store are not sent to Ray again"
