"""SMaT (engine.simulability): head scores, sparsemax head weights, the look-ahead meta-gradient, the runner
and the `smat` importance measure. Small random-weight BERTs built here, or the packaged `tiny`."""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
from pathlib import Path

import pytest
import torch

from engine.importance.head_scores import attention_logits, head_scores, head_weighted
from engine.simulability.data import SimSplit
from engine.simulability.explainers import (
    HeadWeights,
    explanation_kl,
    uniform_weights,
)
from engine.simulability.meta import lookahead, meta_gradient, outer_loss
from engine.simulability.student import Student
from engine.simulability.training import StudentConfig


@pytest.fixture(autouse=True)
def one_thread():
    """Small models on 2 shared cores: one intra-op thread is 10-70x faster than two that spin-wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_bert(vocab=50, hidden=16, layers=2, heads=2, dropout=0.1, seed=0):
    from transformers import AutoModel, BertConfig

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=2 * hidden, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    config._attn_implementation = "eager"
    return AutoModel.from_config(config, add_pooling_layer=False)


def random_split(n, T, H, seed, vocab=50, dtype=torch.float32, pad_first=True):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (n, T), generator=g)
    mask = torch.ones(n, T, dtype=torch.long)
    if pad_first:
        mask[0, T - 2:] = 0
        ids[0, T - 2:] = 0
    scores = torch.randn(n, H, T, generator=g, dtype=dtype).masked_fill(~mask.bool()[:, None, :], -1e9)
    return SimSplit(ids, mask, torch.zeros_like(ids), mask.bool(), torch.randint(0, 2, (n,), generator=g), scores)


# -- head weights and explainers ------------------------------------------------------------------------------

def test_sparsemax_head_weights_lie_on_the_simplex_and_are_sparse():
    """lambda = sparsemax(phi): non-negative, sums to 1, and exact zeros once phi spreads (softmax never has)."""
    weights = HeadWeights(8)
    with torch.no_grad():
        weights.phi.copy_(torch.tensor([2.0, 1.5, 0.2, 0.1, -1.0, 0.0, 0.3, 1.9]))
    lam = weights.weights()
    assert torch.all(lam >= 0)
    assert lam.sum().item() == pytest.approx(1.0, abs=1e-6)
    assert int((lam == 0).sum()) >= 4
    # a Euclidean projection onto the simplex: shifting phi changes nothing; the uniform start stays uniform
    with torch.no_grad():
        weights.phi.add_(3.0)
    assert torch.allclose(weights.weights(), lam, atol=1e-6)
    assert torch.allclose(HeadWeights(8).weights(), torch.full((8,), 1 / 8))


def test_initial_learned_explainer_equals_attention_all():
    """phi starts at 1/H, so the learned explainer starts as the uniform average of all heads' logits."""
    split = random_split(4, 9, 6, seed=1)
    learned = HeadWeights(6)(split.teacher_scores, split.attention_mask)
    static = head_weighted(split.teacher_scores, uniform_weights(6), split.attention_mask)
    expected = torch.softmax(split.teacher_scores.mean(1).masked_fill(~split.attention_mask.bool(), -torch.inf), -1)
    assert torch.allclose(learned, static, atol=1e-6)
    assert torch.allclose(learned, expected, atol=1e-6)
    assert torch.all(learned[0, -2:] == 0)  # padding gets nothing


def test_one_hot_head_weights_reproduce_a_single_head():
    """A one-hot lambda (reached by sparsemax from a dominant phi) gives softmax of that head's scores alone."""
    split = random_split(3, 7, 5, seed=2)
    weights = HeadWeights(5)
    with torch.no_grad():
        weights.phi.copy_(torch.tensor([0.0, 0.0, 3.0, 0.0, 0.0]))
    assert weights.weights().tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]
    e = weights(split.teacher_scores, split.attention_mask)
    single = torch.softmax(split.teacher_scores[:, 2].masked_fill(~split.attention_mask.bool(), -torch.inf), -1)
    assert torch.allclose(e, single, atol=1e-6)


def test_explanation_kl_is_zero_for_equal_and_positive_for_different_distributions():
    split = random_split(3, 6, 2, seed=3)
    a = head_weighted(split.teacher_scores, torch.tensor([1.0, 0.0]), split.attention_mask)
    b = head_weighted(split.teacher_scores, torch.tensor([0.0, 1.0]), split.attention_mask)
    assert explanation_kl(a, a, split.attention_mask).item() == pytest.approx(0.0, abs=1e-6)
    assert explanation_kl(a, b, split.attention_mask).item() > 0.01


# -- head scores ------------------------------------------------------------------------------------------------

def test_softmax_of_recomputed_logits_equals_the_models_eager_attention():
    """The logits recomputed from hidden states and each layer's query/key projections give, after softmax,
    exactly the attention the model applied (packaged tiny encoder, eager attention, one padded row); the
    head score is their mean over the non-pad queries."""
    from transformers import AutoModel, AutoTokenizer

    from engine.models import resolve_encoder

    source = resolve_encoder("tiny")
    model = AutoModel.from_pretrained(source, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(source)
    enc = tok(["a dull and boring film", "wonderful"], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True, output_attentions=True)
        logits = attention_logits(model, out.hidden_states, enc["attention_mask"])
        scores = head_scores(model, out.hidden_states, enc["attention_mask"])
    own = torch.cat(out.attentions, dim=1)  # [B, L*heads, T, T], layer-major like ours
    keep = enc["attention_mask"].bool()
    # compare row by row on real queries (padded query rows are meaningless in both)
    for b in range(2):
        n = int(keep[b].sum())
        assert torch.allclose(torch.softmax(logits[b, :, :n, :], -1), own[b, :, :n, :], atol=1e-5)
        mean_logits = logits[b, :, :n, :n].mean(1)
        assert torch.allclose(scores[b, :, :n], mean_logits, atol=1e-4)
        assert torch.all(scores[b, :, n:] <= -1e8)


# -- meta-gradient --------------------------------------------------------------------------------------------------

def _float64_student(dropout=0.1):
    return Student(small_bert(dropout=dropout), 2).double()


def _meta_setup(H=6):
    student = _float64_student()
    batch = random_split(8, 7, H, seed=4, dtype=torch.float64)
    val = random_split(8, 7, H, seed=5, dtype=torch.float64)
    teacher = HeadWeights(H).double()
    with torch.no_grad():  # a point inside the support (sparsemax is smooth there), not uniform
        teacher.phi.copy_(torch.tensor([0.3, 0.25, 0.2, 0.15, 0.05, 0.05], dtype=torch.float64))
    return student, teacher, batch, val


HYPER = {"lr": 0.5, "max_grad_norm": 5.0, "weight_decay": 0.01}


def test_meta_gradient_is_zero_without_the_explanation_term():
    """beta = 0: phi_T reaches the outer loss only through beta * KL, so its meta-gradient is exactly 0."""
    student, teacher, batch, val = _meta_setup()
    grad, _ = meta_gradient(student, teacher, batch, val, 0.0, dropout=False, **HYPER)
    assert torch.equal(grad, torch.zeros_like(grad))


def test_meta_gradient_matches_central_finite_differences_in_float64():
    """beta > 0: non-zero, and equal to central differences of outer(lookahead(phi)) (dropout off, float64)."""
    student, teacher, batch, val = _meta_setup()
    before = {k: v.clone() for k, v in student.state_dict().items()}
    grad, _ = meta_gradient(student, teacher, batch, val, 5.0, dropout=False, **HYPER)
    assert grad.abs().max() > 1e-6
    student.eval()

    def loss(phi):
        with torch.no_grad():
            teacher.phi.copy_(phi)
        e = teacher(batch.teacher_scores, batch.attention_mask)
        return outer_loss(student, lookahead(student, batch, e, 5.0, **HYPER), val).item()

    phi0 = teacher.phi.detach().clone()
    eps = 1e-5
    fd = torch.zeros_like(phi0)
    for i in range(len(phi0)):
        step = torch.zeros_like(phi0)
        step[i] = eps
        fd[i] = (loss(phi0 + step) - loss(phi0 - step)) / (2 * eps)
    assert ((grad - fd).norm() / fd.norm()).item() < 1e-3
    # the look-ahead never touches the student itself
    assert all(torch.equal(before[k], v) for k, v in student.state_dict().items())


# -- the runner, the CLI and the `smat` measure ---------------------------------------------------------------------

def _cli_module():
    """engine/cli/simulability.py, loaded from its file (the CLI package registers it when merged)."""
    path = Path(__file__).resolve().parents[2] / "engine" / "cli" / "simulability.py"
    spec = importlib.util.spec_from_file_location("simulability_cli", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def toy_teacher():
    """`tiny` briefly masked-fine-tuned on `toy` with one thread (a teacher's accuracy is not the point here;
    the shared session fixture trains with every core, which a loaded 2-core machine makes slow); trained once per
    machine and code version (conftest's `cached_classifier`)."""
    from conftest import cached_classifier

    from engine.models import TrainConfig

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return cached_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=2, lr=3e-4,
                                             batch_size=16, seed=0))
    finally:
        torch.set_num_threads(before)


@pytest.fixture()
def saved_teacher(toy_teacher, models_cache):
    from engine.models import save_classifier

    return save_classifier(toy_teacher, "toy-teacher", cache_dir=models_cache, overwrite=True)


def test_cli_run_writes_resumable_cells_with_provenance_and_a_frozen_teacher(saved_teacher, tmp_path, monkeypatch):
    """Cells carry command, code version, weights hash, seed, machine; a second call computes nothing; the
    teacher's weights file and predictions are the same after the run; SMaT's head weights land beside the
    checkpoint as JSON and the `smat` measure explains with them."""
    from engine.data import get_dataset
    from engine.importance import get_explainer
    from engine.importance.head_weights import read_head_weights
    from engine.models import load_classifier
    from engine.simulability.results import load_simulability, simulation_table
    from engine.simulability.runner import run_simulability
    from engine.simulability.training import StudentConfig

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    examples = get_dataset("toy").split("test")[:40]
    before_sha = _sha(saved_teacher / "model.safetensors")
    before_pred = load_classifier("toy-teacher").predict_examples(examples).argmax(-1)

    cli = _cli_module()
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    args = parser.parse_args(["--teacher", "toy-teacher", "--budgets", "16", "--seeds", "0", "--explainers", "none",
                              "attention-all", "grad-l2", "smat", "--max-epochs", "2", "--patience", "1",
                              "--validation-limit", "32", "--test-limit", "40", "--quiet"])
    args.command_line = "python -m engine simulability --teacher toy-teacher ..."
    assert cli.run(args) == 0

    data = load_simulability("toy-teacher-toy")
    accuracy = data[data["metric"] == "simulation accuracy"]
    assert sorted(accuracy["measure"]) == ["attention-all", "grad-l2", "none", "smat"]
    assert accuracy["value"].between(0, 1).all()
    assert list(simulation_table(data).columns) == ["16"]
    heads = data[(data["metric"] == "head weight") & (data["step"] == 0)]
    assert len(heads) == 4 and heads["value"].tolist() == pytest.approx([0.25] * 4)  # uniform start, 2 x 2 heads
    from engine.simulability.runner import simulability_store

    for entry in simulability_store().provenance("toy-teacher-toy"):
        prov = entry["provenance"]
        assert prov["command"].startswith("python -m engine simulability")
        assert prov["checkpoint_sha256"] == before_sha and prov["code_version"] and prov["machine"]
        assert entry["cell"]["seed"] == 0

    again = run_simulability("toy-teacher", budgets=[16], seeds=[0], explainers=["none", "smat"],
                             config=StudentConfig(max_epochs=2, patience=1), validation_limit=32, test_limit=40)
    assert again.done == [] and len(again.skipped) == 2

    assert _sha(saved_teacher / "model.safetensors") == before_sha
    teacher = load_classifier("toy-teacher")
    assert (teacher.predict_examples(examples).argmax(-1) == before_pred).all()

    record = read_head_weights(saved_teacher)
    assert record["layers"] == 2 and record["heads"] == 2 and sum(record["weights"]) == pytest.approx(1.0)
    batch = teacher.batch(["the movie was really good", "this film was so dull and bad"])
    importance = get_explainer("smat", teacher).attribute(batch)
    scores = importance.scores
    assert torch.all(scores >= 0) and torch.all(scores.sum(1) <= 1 + 1e-6)
    assert importance.options["head_weights_sha256"]
    # like any measure, it drives recursive masking (a curve from the unmasked metric down to all masked)
    from engine.faithfulness.recursive import dataset_masking_curve

    curve = dataset_masking_curve(teacher, get_explainer("smat", teacher), get_dataset("toy"), ratios=(0.0, 0.5, 1.0),
                                  limit=8)
    assert [row["step"] for row in curve] == [0, 1, 2]


def test_smat_measure_declines_a_checkpoint_without_learned_weights(toy_teacher, monkeypatch):
    from engine.importance import get_explainer

    monkeypatch.setattr(toy_teacher, "folder", None)  # never saved: no learned weights beside it
    ok, why = get_explainer("smat", toy_teacher).supports()
    assert not ok and "python -m engine simulability" in why


def test_cancelling_keeps_finished_cells_and_writes_no_partial_one(saved_teacher, tmp_path):
    from engine.errors import SimulabilityCancelled
    from engine.simulability.runner import run_simulability, simulability_store
    from engine.simulability.training import StudentConfig

    def should_stop():  # polled every step: stop as soon as the first cell is stored, inside the second
        return any(tmp_path.glob("simulability/*/cells/*.json"))

    with pytest.raises(SimulabilityCancelled):
        run_simulability("toy-teacher", budgets=[16], seeds=[0, 1], explainers=["none"], results_dir=str(tmp_path),
                         config=StudentConfig(max_epochs=2, patience=5, batch_size=8), validation_limit=16,
                         test_limit=16, should_stop=should_stop)
    stored = simulability_store(str(tmp_path)).load()
    assert sorted(stored[stored["metric"] == "simulation accuracy"]["seed"]) == [0]


def test_pool_run_equals_the_one_process_run_and_stores_the_same_learned_weights(saved_teacher, tmp_path, monkeypatch):
    """Students trained by two spawned workers (one thread each) give the same rows, bit for bit, as in one
    process (the teacher precomputed once by the driver and shipped with each cell); SMaT's head weights, written
    by the driver, are the same record; a second pool run computes nothing."""
    import pandas as pd

    from engine.importance.head_weights import read_head_weights
    from engine.simulability.runner import run_simulability, simulability_store
    from engine.simulability.training import StudentConfig

    monkeypatch.setenv("ENGINE_THREADS", "1")
    options = dict(budgets=[16], seeds=[0, 1], explainers=["none", "smat"], validation_limit=16, test_limit=16,
                   config=StudentConfig(max_epochs=2, patience=1, batch_size=8))
    rows, weights = {}, {}
    for name, workers in (("one", 1), ("pool", 2)):
        report = run_simulability("toy-teacher", results_dir=str(tmp_path / name), workers=workers, **options)
        assert not report.failed, report.failed
        assert len(report.done) == 4 and report.backend == ("pool" if workers > 1 else "process")
        data = simulability_store(str(tmp_path / name)).load()
        rows[name] = data.drop(columns=["run"]).sort_values(["measure", "seed", "metric", "step", "layer", "head"],
                                                            kind="stable").reset_index(drop=True)
        record = read_head_weights(saved_teacher)
        weights[name] = (record["weights"], record["phi"], record["provenance"]["budget"], record["provenance"]["seed"])
    pd.testing.assert_frame_equal(rows["one"], rows["pool"])
    assert weights["one"] == weights["pool"] and weights["one"][2:] == (16, 0), "largest budget, then smallest seed"
    again = run_simulability("toy-teacher", results_dir=str(tmp_path / "pool"), workers=2, **options)
    assert again.done == [] and len(again.skipped) == 4


def _fake_run(results_dir):
    """A small simulability run written straight into the store (no training): 2 explainers x 2 budgets x 2 seeds,
    SMaT's head weights at two steps, sentence AUCs and single-head AUCs."""
    import pandas as pd

    from engine.simulability.runner import SINGLE_HEADS, simulability_store

    store = simulability_store(results_dir)
    base = {"model": "m", "dataset": "babi-1", "strategy": "masked", "ratio": float("nan"), "p_value": float("nan"),
            "student": "tiny", "beta": 5.0, "method": "simulability", "split": "test", "layer": -1, "head": -1}
    for measure in ("none", "smat"):
        for budget in (250, 500):
            for seed in (0, 1):
                rows = [{**base, "measure": measure, "budget": budget, "seed": seed, "step": 3,
                         "metric": "simulation accuracy", "value": 0.7 + 0.1 * (measure == "smat") + seed / 100}]
                if measure == "smat":
                    for step, w in ((0, [0.25] * 4), (8, [0.7, 0.3, 0.0, 0.0])):
                        rows += [{**base, "measure": measure, "budget": budget, "seed": seed, "step": step,
                                  "metric": "head weight", "value": v, "layer": h // 2, "head": h % 2}
                                 for h, v in enumerate(w)]
                    rows += [{**base, "measure": measure, "budget": budget, "seed": seed, "step": -1,
                              "metric": "learned head weight", "value": v, "layer": h // 2, "head": h % 2}
                             for h, v in enumerate([0.7, 0.3, 0.0, 0.0])]
                    rows.append({**base, "measure": measure, "budget": budget, "seed": seed, "step": 0,
                                 "metric": "sentence AUC", "value": 0.8})
                key = {"model": "m", "measure": measure, "budget": budget, "seed": seed}
                store.write_cell("m-babi-1", key, pd.DataFrame(rows), {"command": "test"})
    heads = [{**base, "measure": SINGLE_HEADS, "budget": 0, "seed": 0, "step": 0, "metric": "sentence AUC",
              "value": v, "layer": h // 2, "head": h % 2} for h, v in enumerate([0.9, 0.6, 0.5, 0.4])]
    store.write_cell("m-babi-1", {"model": "m", "measure": SINGLE_HEADS}, pd.DataFrame(heads), {"command": "test"})


def test_summaries_take_medians_over_seeds_and_pair_heads_with_their_weights(tmp_path):
    from engine.simulability.results import head_auc_vs_weight, load_simulability, plausibility_table, simulation_summary

    _fake_run(str(tmp_path))
    data = load_simulability("m-babi-1", str(tmp_path))
    summary = simulation_summary(data)
    row = summary[(summary["explainer"] == "smat") & (summary["budget"] == 250)].iloc[0]
    assert row["median"] == pytest.approx(80.5) and row["seeds"] == 2
    assert list(summary["explainer"].unique()) == ["none", "smat"]  # SMaT Table 1's order
    pairs = head_auc_vs_weight(data)
    assert pairs.sort_values(["layer", "head"])["weight"].tolist() == pytest.approx([0.7, 0.3, 0.0, 0.0])
    table = plausibility_table(data)
    assert table.iloc[-1]["sentence AUC"] == pytest.approx(0.9) and "L0 H0" in table.iloc[-1]["explainer"]


def test_simulability_page_draws_a_run_without_errors(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    _fake_run(str(tmp_path))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path))
    page = Path(__file__).resolve().parents[2] / "pages" / "simulability.py"
    at = AppTest.from_file(str(page), default_timeout=60).run()
    assert not at.exception
    assert len(at.dataframe) >= 3  # measured table, published table, plausibility
    assert any("Heads kept" in c.value for c in at.caption)


def test_sentence_auc_is_one_for_a_distribution_on_the_supporting_facts_and_a_half_for_uniform():
    """Token probabilities summed per sentence: all mass on the supporting sentence ranks it first (AUC 1),
    a uniform distribution over equally long sentences ties (AUC 0.5); a story of one kind of sentence has none."""
    import math

    import numpy as np

    from engine.simulability.plausibility import pairwise_auc, sentence_auc

    ids = np.array([-1, 0, 0, 1, 1, 2, 2, -1])  # token -> sentence ([CLS], [SEP]: -1)
    labels = np.array([False, True, False])
    on_fact = torch.tensor([[0, 0, 0, 0.5, 0.5, 0, 0, 0]])
    uniform = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 0]]) / 6
    assert sentence_auc(on_fact, [(ids, labels)]) == 1.0
    assert sentence_auc(uniform, [(ids, labels)]) == 0.5
    assert math.isnan(pairwise_auc(np.array([1.0, 2.0]), np.array([True, True])))


# -- the toy check: one informative head among noise heads ------------------------------------------------------------

TOY_PEAKS = (3, 6, 8, 10)  # teacher head h scores a peak at token position TOY_PEAKS[h] and 0 elsewhere
TOY_A = 5  # the two content tokens are TOY_A and TOY_A + 1


def position_toy(n, seed, label_position, length=10, peak=4.0):
    """n sequences [CLS] x_1 .. x_length [SEP], every x_i one of two tokens at random; the label (the teacher's
    prediction) is the token at `label_position`. Bag of words sees the label only as one vote among `length`, so a
    student learns it from few examples only by attending to that position.

    Teacher head scores [n, 4, length + 2]: head h is `peak` at TOY_PEAKS[h], 0 elsewhere. The head pointing at
    `label_position` is the informative one; the noise heads point at tokens of the same kind (random, label-free)
    and are exactly as easy for the student's explainer to match, so only usefulness tells them apart."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(TOY_A, TOY_A + 2, (n, length + 2), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS], [SEP] of the 8-token toy vocabulary
    mask = torch.ones_like(ids)
    scores = torch.zeros(n, len(TOY_PEAKS), length + 2)
    for h, position in enumerate(TOY_PEAKS):
        scores[:, h, position] = peak
    return SimSplit(ids, mask, torch.zeros_like(ids), mask.bool(), ids[:, label_position] - TOY_A, scores)


def toy_student(seed):
    """A random 1-layer BERT student (hidden 32, 2 heads, no dropout) with initializer_range 0.3. With BERT's
    default 0.02 the attention logits and position embeddings start so small that no scaffold taught anything in
    10 epochs (every student, informative head included, stayed at chance), so the look-ahead had nothing to find."""
    from transformers import AutoModel, BertConfig

    torch.manual_seed(seed)
    config = BertConfig(vocab_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                        initializer_range=0.3)
    config._attn_implementation = "eager"
    return Student(AutoModel.from_config(config, add_pooling_layer=False), 2)


def toy_config(**overrides):
    """Student lr 0.1 (a random-init student, not SMaT's pretrained one at 5e-3), teacher Adam lr 1e-2: 10 epochs of
    4 steps (128 examples, batches of 32), no early stopping."""
    return StudentConfig(**{"lr": 0.1, "teacher_lr": 1e-2, "max_epochs": 10, "patience": 10, "batch_size": 32,
                            **overrides})


def test_toy_informative_head_alone_teaches_the_task_and_a_noise_head_does_not():
    """The premise of the toy: scaffolded by the informative head alone (a static explainer) the student simulates the
    teacher almost perfectly after 10 epochs; without an explanation, or scaffolded by a noise head, it does not."""
    from engine.simulability.training import simulation_accuracy, train_student

    train, validation, test = (position_toy(n, seed, TOY_PEAKS[0]) for n, seed in ((128, 10), (128, 50), (512, 90)))
    accuracy = {}
    for name, head in (("none", None), ("informative", 0), ("noise", 1)):
        split = train
        if head is not None:
            one = torch.zeros(len(TOY_PEAKS))
            one[head] = 1.0
            split = SimSplit(**{**vars(train), "explanations": {
                "oracle": head_weighted(train.teacher_scores, one, train.attention_mask)}})
        student = toy_student(0)
        train_student(student, split, validation, "none" if head is None else "oracle", toy_config(), seed=0)
        accuracy[name] = simulation_accuracy(student, test)
    assert accuracy["informative"] >= 0.95, accuracy
    assert accuracy["none"] <= 0.8 and accuracy["noise"] <= 0.8, accuracy


def test_smat_raises_the_informative_heads_weight_above_its_start_and_every_noise_head():
    """SMaT's learned head weights (the real training loop: student step, look-ahead meta-gradient, Adam on phi_T),
    after 40 steps from the uniform start: the informative head's weight is above 1/H and above every noise head's.
    "Rises" is read on the weights after training, not on single steps: the one-step look-ahead is greedy and
    noisy, and its size varies by orders of magnitude as the student learns, so only the trajectory's outcome is the
    property. Two placements (head 0, head 2) so neither the index nor the position wins by construction.

    It is not every run: the look-ahead judges a head by the immediate drop of the validation loss, and in about 1
    run in 10 the random student's early steps favour a noise head; the student then does not learn the task and
    sparsemax can set the informative weight to exactly 0, where it gets no more gradient. So 7 of the 10 runs
    (5 seeds x 2 placements) must hold: measured 9 of 10 here (22 of 24 over more seeds), which leaves room for a
    seed to flip on another CPU's floating point; a meta-gradient of the wrong sign fails all 10, none leaves every
    weight at 1/H."""
    from engine.simulability.training import train_student

    wins = []
    for informative in (0, 2):
        for seed in range(5):
            train = position_toy(128, 10 + seed, TOY_PEAKS[informative])
            validation = position_toy(128, 50 + seed, TOY_PEAKS[informative])
            result = train_student(toy_student(seed), train, validation, "smat", toy_config(), seed=seed)
            final = torch.tensor(result.head_weights[-1][1])
            noise = torch.cat([final[:informative], final[informative + 1:]])
            wins.append(bool(final[informative] > 1 / len(final) and final[informative] > noise.max()))
    assert sum(wins) >= 7, wins
