"""ROAR / Recursive ROAR sweeps into the results store: tidy rows per method, the level-0 model shared
and saved, random stored once for every method, and resumption without recomputing."""
from __future__ import annotations

import numpy as np
import pandas as pd

from engine.faithfulness.retraining import run_retraining_sweep
from engine.faithfulness.summary import area_metrics_table
from engine.models import TrainConfig
from engine.results import ResultsStore


def test_sweep_writes_both_methods_shares_level0_and_resumes(models_cache, tmp_path):
    config = TrainConfig(base_model="tiny", dataset="toy", strategy="plain", epochs=2, lr=3e-4, batch_size=16,
                         train_limit=160, eval_limit=64)
    results = tmp_path / "results"
    trainings = []
    report = run_retraining_sweep(config, ["random", "x-grad-sign"], seeds=[0], levels=[0.5], run="r",
                                  results_dir=results, log=lambda m: None, progress=trainings.append)
    # level 0 once + random once (serves both methods) + x-grad-sign for each method
    assert trainings[-1]["trainings_done"] == trainings[-1]["trainings_total"] == 4
    assert (models_cache / "tiny-toy-plain-s0" / "model.safetensors").is_file(), "the level-0 model is saved"
    data = ResultsStore(results).load("r")
    assert set(data["method"]) == {"roar", "recursive-roar"}
    assert len(report.done) == 4 and len(data) == 4 * 2
    for _method, part in data.groupby("method"):
        level0 = part[part["ratio"] == 0]["value"]
        assert level0.nunique() == 1, "every curve of a seed starts at the same level-0 model"
        assert np.isnan(part["p_value"]).all()
    random = data[data["measure"] == "random"].pivot(index="ratio", columns="method", values="value")
    assert (random["roar"] == random["recursive-roar"]).all(), "one model-independent random curve for both"
    table = area_metrics_table(data)
    assert set(table["method"]) == {"roar", "recursive-roar"} and len(table) == 4

    again = run_retraining_sweep(config, ["random", "x-grad-sign"], seeds=[0], levels=[0.5], run="r",
                                 results_dir=results, log=lambda m: None)
    assert again.done == [] and len(again.skipped) == 4, "finished cells are never recomputed"

    # The count strategy in the same run: its own schedule, so neither the table nor the curves mix it with
    # the quantile cells (before, both stored their level as `ratio` and the ACU of the pooled curve failed).
    run_retraining_sweep(config, ["random", "x-grad-sign"], seeds=[0], methods=["roar"], strategy="count", levels=[2],
                         run="r", results_dir=results, log=lambda m: None)
    data = ResultsStore(results).load("r")
    counted = data[data["schedule"] == "count 0..2"]
    assert set(data["schedule"]) == {"quantile", "count 0..2"} and len(counted) == 2 * 2
    assert sorted(counted["count"].unique()) == [0, 2] and sorted(counted["ratio"].unique()) == [0.0, 1.0], \
        "k tokens is stored as count, and k / k_max is the x-axis"
    table = area_metrics_table(data)
    assert len(table) == 4 + 2 and set(table[table["schedule"] == "count 0..2"]["method"]) == {"roar"}


def test_pool_sweep_equals_the_one_process_sweep_and_trains_each_level0_once(tmp_path, monkeypatch):
    """Two spawned workers (one thread each, an empty models cache of their own) compute the same curves, bit for
    bit, as one process: the level-0 model, needed by both cells of the seed, is trained once under the shared
    lock and loaded by the other cell; random is stored under both methods."""
    monkeypatch.setenv("ENGINE_THREADS", "1")
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    config = TrainConfig(base_model="tiny", dataset="toy", strategy="plain", epochs=1, lr=3e-4, batch_size=16,
                         train_limit=48, eval_limit=24)
    runs = {}
    for name, workers in (("one", 1), ("pool", 2)):
        monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / f"cache-{name}"))
        report = run_retraining_sweep(config, ["random", "grad-l2"], seeds=[0], methods=["roar", "recursive-roar"],
                                      levels=[0.5], run=name, results_dir=tmp_path / name, log=lambda m: None,
                                      workers=workers)
        assert not report.failed, report.failed
        assert len(report.done) == 4 and report.backend == ("pool" if workers > 1 else "process")
        runs[name] = ResultsStore(tmp_path / name).load(name)
    columns = ["method", "measure", "ratio", "value", "masked_fraction"]
    a, b = (runs[n][columns].sort_values(columns[:3]).reset_index(drop=True) for n in ("one", "pool"))
    pd.testing.assert_frame_equal(a, b)
    trained = [p.name for p in (tmp_path / "cache-pool").iterdir() if not p.name.startswith(".")]
    assert trained == ["tiny-toy-plain-s0"], "one level-0 model, trained by one worker and loaded by the other"


def test_a_random_curve_stored_under_one_method_only_is_completed_without_recomputing(models_cache, tmp_path):
    """A driver killed between writing the random curve's first method cell and the others: the next sweep writes
    the missing ones from the stored curve and computes nothing."""
    from engine.faithfulness.retraining import roar_cells

    config = TrainConfig(base_model="tiny", dataset="toy", strategy="plain", epochs=1, lr=3e-4, batch_size=16,
                         train_limit=48, eval_limit=24)
    results = tmp_path / "results"
    run_retraining_sweep(config, ["random"], seeds=[0], levels=[0.5], run="r", results_dir=results, log=lambda m: None)
    store = ResultsStore(results)
    (cell,) = roar_cells(config, ["random"], [0], levels=[0.5])
    sibling = cell.keys()[1]
    from engine.results.store import cell_key

    for suffix in (".json", ".parquet"):
        (results / "r" / "cells" / f"{cell_key(sibling)}{suffix}").unlink()
    again = run_retraining_sweep(config, ["random"], seeds=[0], levels=[0.5], run="r", results_dir=results,
                                 log=lambda m: None)
    assert again.done == [] and len(again.skipped) == 2 and store.has_cell("r", sibling)
    data = store.load("r").pivot(index="ratio", columns="method", values="value")
    assert (data["roar"] == data["recursive-roar"]).all()
