"""The evaluation sweep and its commands: cells with provenance and cost in the evaluation store, resumable."""
from __future__ import annotations

import pytest
from cli_helpers import run_command, save_for_commands


@pytest.fixture()
def saved_toy(toy_classifier, models_cache, tmp_path, monkeypatch):
    return save_for_commands(toy_classifier, "toy-masked-s0", tmp_path, monkeypatch)


def test_evaluate_writes_resumable_cells_with_provenance_and_cost(saved_toy, tmp_path, capsys):
    from engine.faithfulness.evaluation import evaluation_store, evaluation_table

    argv = ["--model", saved_toy, "--dataset", "toy", "--measures", "random", "loo-sign", "--limit", "6",
            "--metrics", "comprehensiveness", "decision-flip", "--run", "t", "--agreement"]
    assert run_command("metrics", argv) == 0
    store = evaluation_store()
    assert store.root == tmp_path / "results" / "evaluation"
    entries = store.provenance("t")
    assert len(entries) == 3  # two erasure cells and the agreement table
    prov = next(e for e in entries if e["cell"]["kind"] == "erasure")["provenance"]
    assert prov["command"].startswith("python -m engine metrics --model toy-masked-s0")
    assert prov["code_version"] and prov["checkpoint_sha256"] and prov["machine"] and prov["masf"]
    assert prov["cost"]["seconds_per_explanation"] > 0
    everything = store.load("t")
    agreement = everything[everything.method == "agreement between measures"]
    assert set(agreement["measure"]) == {"loo-sign ~ random"} and agreement["value"].notna().any()
    data = everything[everything.method == "erasure"]
    loo = data[data.measure == "loo-sign"]
    # LOO: one forward row per maskable token (its logit of x rides along with the copies); no backward rows.
    assert (loo["explanation_forward_rows"] > 1).all() and (loo["explanation_backward_rows"] == 0).all()
    assert set(data["better"]) == {"higher", "lower"} and data["p_below_005"].between(0, 1).all()
    assert {"aopc-comprehensiveness", "flip-fraction", "top1-flip"} <= set(data["metric"])
    assert run_command("metrics", argv) == 0  # everything is in the store: nothing is recomputed
    assert "0 cells computed, 3 already in the store" in capsys.readouterr().out
    table = evaluation_table(data)
    assert set(table["measure"]) == {"random", "loo-sign"} and table["ci"].eq("none: 1 value").all()


def test_sanity_command_stores_the_curve_and_the_verdict(saved_toy):
    from engine.faithfulness.evaluation import SANITY_MODEL, evaluation_store

    assert run_command("sanity", ["--model", saved_toy, "--dataset", "toy", "--measures", "random", "--checks", "model",
                           "--limit", "6", "--run", "s"]) == 0
    data = evaluation_store().load("s")
    assert set(data["method"]) == {SANITY_MODEL}
    assert list(data.sort_values("step")["stage"]) == ["trained", "head", "layer 1", "layer 0", "embeddings"]
    last = data[data["step"] == data["step"].max()].iloc[0]
    assert last["value"] == pytest.approx(1.0) and not last["passes"]  # random does not depend on the model


def test_unknown_measure_is_refused_before_any_work(saved_toy):
    from engine.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="known"):
        run_command("metrics", ["--model", saved_toy, "--dataset", "toy", "--measures", "nope"])


def test_benchmark_cells_record_wall_time_and_rows_per_explanation(saved_toy, tmp_path):
    """A recursive-masking cell with grad-l2 (one forward+backward row per explanation) records exactly that,
    and the time of every explanation: the Benchmarks page plots faithfulness against it."""
    from engine.faithfulness.benchmark import Cell, run_cell
    from engine.results import ResultsStore

    run_cell(Cell(model=saved_toy, dataset="toy", measure="grad-l2", seed=0, limit=4, ratios=(0.0, 0.5, 1.0)),
             str(tmp_path / "bench"), "b")
    entry = ResultsStore(tmp_path / "bench").provenance("b")[0]["provenance"]
    assert entry["cost"]["explanations"] == 4  # one explanation per input, at the only step that computes one
    assert entry["cost"]["backward_rows_per_explanation"] == 1.0 and entry["cost"]["seconds_per_explanation"] > 0
    rows = ResultsStore(tmp_path / "bench").load("b")
    assert (rows["backward_rows_per_explanation"] == 1.0).all()


def test_agreement_with_racu_orients_lower_is_better_metrics():
    """A deletion area that falls as RACU rises ranks the measures as RACU does (rho = +1 after orientation)."""
    import pandas as pd

    from engine.faithfulness.evaluation import agreement_with_racu

    measures = ["a", "b", "c", "d"]
    racu = pd.DataFrame({"measure": measures, "racu_pct": [10.0, 20, 30, 40]})
    table = pd.DataFrame([{"strategy": "masked", "removal": "mask", "metric": m, "level": float("nan"), "measure": x,
                           "value": v, "better": b, "p_below_005": 0.1}
                          for x, area, aopc in zip(measures, [0.9, 0.8, 0.7, 0.6], [0.1, 0.3, 0.2, 0.4])
                          for m, v, b in (("deletion-area", area, "lower"), ("aopc-comprehensiveness", aopc, "higher"))])
    out = agreement_with_racu(table, racu).set_index("metric")
    assert out.loc["deletion-area", "spearman_with_racu"] == pytest.approx(1.0)
    assert out.loc["aopc-comprehensiveness", "spearman_with_racu"] == pytest.approx(0.8)
