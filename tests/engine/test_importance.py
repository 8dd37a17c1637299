"""Importance measures: each test states the property it checks (docs/methods.md#importance-measures)."""
from __future__ import annotations

import copy
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from engine.importance import (
    MEASURES,
    ExplanationCancelled,
    NoMaskableTokenError,
    builtin_measures,
    clear_memo,
    get_explainer,
)
from engine.importance.memo import memo_for
from engine.models import Classifier

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

TEXTS = ["the movie was really good and fun", "this film was so dull"]

# cheap options so every measure runs in well under a second on the toy models
CHEAP = {"beam": {"beam_size": 2}, "kernel-shap": {"n_samples": 40}, "lime": {"n_samples": 40},
         "shapley-sampling": {"n_samples": 2}, "gradient-shap": {"n_samples": 4}, "ig-sign": {"steps": 8},
         "ig-abs": {"steps": 8}, "shapley-interactions": {"budget": 64}, "smoothgrad": {"n_samples": 4},
         "squaregrad": {"n_samples": 4}, "vargrad": {"n_samples": 4}}


_THREADS_BEFORE: list[int] = []


@pytest.fixture(scope="session", autouse=True)
def _one_thread_from_the_start():
    """One intra-op thread while this module runs: on a shared 2-core machine two OpenMP threads stall each
    other (small forwards ~100x slower when another process is busy), and these models are too small to
    gain from two. Session-scoped so it precedes the session-scoped model fixtures (pytest sets up wider
    scopes first); `_restore_threads` puts the count back when this module ends."""
    from engine.runtime import configure

    configure()  # would otherwise reset the threads to 2 when a fixture trains a model
    _THREADS_BEFORE.append(torch.get_num_threads())
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="module", autouse=True)
def _restore_threads(_one_thread_from_the_start):
    torch.set_num_threads(1)
    yield
    if _THREADS_BEFORE:
        torch.set_num_threads(_THREADS_BEFORE[0])


@pytest.fixture(scope="module")
def toy64(toy_classifier):
    """The toy classifier in float64, so hand-made and captum references agree to 1e-5 and better; on the test
    device, as the toy classifier."""
    model = copy.deepcopy(toy_classifier.model).double()
    return Classifier(model, toy_classifier.tokenizer, toy_classifier.classes, toy_classifier.max_length,
                      {**toy_classifier.metadata, "id": "toy-float64"}, device=toy_classifier.device)


def _target_logit(classifier, batch, ids, target):
    """The target logit [B] on the CPU (where an Importance's scores are), computed on the model's device."""
    with torch.no_grad():
        return classifier.logits(batch, ids).gather(1, target.to(classifier.device)[:, None]).squeeze(1).cpu()


def _onehot_gradient(classifier, batch, target):
    """The gradient of the target logit w.r.t. an explicit one-hot input over the vocabulary [B, T, V]; both on the
    CPU (where an Importance's scores are), computed on the model's device."""
    E = classifier.embedding_matrix.detach()
    onehot = torch.nn.functional.one_hot(batch.input_ids, E.shape[0]).to(E.dtype).requires_grad_(True)
    logits = classifier.logits_from_embeddings(onehot @ E, batch)
    (grad,) = torch.autograd.grad(logits.gather(1, target.to(logits.device)[:, None]).sum(), onehot)
    return onehot.detach().cpu(), grad.cpu()


# -- definitions hold ---------------------------------------------------------------------------------
def test_ig_completeness_gap_is_small_and_reported(toy_classifier):
    """IG completeness: sum over maskable tokens of IG_t = f_c(x) - f_c(b), up to the reported gap."""
    batch = toy_classifier.batch(TEXTS)
    for baseline in ("zero", "mask"):
        imp = get_explainer("ig-sign", toy_classifier, baseline=baseline).attribute(batch)
        gap = imp.extras["completeness_gap"]
        delta = imp.extras["f_input"] - imp.extras["f_baseline"]
        assert gap.shape == (2,)
        torch.testing.assert_close(imp.scores.double().sum(1) - delta, gap, atol=1e-5, rtol=0)
        assert (gap.abs() <= 0.02 * delta.abs() + 1e-3).all(), (baseline, gap, delta)
        with torch.no_grad():
            f_x = toy_classifier.logits(batch).gather(1, imp.target.to(batch.device)[:, None]).squeeze(1).double()
        torch.testing.assert_close(imp.extras["f_input"], f_x.cpu(), atol=1e-5, rtol=0)  # extras are on the CPU
    # more steps or Gauss-Legendre shrink the gap further
    fine = get_explainer("ig-sign", toy_classifier, steps=50, rule="gausslegendre").attribute(batch)
    assert (fine.extras["completeness_gap"].abs() <= 1e-3).all()


def test_loo_equals_the_actual_logit_drop(toy_classifier):
    """LOO_t = f_c(x) - f_c(x with t -> [MASK]), recomputed token by token; already-masked tokens score 0."""
    batch = toy_classifier.batch(TEXTS)
    mask_id = toy_classifier.mask_token_id
    ids = batch.input_ids.clone()
    ids[0, 2] = mask_id  # one token already masked
    batch = batch.with_ids(ids)
    target = torch.tensor([1, 0])
    imp = get_explainer("loo-sign", toy_classifier).attribute(batch, target)
    full = _target_logit(toy_classifier, batch, batch.input_ids, target)
    for b in range(len(batch)):
        for t in batch.maskable[b].nonzero().flatten().tolist():
            masked = batch.input_ids.clone()
            masked[b, t] = mask_id
            drop = full[b] - _target_logit(toy_classifier, batch, masked, target)[b]
            assert abs(float(imp.scores[b, t]) - float(drop)) < 1e-5, (b, t)
    assert float(imp.scores[0, 2]) == 0.0
    assert torch.equal(get_explainer("loo-abs", toy_classifier).attribute(batch, target).scores, imp.scores.abs())


def test_grad_l2_shortcut_equals_the_explicit_one_hot_gradient_norm(toy64):
    """grad-l2 via sqrt(g E^T E g^T) equals ||d f_c / d onehot_t||_2, and grad-l1 its L1 norm, over the vocabulary."""
    batch = toy64.batch(TEXTS)
    target = torch.tensor([1, 1])
    _, grad = _onehot_gradient(toy64, batch, target)
    m = batch.maskable.cpu()
    l2 = get_explainer("grad-l2", toy64).attribute(batch, target).scores
    l1 = get_explainer("grad-l1", toy64).attribute(batch, target).scores
    torch.testing.assert_close(l2[m].double(), grad.norm(dim=-1)[m], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(l1[m].double(), grad.abs().sum(-1)[m], rtol=1e-5, atol=1e-6)


def test_x_grad_equals_one_hot_input_times_its_gradient(toy64):
    """x-grad-sign = sum_v onehot_{t,v} * d f_c / d onehot_{t,v} (= e_t . g_t); x-grad-abs is its absolute value."""
    batch = toy64.batch(TEXTS)
    target = torch.tensor([0, 1])
    onehot, grad = _onehot_gradient(toy64, batch, target)
    expected = (onehot * grad).sum(-1)
    m = batch.maskable.cpu()
    sign = get_explainer("x-grad-sign", toy64).attribute(batch, target).scores
    torch.testing.assert_close(sign[m].double(), expected[m], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(get_explainer("x-grad-abs", toy64).attribute(batch, target).scores, sign.abs())


def test_batched_ig_equals_captum_integrated_gradients(toy64):
    """Our one-pass batched IG equals captum's IntegratedGradients (riemann_middle = our midpoint rule) to 1e-5."""
    from captum.attr import IntegratedGradients

    batch = toy64.batch(TEXTS)
    target = torch.tensor([1, 0])
    for baseline in ("zero", "mask"):
        ours = get_explainer("ig-sign", toy64, steps=20, baseline=baseline).attribute(batch, target)
        explainer = get_explainer("ig-sign", toy64, baseline=baseline)
        e = toy64.word_embeddings(batch.input_ids).detach()
        base = explainer.baseline_embeddings(batch)

        def forward(embeds, attention_mask, token_type_ids):
            return toy64.model(inputs_embeds=embeds, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

        ref = IntegratedGradients(forward).attribute(
            e, baselines=base, target=target.to(batch.device),
            additional_forward_args=(batch.attention_mask, batch.token_type_ids), n_steps=20, method="riemann_middle").sum(-1)
        m = batch.maskable.cpu()
        torch.testing.assert_close(ours.scores[m].double(), ref.cpu()[m], atol=1e-5, rtol=0)


def test_batched_loo_equals_captum_feature_ablation(toy64):
    """Our batched LOO equals captum's FeatureAblation with [MASK] as the baseline, one token per feature, to 1e-5."""
    from captum.attr import FeatureAblation

    batch = toy64.batch(TEXTS)
    target = torch.tensor([0, 1])
    ours = get_explainer("loo-sign", toy64).attribute(batch, target)

    def forward(ids, attention_mask, token_type_ids):
        return toy64.model(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    B, T = batch.input_ids.shape
    ref = FeatureAblation(forward).attribute(
        batch.input_ids, baselines=toy64.mask_token_id, target=target.to(batch.device),
        additional_forward_args=(batch.attention_mask, batch.token_type_ids),
        feature_mask=torch.arange(T, device=batch.device).expand(B, T).contiguous())
    m = batch.maskable.cpu()
    torch.testing.assert_close(ours.scores[m].double(), ref.cpu()[m].double(), atol=1e-5, rtol=0)


def test_occlusion_with_window_one_is_leave_one_out(toy64):
    """captum Occlusion with a 1-token window and [MASK] baseline is exactly loo-sign."""
    batch = toy64.batch(TEXTS)
    occ = get_explainer("occlusion", toy64, window=1).attribute(batch, 1)
    loo = get_explainer("loo-sign", toy64).attribute(batch, 1)
    torch.testing.assert_close(occ.scores, loo.scores, atol=1e-5, rtol=0)


def test_shapley_sampling_and_kernel_shap_give_the_exact_shapley_values_of_a_linear_model(known_classifier):
    """On the bag-of-words classifier (logit_1 = sum of w over the tokens, logit_0 = 0, [MASK] has w = 0) the
    exact Shapley value of a token for class 1 is its own weight w, at its own position, and 0 for class 0.
    Shapley sampling is exact on an additive game with any number of permutations, and KernelSHAP's weighted
    regression recovers a linear game exactly (up to its float32 coefficients). Efficiency alone (the sum)
    would not see a token's value land on another token."""
    weights = [2.0, -1.5, 0.75, 0.25, -3.0, 1.25]  # ids 4..9
    classifier, batch_of = known_classifier(weights)
    rows = [[4, 5, 6, 7, 8, 9], [9, 4, 6], [8, 5]]
    batch = batch_of(rows)
    target = torch.tensor([1, 1, 0])
    exact = torch.zeros(batch.input_ids.shape, dtype=torch.float64)
    for b, row in enumerate(rows):
        if target[b] == 1:
            exact[b, 1:len(row) + 1] = torch.tensor([weights[i - 4] for i in row], dtype=torch.float64)
    sv = get_explainer("shapley-sampling", classifier, n_samples=2).attribute(batch, target)
    ks = get_explainer("kernel-shap", classifier, n_samples=80).attribute(batch, target)
    torch.testing.assert_close(sv.scores.double(), exact, atol=1e-9, rtol=0)
    torch.testing.assert_close(ks.scores.double(), exact, atol=1e-5, rtol=0)


def test_beam_first_choice_is_the_top_loo_token(toy_classifier):
    """With beam size 1 the first token beam search masks is LOO's top token (its first step is exactly LOO);
    with any beam size the scores are a permutation N..1 of the maskable tokens."""
    batch = toy_classifier.batch(TEXTS)
    loo = get_explainer("loo-sign", toy_classifier).attribute(batch)
    greedy = get_explainer("beam", toy_classifier, beam_size=1).attribute(batch)
    wide = get_explainer("beam", toy_classifier, beam_size=3).attribute(batch)
    for b in range(len(batch)):
        m = loo.maskable[b]  # an Importance's scores and mask are on the CPU, the batch on the model's device
        assert int(greedy.scores[b].argmax()) == int(torch.where(m, loo.scores[b], -torch.inf).argmax())
        n = int(m.sum())
        for imp in (greedy, wide):
            assert sorted(imp.token_scores(b).tolist()) == [float(i) for i in range(1, n + 1)]
    assert wide.target.tolist() == loo.target.tolist()


def test_beam_streams_progress_and_can_be_cancelled(toy_classifier):
    """beam reports progress(done, total) up to total, and should_stop() cancels with ExplanationCancelled."""
    batch = toy_classifier.batch(TEXTS)
    seen = []
    get_explainer("beam", toy_classifier, beam_size=2, memo=False).attribute(batch, progress=lambda d, t: seen.append((d, t)))
    total = int(batch.maskable.sum())
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    calls = []
    with pytest.raises(ExplanationCancelled):
        get_explainer("beam", toy_classifier, memo=False).attribute(
            batch, should_stop=lambda: calls.append(1) or len(calls) > 2)


def test_no_measure_scores_special_padding_or_auxiliary_tokens(babi_classifier):
    """Every measure: score 0 on special tokens, padding and the auxiliary question; scores only maskable tokens."""
    batch = babi_classifier.batch(
        ["Mary moved to the bathroom. John went to the hallway.", "Daniel went back to the garden."],
        ["Where is Mary?", "Where is Daniel?"])
    assert (batch.segments == 2).any() and (batch.attention_mask == 0).any()  # paired and padded
    for name in builtin_measures():
        explainer = get_explainer(name, babi_classifier, **CHEAP.get(name, {}))
        if not explainer.supports()[0]:
            continue
        imp = explainer.attribute(batch)
        assert imp.scores.shape == batch.input_ids.shape and imp.scores.dtype == torch.float32, name
        assert torch.equal(imp.maskable, batch.maskable.cpu()), name
        assert (imp.scores[~imp.maskable] == 0).all(), name
        assert (imp.scores[imp.maskable] != 0).any(), name
        assert torch.isfinite(imp.scores).all(), name


def test_ig_baseline_keeps_special_and_auxiliary_embeddings(babi_classifier):
    """IG's baseline replaces only maskable word embeddings, so the question and specials never move along the path."""
    batch = babi_classifier.batch(["Mary moved to the bathroom."], ["Where is Mary?"])
    explainer = get_explainer("ig-sign", babi_classifier, baseline="mask")
    e = babi_classifier.word_embeddings(batch.input_ids)
    base = explainer.baseline_embeddings(batch)
    fixed = ~batch.maskable
    assert torch.equal(base[fixed], e[fixed])
    assert not torch.equal(base[batch.maskable], e[batch.maskable])


# -- provenance, memo, random ------------------------------------------------------------------------
def test_importance_records_target_and_its_source(toy_classifier):
    """target None = predicted class ('predicted'); an explicit target is kept and marked 'given'."""
    batch = toy_classifier.batch(TEXTS)
    with torch.no_grad():
        predicted = toy_classifier.logits(batch).argmax(-1).cpu()
    imp = get_explainer("grad-l2", toy_classifier).attribute(batch)
    assert imp.target.tolist() == predicted.tolist() and imp.target_source == "predicted"
    given = get_explainer("ig-abs", toy_classifier, steps=10).attribute(batch, target=0)
    assert given.target.tolist() == [0, 0] and given.target_source == "given"
    assert given.measure == "ig-abs" and given.options == {"steps": 10, "baseline": "zero", "rule": "midpoint", "tolerance": 0.05,
                                                          "abs_tolerance": 0.01, "max_steps": 180}


def test_results_are_memoised_per_input_target_and_options(toy_classifier):
    """A repeated call is served from the model's LRU; another target or option is a different entry;
    training the weights in place invalidates the memo."""
    clear_memo(toy_classifier.model)
    memo = memo_for(toy_classifier.model)
    batch = toy_classifier.batch(TEXTS)
    explainer = get_explainer("loo-sign", toy_classifier)
    first = explainer.attribute(batch, 1)
    hits = memo.hits
    again = explainer.attribute(batch, 1)
    assert memo.hits == hits + 1 and torch.equal(first.scores, again.scores)
    again.scores.zero_()  # callers get a copy: mutating it cannot poison the memo
    assert torch.equal(explainer.attribute(batch, 1).scores, first.scores)
    other = explainer.attribute(batch, 0)
    assert not torch.equal(other.scores, first.scores)
    with torch.no_grad():
        p = next(toy_classifier.model.parameters())
        p.add_(0.0)  # an in-place update bumps the weights' version
    misses = memo.misses
    explainer.attribute(batch, 1)
    assert memo.misses > misses


def test_random_is_seeded_per_input_and_redrawn_when_the_input_changes(toy_classifier):
    """random: same seed and input -> same draw (whatever else is in the batch); another input or seed -> new draw."""
    batch = toy_classifier.batch(TEXTS)
    a = get_explainer("random", toy_classifier, seed=3).attribute(batch).scores
    alone = get_explainer("random", toy_classifier, seed=3).attribute(toy_classifier.batch(TEXTS[:1])).scores
    n = alone.shape[1]
    assert torch.equal(a[0, :n], alone[0])
    assert not torch.equal(get_explainer("random", toy_classifier, seed=4).attribute(batch).scores, a)
    ids = batch.input_ids.clone()
    ids[0, 1] = toy_classifier.mask_token_id
    masked = get_explainer("random", toy_classifier, seed=3).attribute(batch.with_ids(ids)).scores
    assert not torch.equal(masked[0], a[0])
    assert ((a >= 0) & (a < 1)).all()


def test_attention_measures_read_the_eager_attention_weights(toy_classifier):
    """attention-cls-last = last layer's [CLS] row averaged over heads; rollout rows stay a distribution."""
    batch = toy_classifier.batch(TEXTS[:1])
    with torch.no_grad():
        # through Classifier.forward, which runs eager attention for forwards that ask for the weights
        att = toy_classifier.forward(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                     token_type_ids=batch.token_type_ids, output_attentions=True).attentions
    expected = att[-1][0, :, 0, :].mean(0).cpu()  # where an Importance's scores are
    imp = get_explainer("attention-cls-last", toy_classifier).attribute(batch)
    m = imp.maskable[0]
    torch.testing.assert_close(imp.scores[0][m], expected[m].float())
    roll = get_explainer("attention-rollout", toy_classifier).attribute(batch)
    assert 0 < float(roll.scores.sum()) <= 1 + 1e-6
    assert not get_explainer("attention", toy_classifier).supports()[0]  # BiLSTM only


def test_memo_evicts_by_entries_and_bytes():
    """The LRU keeps at most maxsize entries and max_bytes of tensors, dropping the least recently used."""
    from engine.importance.memo import LRU

    lru = LRU(maxsize=2, max_bytes=1000)
    lru.put("a", torch.zeros(10))  # 40 bytes
    lru.put("b", torch.zeros(10))
    lru.get("a")
    lru.put("c", torch.zeros(10))
    assert "a" in lru and "c" in lru and "b" not in lru
    lru = LRU(maxsize=10, max_bytes=1000)
    for key in "abc":
        lru.put(key, torch.zeros(50))  # 200 bytes each
    lru.put("big", torch.zeros(150))  # 600 more: the oldest entry goes
    assert "a" not in lru and {"b", "c", "big"} <= set(lru._data) and lru.bytes == 1000
    lru.put("huge", torch.zeros(1000))  # larger than the budget: not stored, nothing evicted
    assert "huge" not in lru and len(lru) == 3


def test_bf16_only_where_rankings_hold_and_recorded(toy_classifier):
    """bf16 autocast is offered only by measures within the ranking tolerance, and recorded in the options."""
    batch = toy_classifier.batch(TEXTS)
    with pytest.raises(ValueError, match="does not offer bf16"):
        get_explainer("loo-sign", toy_classifier, bf16=True)
    fast = get_explainer("ig-sign", toy_classifier, bf16=True, steps=8).attribute(batch, 1)
    slow = get_explainer("ig-sign", toy_classifier, steps=8).attribute(batch, 1)
    assert fast.options["bf16"] is True and "bf16" not in slow.options
    for b in range(len(batch)):
        # the bf16 top token is a float32 top token up to bf16's resolution (2^-8 relative): "good" and "fun" of
        # TEXTS[0] tie to 2e-5 in float32, so which one bf16 puts first is rounding, not a ranking change
        exact = slow.token_scores(b)
        assert float(exact[int(fast.token_scores(b).argmax())]) >= float(exact.max()) - 2 ** -8 * float(exact.abs().max())


# -- bad input ---------------------------------------------------------------------------------------
def test_unknown_measure_lists_the_known_ones(toy_classifier):
    with pytest.raises(ValueError, match="unknown importance measure 'saliency'.*grad-l2.*loo-sign"):
        get_explainer("saliency", toy_classifier)


def test_bad_options_are_refused_with_the_accepted_ones(toy_classifier):
    with pytest.raises(ValueError, match="no option 'step'.*steps"):
        get_explainer("ig-sign", toy_classifier, step=5)
    with pytest.raises(ValueError, match="baseline.*zero, mask, pad"):
        get_explainer("ig-sign", toy_classifier, baseline="blur")
    with pytest.raises(ValueError, match="beam_size"):
        get_explainer("beam", toy_classifier, beam_size=0)
    assert get_explainer("ig-sign", toy_classifier, steps="50").options["steps"] == 50  # command-line strings


def test_target_out_of_range_is_refused(toy_classifier):
    batch = toy_classifier.batch(TEXTS)
    with pytest.raises(ValueError, match="out of range"):
        get_explainer("loo-sign", toy_classifier).attribute(batch, target=2)
    with pytest.raises(ValueError, match="out of range"):
        get_explainer("random", toy_classifier).attribute(batch, target=[0, -1])
    with pytest.raises(ValueError, match="2 inputs but 3 targets"):
        get_explainer("grad-l2", toy_classifier).attribute(batch, target=[0, 1, 1])


def test_batch_without_maskable_token_is_refused(toy_classifier):
    batch = toy_classifier.batch(TEXTS)
    empty = replace(batch, maskable=torch.zeros_like(batch.maskable))
    with pytest.raises(NoMaskableTokenError, match="no maskable token"):
        get_explainer("ig-sign", toy_classifier).attribute(empty)


def test_truncated_long_input_is_flagged_and_explained(toy_classifier):
    """An input longer than max_length is cut (flagged in batch.truncated) and every measure that does not sample
    and is not beam search still runs on it."""
    text = " ".join(["the movie was really good and fun"] * 10)
    batch = toy_classifier.batch([text])
    assert bool(batch.truncated[0]) and batch.input_ids.shape[1] == toy_classifier.max_length
    from engine.importance import applicable_measures

    quick = [n for n in applicable_measures(toy_classifier) if MEASURES[n].deterministic and not MEASURES[n].computed_once]
    assert len(quick) >= 10
    for name in quick:
        imp = get_explainer(name, toy_classifier).attribute(batch)
        assert imp.scores.shape == (1, toy_classifier.max_length)
        assert torch.isfinite(imp.scores).all()


# -- command line ------------------------------------------------------------------------------------
def test_explain_command_prints_a_token_table(toy_classifier, models_cache, capsys):
    """`explain` prints one row per maskable token and one column per measure (plain text when not a tty)."""
    from engine.cli import main
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-explain")
    assert main(["explain", "--model", "toy-explain", "--text", "the movie was good",
                 "--measure", "loo-sign", "ig-sign", "--option", "steps=10"]) == 0
    out = capsys.readouterr().out
    assert "loo-sign" in out and "ig-sign" in out and "good" in out and "\x1b[" not in out
    assert "completeness gap" in out
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    assert "grad-l2" in capsys.readouterr().out  # the help lists the measures


def test_gradient_shap_is_reproducible_with_the_same_seed(toy_classifier):
    """gradient-shap draws its path points with NumPy's global generator (inside captum): two calls with the
    same seed give identical attributions, whatever NumPy's global state, and the caller's NumPy state is
    left as it was."""
    import numpy as np

    batch = toy_classifier.batch(TEXTS)
    runs, states = [], []
    for _ in range(2):
        explainer = get_explainer("gradient-shap", toy_classifier, memo=False, n_samples=4, seed=3)
        before = np.random.get_state()
        runs.append(explainer.attribute(batch, 1).scores)
        states.append((before, np.random.get_state()))
        np.random.random(7)  # a caller drawing between two explanations
    assert torch.equal(runs[0], runs[1]), float((runs[0] - runs[1]).abs().max())
    for before, after in states:
        assert after[0] == before[0] and np.array_equal(after[1], before[1]) and after[2:] == before[2:]
    other = get_explainer("gradient-shap", toy_classifier, memo=False, n_samples=4, seed=4).attribute(batch, 1).scores
    assert not torch.equal(runs[0], other)


def test_weighted_ridge_solves_on_the_cpu_in_float64_and_answers_on_the_input_device():
    """LIME/KernelSHAP's surrogate: the weighted regression is solved in float64 on the CPU (CUDA has no
    'gelsd' lstsq driver, and a CPU identity added to a CUDA Gram matrix fails), the coefficients come back
    on the input's device in its dtype, and they equal the closed-form weighted least-squares/ridge ones."""
    from engine.importance.captum_extras import WeightedRidge

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(50, 6, generator=g) > 0.5).float()
    y = torch.randn(50, 1, generator=g)
    w = torch.rand(50, generator=g)
    for alpha in (0.0, 1.0):
        ridge = WeightedRidge(alpha)
        ridge.fit([(x, y, w)])
        # reference: the normal equations with an unpenalised intercept, in float64
        X = torch.cat([x.double(), torch.ones(50, 1, dtype=torch.float64)], 1)
        penalty = torch.diag(torch.tensor([alpha] * 6 + [0.0], dtype=torch.float64))
        W = torch.diag(w.double())
        beta = torch.linalg.solve(X.T @ W @ X + penalty, X.T @ W @ y.double())
        assert ridge.coef.dtype == x.dtype and ridge.coef.device == x.device
        torch.testing.assert_close(ridge.coef.double(), beta[:6].T, atol=1e-6, rtol=0)
        torch.testing.assert_close(ridge.intercept.double(), beta[6], atol=1e-6, rtol=0)



def test_weighted_ridge_fit_does_not_depend_on_the_input_device(monkeypatch):
    """With CUDA inputs (fake tensors: devices without data, so this runs on a CPU-only machine) every
    linear-algebra call of the fit gets float64 CPU tensors, and the coefficients come back on the
    input's device and in its dtype."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from engine.importance.captum_extras import WeightedRidge

    seen = []
    real_solve = torch.linalg.solve

    def solve(a, b):
        seen.append(("solve", a.device.type, a.dtype, b.device.type, b.dtype))
        return real_solve(a, b)

    def lstsq(a, b, driver=None):
        # lstsq has no fake-tensor kernel (its rank output has a data-dependent shape): answer with the
        # solution's shape
        seen.append(("lstsq", a.device.type, a.dtype, b.device.type, b.dtype))
        return SimpleNamespace(solution=torch.zeros(a.shape[1], b.shape[1], dtype=a.dtype, device=a.device))

    monkeypatch.setattr(torch.linalg, "solve", solve)
    monkeypatch.setattr(torch.linalg, "lstsq", lstsq)
    with FakeTensorMode():
        # two batches, as captum's DataLoader may give (fake CUDA tensors cannot be sliced without CUDA)
        data = [(torch.rand(n, 5, device="cuda"), torch.rand(n, 2, device="cuda"), torch.rand(n, device="cuda"))
                for n in (25, 15)]
        x = data[0][0]
        for alpha in (0.0, 1.0):
            ridge = WeightedRidge(alpha)
            ridge.fit(data)
            assert ridge.coef.device == x.device and ridge.coef.dtype == x.dtype and ridge.coef.shape == (2, 5)
            assert ridge.intercept.device == x.device and ridge.intercept.shape == (2,)
            assert ridge(x).device == x.device
    assert {s[0] for s in seen} == {"solve", "lstsq"}
    assert all(s[1:] == ("cpu", torch.float64, "cpu", torch.float64) for s in seen), seen
