"""W&P's diagnostics: divergences against hand-computed values, and the adversary's objective."""
from __future__ import annotations

import math

import pytest
import torch

from engine.attention import jsd, kl, tvd
from engine.attention.diagnostics import positive_f1, train_adversary, train_guided_mlp, uniform_baseline
from engine.data import get_dataset
from engine.models import TrainConfig, train_classifier


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
    return train_classifier(TrainConfig(base_model="bilstm", dataset="toy", strategy="plain", epochs=4, lr=3e-3, batch_size=16),
                            show_progress_bar=False)


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
