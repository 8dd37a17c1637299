"""W&P's diagnostics: divergences against hand-computed values, and the adversary's objective."""
from __future__ import annotations

import math

import pytest
import torch

from engine.attention import jsd, kl, tvd
from engine.attention.diagnostics import positive_f1, train_adversary, train_guided_mlp, uniform_baseline
from engine.data import get_dataset
from engine.models import TrainConfig


def test_divergences_hand_computed():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.5, 0.5])
    assert float(tvd(p, q)) == pytest.approx(0.5)
    # M = [0.25, 0.5, 0.25]; KL(p||M) = 0.5 ln 2 + 0.5 ln 1 = 0.5 ln 2, same for q
    assert float(jsd(p, q)) == pytest.approx(0.5 * math.log(2))
    assert float(jsd(p, p)) == pytest.approx(0.0, abs=1e-9)
    assert float(jsd(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))) == pytest.approx(math.log(2), rel=1e-6)
    assert float(kl(torch.tensor([0.5, 0.5]), torch.tensor([0.25, 0.75]))) == pytest.approx(
        0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75))
    assert positive_f1([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.5)


@pytest.fixture(scope="module")
def toy_bilstm():
    """The BiLSTM the adversary and the MLPs start from, trained once per machine and code version (conftest)."""
    from conftest import cached_classifier

    return cached_classifier(TrainConfig(base_model="bilstm", dataset="toy", strategy="plain", epochs=4, lr=3e-3,
                                         batch_size=16))


def test_adversary_moves_attention_and_its_loss_decreases(toy_bilstm):
    _, metrics = train_adversary(toy_bilstm, get_dataset("toy"), lam=0.5, epochs=4)
    assert metrics["losses"][-1] < metrics["losses"][0], "the adversarial objective is optimised"
    assert metrics["jsd"] > 0.05, "attention moves away from the base model's"
    _, keep = train_adversary(toy_bilstm, get_dataset("toy"), lam=0.0, epochs=1)
    assert keep["tvd"] < 0.05 and keep["jsd"] < 0.05, "with lambda 0 the copy stays where the base model is"


def test_guided_mlp_and_uniform_baseline_learn_the_toy_task(toy_bilstm):
    assert train_guided_mlp(toy_bilstm, get_dataset("toy"), "uniform", epochs=6, lr=3e-3)["accuracy"] >= 0.8
    uniform = uniform_baseline(TrainConfig(base_model="bilstm", dataset="toy", strategy="plain", epochs=4, lr=3e-3, batch_size=16))
    assert uniform["accuracy"] >= 0.8


def test_best_adversary_is_the_least_tvd_among_those_that_moved_attention_past_0_4():
    import pandas as pd

    from engine.attention.runner import best_adversary

    table = pd.DataFrame({"accuracy": [0.9, 0.8, 0.7, 0.6], "lambda": [0.01, 0.1, 0.3, 1.0],
                          "tvd": [0.01, 0.05, 0.03, 0.03], "jsd": [0.2, 0.5, 0.6, 0.65],
                          "model": list("abcd"), "final_loss": [0.0] * 4})
    assert best_adversary(table) == {"accuracy": 0.7, "lambda": 0.3, "tvd": 0.03, "jsd": 0.6}, \
        "lowest TVD among JSD > 0.4, the smaller lambda on a tie; not the lower-TVD one that barely moved attention"
    assert best_adversary(table[table["jsd"] < 0.4]) is None


def test_diagnostics_sweep_in_a_pool_equals_one_process_resumes_and_reads_back_like_the_shipped_layout(
        tmp_path, monkeypatch):
    """The diagnostics as store cells: two spawned workers give the same summary, seed-variance and adversary
    tables, bit for bit, as one process; a second sweep computes nothing; the tables have the columns of the
    shipped (pre-store) run, which still reads back, and the Attention page's W&P table builds from both."""
    import pandas as pd

    from engine.attention.results import attention_runs, load_attention_results, wp_table
    from engine.attention.runner import run_attention_diagnostics
    from engine.runtime import PROJECT_ROOT

    monkeypatch.setenv("ENGINE_THREADS", "1")
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    # Every adversary qualifies (a 1-epoch adversary on toy rarely moves attention past W&P's 0.4), so the third
    # wave, the MLP guided by the best adversary's attention, runs too.
    monkeypatch.setattr("engine.attention.runner.JSD_THRESHOLD", -1.0)
    read = {}
    for name, workers in (("one", 1), ("pool", 2)):
        monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / f"cache-{name}"))
        results = tmp_path / name
        report = run_attention_diagnostics("toy", seeds=2, lambdas=[0.5], epochs=1, adversary_epochs=1, mlp_epochs=1,
                                           run="r", results_dir=results, log=lambda m: None, workers=workers)
        assert not report.failed, report.failed
        assert len(report.done) == 8  # base, uniform, seed 1, one adversary, four guided MLPs
        assert attention_runs(results) == [("r", "toy")]
        read[name] = load_attention_results("r", "toy", results)
    (one_summary, one_var, one_adv), (pool_summary, pool_var, pool_adv) = read["one"], read["pool"]
    strip = lambda s: {k: v for k, v in s.items() if k != "provenance"}  # noqa: E731
    assert strip(one_summary) == strip(pool_summary)
    pd.testing.assert_frame_equal(one_var, pool_var)
    pd.testing.assert_frame_equal(one_adv.drop(columns="model"), pool_adv.drop(columns="model"))
    assert list(one_summary["guided_mlp"]) == ["uniform", "trained", "base_lstm", "adversary"]
    assert one_summary["best_adversary"]["lambda"] == 0.5
    assert one_summary["base_model"] == "bilstm-toy-plain-s0" and len(one_var) == 40 and set(one_var["seed"]) == {1}
    shipped = load_attention_results("default", "rt", PROJECT_ROOT / "results")
    assert list(one_var.columns) == list(shipped[1].columns)
    assert list(one_adv.columns) == list(shipped[2].columns)
    assert set(one_summary) == set(shipped[0])
    assert not wp_table(one_summary).empty and not wp_table(shipped[0]).empty

    again = run_attention_diagnostics("toy", seeds=2, lambdas=[0.5], epochs=1, adversary_epochs=1, mlp_epochs=1,
                                      run="r", results_dir=tmp_path / "pool", log=lambda m: None, workers=2)
    assert again.done == [] and len(again.skipped) == len(report.done), "finished diagnostics are not recomputed"
