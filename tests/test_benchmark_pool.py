"""Benchmark cells on the local process pool (`--workers 2`) write the same rows as the one-process path."""
from __future__ import annotations

import pandas as pd

from engine.faithfulness.benchmark import Cell, run_sweep
from engine.models import save_classifier
from engine.results import ResultsStore


def test_process_pool_sweep_equals_the_one_process_sweep(models_cache, toy_classifier, tmp_path, monkeypatch):
    """Two spawned workers (one thread each) compute the cells of a sweep: every cell is written once, whole, with
    the same curve and p-values as in one process, and a second sweep finds them all in the store."""
    monkeypatch.setenv("ENGINE_THREADS", "1")  # what run_sweep would set for 2 workers on 2 cores; restored after
    save_classifier(toy_classifier, "toy-pool")
    cells = [Cell(model="toy-pool", dataset="toy", measure=m, seed=s, limit=16, ratios=(0.0, 0.5, 1.0))
             for m in ("random", "loo-sign") for s in (0, 1)]
    one = run_sweep(cells, run="one", results_dir=tmp_path / "one")
    pool = run_sweep(cells, run="pool", results_dir=tmp_path / "pool", workers=2)
    assert not pool.failed, pool.failed
    assert len(pool.done) == len(one.done) == 4
    columns = ["measure", "seed", "ratio", "value", "p_value", "mean_probability"]
    a = ResultsStore(tmp_path / "one").load("one")[columns].sort_values(columns[:3]).reset_index(drop=True)
    b = ResultsStore(tmp_path / "pool").load("pool")[columns].sort_values(columns[:3]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert not list((tmp_path / "pool" / "pool" / "cells").glob(".*.tmp")), "no half-written files"
    again = run_sweep(cells, run="pool", results_dir=tmp_path / "pool", workers=2)
    assert len(again.skipped) == 4 and not again.done
