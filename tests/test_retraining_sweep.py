"""ROAR / Recursive ROAR sweeps into the results store: tidy rows per method, the level-0 model shared
and saved, random stored once for every method, and resumption without recomputing."""
from __future__ import annotations

import numpy as np

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
    assert len(report["done"]) == 4 and len(data) == 4 * 2
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
    assert again["done"] == [] and len(again["skipped"]) == 4, "finished cells are never recomputed"

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
