"""A unit-level ground truth: hand-built models whose reasons are exact, and each measure of the
registry checked against what theory says it must give on them, hit or miss.

The models are in tests/handbuilt_models.py (logit_0 = 0, logit_1 a closed form of the word embeddings; [MASK] has
the zero embedding, so masking removes a word exactly and IG's zero baseline is the [MASK] baseline). Every test
explains class 1 (the logit the head builds), states its expected values as derived in its docstring, and asserts
them: equalities where the theory gives an exact number, rankings or signs where it gives only those. A measure
that *misses* the truth is asserted to miss it as theory says, so an accidental "fix" that hides the mechanism (or a
regression that changes a measure's definition) fails here.

Notation: k = 3 (the planted effect, logits), n_A / n_B the counts of the planted words "trig" / "pair", phi the
exact Shapley value (removal = [MASK], brute force over all coalitions in `exact_shapley`).
"""
from __future__ import annotations

import pytest
import torch
from handbuilt_models import batch_of, exact_shapley, handbuilt

from engine.importance import builtin_measures, get_explainer

pytestmark = [pytest.mark.device, pytest.mark.usefixtures("one_thread")]  # device: a lent GPU runs it (-m device)
K = 3.0
EXACT = dict(atol=1e-5, rtol=0)  # float32 scores of float64 models


def scores(classifier, measure: str, text: str, **options) -> torch.Tensor:
    """The measure's scores [N] (float64) on the words of `text`, explaining class 1."""
    imp = get_explainer(measure, classifier, **options).attribute(batch_of([text]), 1)
    return imp.token_scores(0).to(torch.float64)


def t(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def top(s: torch.Tensor, n: int) -> set[int]:
    """The positions (among the words) of the n highest scores."""
    return set(torch.argsort(s, descending=True)[:n].tolist())


# -- linear bag of words -------------------------------------------------------------------------------------------
LINEAR_TEXT = "good the bad fine"  # weights +1, 0, -2, +0.5: logit_1 = -0.5


@pytest.fixture(scope="module")
def linear():
    return handbuilt("linear")


def test_linear_model_every_additive_measure_returns_the_weights(linear):
    """On logit_1 = sum_t w_t the game is additive, so phi_t = w_t (1, 0, -2, 0.5) exactly, and:
    LOO_t = f(x) - f(x without t) = w_t; occlusion with 1-token windows is LOO; the gradient w.r.t. e_t is 1 on the
    VALUE feature, so x-grad_t = e_t . g_t = w_t; IG integrates a constant gradient: w_t for any number of steps;
    DeepLift has no nonlinearity to rescale: (e_t - 0) . g_t = w_t; GradientSHAP averages the same constant
    gradient at random path points: w_t; Shapley sampling is exact on an additive game for any permutation;
    KernelSHAP's weighted regression fits a linear game exactly. The |.| variants give |w_t|."""
    w = t(1.0, 0.0, -2.0, 0.5)
    torch.testing.assert_close(exact_shapley(linear, LINEAR_TEXT), w, **EXACT)
    for measure, options in [("loo-sign", {}), ("occlusion", {"window": 1}), ("x-grad-sign", {}), ("ig-sign", {"steps": 3}),
                             ("deeplift", {}), ("gradient-shap", {}), ("shapley-sampling", {"n_samples": 2}),
                             ("kernel-shap", {"n_samples": 60})]:
        torch.testing.assert_close(scores(linear, measure, LINEAR_TEXT, **options), w, **EXACT, msg=measure)
    for measure in ("loo-abs", "x-grad-abs", "ig-abs"):
        torch.testing.assert_close(scores(linear, measure, LINEAR_TEXT), w.abs(), **EXACT, msg=measure)


def test_linear_model_lime_keeps_the_ranking_but_shrinks_the_weights(linear):
    """LIME fits a ridge regression (penalty alpha = 1) on random coalitions: its coefficients are the weights shrunk
    towards 0, so the ranking good > fine > the > bad is kept and each |score| is at most |w_t| (plus sampling
    noise); with alpha = 0 and many samples it would be the weights."""
    s = scores(linear, "lime", LINEAR_TEXT)
    assert torch.argsort(s, descending=True).tolist() == [0, 3, 1, 2]
    assert (s.abs() <= t(1.0, 0.0, 2.0, 0.5) + 0.02).all(), s
    assert (s - t(1.0, 0.0, -2.0, 0.5)).abs().max() < 0.1, s


def test_linear_model_gradient_norms_cannot_rank_a_sum_pooled_model(linear):
    """The logit sums the embeddings over positions, so g_t = d logit / d e_t is the same vector at every position
    and ||g_t E^T|| (grad-l1, grad-l2) is the same number for every token: these measures cannot tell the strongest
    word from a filler on a bag-of-words model (a miss by construction, not by noise)."""
    for measure in ("grad-l1", "grad-l2"):
        s = scores(linear, measure, LINEAR_TEXT)
        assert torch.allclose(s, s[0].expand_as(s)), (measure, s)
        assert s[0] > 0


def test_linear_model_occlusion_windows_mix_neighbours(linear):
    """captum's occlusion with 3-token windows scores a token by the mean drop of the windows that cover it, and a
    window drops the sum of the weights it covers. Positions 0..5 = [CLS] good the bad fine [SEP]; windows start
    at 0..3 and drop 1 (good, the), -1 (good, the, bad), -1.5 (the, bad, fine), -1.5 (bad, fine). So good = 0,
    the = -1/2, bad = -4/3, fine = -3/2: 'fine' (w = +0.5, supports class 1) gets the lowest score because its
    windows hold 'bad'. The sign of a word can be its neighbour's."""
    torch.testing.assert_close(scores(linear, "occlusion", LINEAR_TEXT), t(0.0, -0.5, -4 / 3, -1.5), **EXACT)


def test_linear_model_searches_mask_the_largest_weights_first(linear):
    """For a sum of weights under a monotone link, masking the k largest weights lowers p_1 the most for every k at
    once, so the weight order (good, fine, the, bad) is AOPC-optimal and greedy removal finds it: beam, greedy-loo,
    beam-budget and anytime-aopc (exact by dynamic programming on <= 10 tokens) all give it as N..1."""
    for measure in ("beam", "greedy-loo", "beam-budget", "anytime-aopc"):
        torch.testing.assert_close(scores(linear, measure, LINEAR_TEXT), t(4, 2, 1, 3), **EXACT, msg=measure)


def test_random_ignores_the_model(linear):
    """random draws from a generator seeded by the token ids alone: two different models get the same scores on the
    same input, so its ranking carries no information about either (the floor every measure must beat)."""
    other = handbuilt("or")
    torch.testing.assert_close(scores(linear, "random", LINEAR_TEXT), scores(other, "random", LINEAR_TEXT), **EXACT)


def test_linear_model_a_decoy_word_gets_nothing_from_any_attribution(linear):
    """'loud' has a nonzero embedding (SALIENT = 2) in a feature the linear head never reads: a decoy the model
    ignores. Its logit effect is 0 however it is removed, so LOO, IG, DeepLift, x-grad (e . g with g = (1, 0, 0, 0,
    0)), GradientSHAP and the Shapley estimates all give it exactly 0, while 'good' keeps its weight 1. The gradient
    norms, which do not look at the input, give it the same score as every other word."""
    text = "loud good the"
    for measure in ("loo-sign", "ig-sign", "deeplift", "x-grad-sign", "gradient-shap", "shapley-sampling", "kernel-shap"):
        torch.testing.assert_close(scores(linear, measure, text), t(0, 1, 0), **EXACT, msg=measure)
    s = scores(linear, "grad-l2", text)
    assert torch.allclose(s, s[0].expand_as(s))


# -- OR of two words, no residual effect ---------------------------------------------------------------------------
OR_NEAR = "trig pair the film"            # planted words adjacent: one 3-token window covers both
OR_FAR = "trig the film plot was pair"     # 4 words apart: no 3-token window covers both


@pytest.fixture(scope="module")
def or_model():
    return handbuilt("or", k=K)


@pytest.mark.parametrize("text", [OR_NEAR, OR_FAR])
def test_or_single_removal_and_gradients_see_nothing(or_model, text):
    """logit_1 = k (1 - relu(1 - n_A - n_B)): with both words present n_A + n_B = 2, and removing either leaves 1,
    still saturated. So LOO = 0 for every word (the planted ones included), exactly; the gradient of the OR term is 0
    past the kink, so x-grad = 0 everywhere and the gradient norms are the same for every word (only VALUE's
    constant gradient is left). The exact Shapley values split the credit: phi = k/2 for each planted word
    (v(A) = v(B) = v(AB) = k), 0 for the fillers."""
    n = len(text.split())
    planted = [0, n - 1] if text == OR_FAR else [0, 1]
    phi = torch.zeros(n, dtype=torch.float64)
    phi[planted] = K / 2
    torch.testing.assert_close(exact_shapley(or_model, text), phi, **EXACT)
    for measure in ("loo-sign", "loo-abs", "x-grad-sign", "x-grad-abs"):
        torch.testing.assert_close(scores(or_model, measure, text), torch.zeros(n, dtype=torch.float64), **EXACT, msg=measure)
    for measure in ("grad-l1", "grad-l2"):
        s = scores(or_model, measure, text)
        assert torch.allclose(s, s[0].expand_as(s)), (measure, s)


@pytest.mark.parametrize("text", [OR_NEAR, OR_FAR])
def test_or_path_methods_split_the_credit_like_shapley(or_model, text):
    """Along IG's straight path from the zero ([MASK]) baseline, n_A + n_B = 2 alpha: the OR term grows with slope 1
    in each word for alpha < 1/2 and is flat after, so IG = k/2 per planted word (the midpoint rule with an even
    number of steps puts exactly half its nodes below 1/2: exact), 0 for the fillers = phi. DeepLift's rescale rule
    on the ReLU: (out(x) - out(b)) / (in(x) - in(b)) = (0 - 1) / (-1 - 1) = 1/2 multiplies each planted word's
    unit difference: k/2 each. GradientSHAP samples alpha at random: both planted words see the same path point,
    so they get equal credit (k times the share of draws below 1/2)."""
    n = len(text.split())
    planted = [0, n - 1] if text == OR_FAR else [0, 1]
    phi = exact_shapley(or_model, text)
    torch.testing.assert_close(scores(or_model, "ig-sign", text, steps=20), phi, **EXACT)
    torch.testing.assert_close(scores(or_model, "deeplift", text), phi, **EXACT)
    gs = scores(or_model, "gradient-shap", text)
    assert gs[planted[0]] == pytest.approx(float(gs[planted[1]]), abs=1e-6) and gs[planted[0]] > 0
    assert gs.abs().sum() - gs[planted].abs().sum() == pytest.approx(0.0, abs=1e-6)


def test_or_sampling_measures_approach_the_split(or_model):
    """Shapley value sampling: in each permutation the planted word that comes first gets the whole k, the other 0,
    the fillers 0; so the two estimates sum to k exactly and each is k x (share of permutations in which it comes
    first), within 4 binomial standard errors of k/2 (k sqrt(1/4/200) ~ 0.11 at 200 permutations). KernelSHAP and
    LIME fit surrogates on sampled coalitions: approximate, so only the top two and the sign are asserted, and
    KernelSHAP within 0.5 of k/2."""
    s = scores(or_model, "shapley-sampling", OR_NEAR, n_samples=200)
    assert float(s[0] + s[1]) == pytest.approx(K, abs=1e-5)
    assert s[2:].abs().max() < 1e-6
    assert abs(float(s[0]) - K / 2) < 4 * K * (0.25 / 200) ** 0.5
    for measure in ("kernel-shap", "lime"):
        s = scores(or_model, measure, OR_NEAR)
        assert top(s, 2) == {0, 1} and (s[:2] > 0).all(), (measure, s)
    ks = scores(or_model, "kernel-shap", OR_NEAR)
    assert (ks[:2] - K / 2).abs().max() < 0.5, ks


def test_or_occlusion_sees_the_pair_only_when_one_window_covers_both(or_model):
    """A 3-token window drops the OR term only when it covers both planted words. Adjacent ([CLS] trig pair the film
    [SEP]): windows 0-2 and 1-3 cover both (drop k), 2-4 and 3-5 cover one (drop 0), so trig = (k + k) / 2 = k,
    pair = (k + k + 0) / 3 = 2k/3, the = k/3, film = 0: the pair comes first. Four words apart: no window covers
    both, every drop is 0: occlusion scores every word 0, the planted ones included."""
    torch.testing.assert_close(scores(or_model, "occlusion", OR_NEAR), t(K, 2 * K / 3, K / 3, 0.0), **EXACT)
    torch.testing.assert_close(scores(or_model, "occlusion", OR_FAR), torch.zeros(6, dtype=torch.float64), **EXACT)


def test_or_searches_over_sets_find_the_pair_but_greedy_removal_can_miss_it(or_model):
    """Masking sets, not single tokens: masking both planted words drops k, masking either alone drops nothing.
    beam (width 10 >= the N = 4 single-token sets it keeps) scores every pair at its second step and puts the
    planted pair first; anytime-aopc (exact AOPC optimum on <= 10 tokens) must mask both first as well (any other
    start adds zero drops to the curve). Greedy removal sees at its first step only LOO, 0 for every word: a
    tie, broken by text order, so on 'the film trig pair' it masks the two fillers first and ranks the planted
    words last (a miss that depends only on where the words stand)."""
    text = "the film trig pair"
    for measure in ("beam", "anytime-aopc"):
        assert top(scores(or_model, measure, text), 2) == {2, 3}, measure
    torch.testing.assert_close(scores(or_model, "greedy-loo", text), t(4, 3, 2, 1), **EXACT)


# -- AND of two words ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def and_model():
    return handbuilt("and", k=K)


def test_and_single_removal_double_counts_and_path_methods_split(and_model):
    """logit_1 = k relu(n_A + n_B - 1): both words present give k, either alone 0. So LOO = k for each planted word
    (each is necessary): their sum 2k is twice the effect k; x-grad = k each as well (the ReLU is active at
    n_A + n_B = 2, slope 1 in each). phi = k/2 each (v(A) = v(B) = 0, v(AB) = k), and IG (active for alpha > 1/2:
    half the midpoint nodes) and DeepLift (rescale (k - 0) / (1 - (-1)) = k/2 per unit) give exactly phi.
    GradientSHAP gives both the same credit. Occlusion's windows drop k whenever they cover either word: the
    planted words share the top."""
    text = "trig pair the film"
    phi = t(K / 2, K / 2, 0, 0)
    torch.testing.assert_close(exact_shapley(and_model, text), phi, **EXACT)
    for measure in ("loo-sign", "x-grad-sign"):
        torch.testing.assert_close(scores(and_model, measure, text), t(K, K, 0, 0), **EXACT, msg=measure)
    for measure in ("ig-sign", "deeplift"):
        torch.testing.assert_close(scores(and_model, measure, text), phi, **EXACT, msg=measure)
    gs = scores(and_model, "gradient-shap", text)
    assert gs[0] == pytest.approx(float(gs[1]), abs=1e-6) and gs[0] > 0 and gs[2:].abs().max() < 1e-6
    occ = scores(and_model, "occlusion", text)
    assert occ[0] == pytest.approx(K) and occ[1] == pytest.approx(K) and occ[2:].max() < K


def test_and_aopc_optimum_needs_only_one_of_the_pair(and_model):
    """Masking either planted word removes the whole effect; the second then changes nothing. So every order that
    masks one planted word first is AOPC-optimal, and the exact optimum (anytime-aopc) puts one planted word
    first, whatever it does with the other: an AOPC-optimal explanation need not name both causes."""
    s = scores(and_model, "anytime-aopc", "the trig film pair")
    assert int(torch.argmax(s)) in (1, 3)


# -- a gated word --------------------------------------------------------------------------------------------------
GATED_TEXT = "not trig the good"  # 'trig' right after 'not': gated off; logit_1 = 1 (good)


@pytest.fixture(scope="module")
def gated():
    return handbuilt("gated", k=K)


def test_gated_word_single_removal_blames_the_gate_and_misses_the_word(gated):
    """logit_1 = w_good + k A_trig (1 - NOT_before_trig). With 'not' before 'trig' the planted term is 0: removing
    'trig' changes nothing (LOO 0, as a filler's), removing 'not' frees it (LOO = -k). x-grad: d/dA = k (1 - 1) = 0
    and d/dNOT = -k A = -k, the same as LOO here. The Shapley game of {not, trig} is v(trig) = k, v(not) = v(both)
    = v({}) = 0: phi_trig = k/2, phi_not = -k/2: the word and its gate share the credit with opposite signs, which
    single removal cannot show (it gives the word nothing)."""
    torch.testing.assert_close(exact_shapley(gated, GATED_TEXT), t(-K / 2, K / 2, 0, 1), **EXACT)
    for measure in ("loo-sign", "x-grad-sign"):
        torch.testing.assert_close(scores(gated, measure, GATED_TEXT), t(-K, 0, 0, 1), **EXACT, msg=measure)


def test_gated_word_ig_equals_shapley_on_a_multilinear_model(gated):
    """The gated logit is multilinear in the word indicators (a product A (1 - NOT) plus a sum), and on the diagonal
    path from the zero baseline IG is Owen's formula for the Shapley value of a multilinear game: IG = phi exactly
    (the integrand is linear in alpha, so the midpoint rule is exact with any number of steps). DeepLift in captum
    has no rule for a product, so it falls back to gradient x (input - baseline): -k for 'not' and 0 for 'trig',
    like x-grad. GradientSHAP at path point alpha gives trig k (1 - alpha) and not -k alpha: their difference is
    k for every draw, whatever the draws are."""
    phi = exact_shapley(gated, GATED_TEXT)
    torch.testing.assert_close(scores(gated, "ig-sign", GATED_TEXT, steps=3), phi, **EXACT)
    torch.testing.assert_close(scores(gated, "deeplift", GATED_TEXT), t(-K, 0, 0, 1), **EXACT)
    gs = scores(gated, "gradient-shap", GATED_TEXT)
    assert float(gs[1] - gs[0]) == pytest.approx(K, abs=1e-5) and gs[3] == pytest.approx(1.0, abs=1e-6)


def test_gated_word_sampling_measures_give_word_and_gate_opposite_signs(gated):
    """Shapley sampling: in a permutation where 'trig' comes before 'not' it gets +k and 'not' -k; otherwise both 0;
    so trig = -not exactly, both at most k in size, and 'good' gets its weight 1 in every permutation. KernelSHAP
    and LIME (surrogates on sampled coalitions) give 'trig' a positive and 'not' a negative score. Occlusion's
    3-token windows never remove 'trig' without 'not' before position 3: trig gets 1/3 (one window also removes
    'good'), below the filler 'the' (2/3)."""
    s = scores(gated, "shapley-sampling", GATED_TEXT, n_samples=50)
    assert float(s[1]) == pytest.approx(-float(s[0]), abs=1e-5) and 0 < s[1] <= K
    assert float(s[3]) == pytest.approx(1.0, abs=1e-6)
    for measure in ("kernel-shap", "lime"):
        s = scores(gated, measure, GATED_TEXT)
        assert s[1] > 0 > s[0], (measure, s)
    torch.testing.assert_close(scores(gated, "occlusion", GATED_TEXT), t(0, 1 / 3, 2 / 3, 1), **EXACT)


# -- a response past its peak: gradient x input against the class -------------------------------------------------
@pytest.fixture(scope="module")
def peak():
    return handbuilt("peak", k=K, embedding_scale={"trig": 1.5})


def test_signed_gradient_times_input_can_point_against_the_class(peak):
    """logit_1 = k n_A (2 - n_A) with 'trig' embedded at A = 1.5: the word raises the logit from 0 to
    k 1.5 0.5 = 2.25 (LOO = phi = 2.25, and IG's completeness gives 2.25 for the only word that moves). But the
    response peaks at n_A = 1, so the gradient at the input is k (2 - 2 x 1.5) = -3 and x-grad-sign = 1.5 x (-3) =
    -4.5: it says the word speaks against class 1, which it supports. x-grad-abs still ranks it first (4.5).
    captum's DeepLift has no rule for the product: it equals x-grad here. GradientSHAP's expected gradient over
    alpha ~ U(0, 1) is k (2 - 1.5) x 1.5 = 2.25 (within sampling error at 500 draws)."""
    text = "trig the film"
    for measure in ("loo-sign", "ig-sign"):
        torch.testing.assert_close(scores(peak, measure, text), t(2.25, 0, 0), **EXACT, msg=measure)
    torch.testing.assert_close(exact_shapley(peak, text), t(2.25, 0, 0), **EXACT)
    torch.testing.assert_close(scores(peak, "x-grad-sign", text), t(-4.5, 0, 0), **EXACT)
    torch.testing.assert_close(scores(peak, "deeplift", text), t(-4.5, 0, 0), **EXACT)
    assert int(torch.argmax(scores(peak, "x-grad-abs", text))) == 0
    assert abs(float(scores(peak, "gradient-shap", text, n_samples=500)[0]) - 2.25) < 0.4


# -- attention on a distractor -------------------------------------------------------------------------------------
ATTENTION_TEXT = "the hit loud film"


@pytest.fixture(scope="module")
def attention():
    return handbuilt("attention", k=K)


def test_attention_points_at_a_word_that_works_against_the_class(attention):
    """One attention layer: a = softmax over the 6 real tokens of SALIENT (2 for 'loud', 0 elsewhere), logit_1 =
    k sum_t a_t VALUE_t, VALUE 1 only for 'hit'. So a_loud = e^2 / (5 + e^2) ~ 0.60 is the largest weight and every
    attention measure ranks 'loud' first. But 'loud' carries no value: it only draws attention away from 'hit'.
    Removing it (SALIENT 0) gives a_hit = 1/6: LOO_loud = k / (5 + e^2) - k / 6 < 0 and phi_loud < 0, while 'hit'
    has the only positive Shapley value. Every perturbation measure ranks 'hit' first and gives 'loud' a negative
    score; attention weight is where the model looks, not what moves its output."""
    import math

    z = 5 + math.e ** 2
    torch.testing.assert_close(scores(attention, "loo-sign", ATTENTION_TEXT), t(0, K / z, K / z - K / 6, 0), **EXACT)
    phi = exact_shapley(attention, ATTENTION_TEXT)
    assert phi[2] < 0 < phi[1] and int(torch.argmax(phi)) == 1
    for measure in ("attention-cls-last", "attention-mean", "attention-rollout"):
        assert int(torch.argmax(scores(attention, measure, ATTENTION_TEXT))) == 2, measure
    torch.testing.assert_close(scores(attention, "attention-cls-last", ATTENTION_TEXT),
                               t(1 / z, 1 / z, math.e ** 2 / z, 1 / z), **EXACT)
    for measure in ("loo-sign", "ig-sign", "shapley-sampling", "kernel-shap", "deeplift", "gradient-shap", "x-grad-sign"):
        s = scores(attention, measure, ATTENTION_TEXT)
        assert int(torch.argmax(s)) == 1 and s[2] < 0, (measure, s)


# -- noise tunnel, interactions --------------------------------------------------------------------------------------
def test_linear_model_noise_tunnel_measures_read_the_weights_and_the_noise(linear):
    """On logit_1 = sum_t VALUE_t the gradient is the constant (1, 0, 0, 0, 0), so input x gradient of a noisy copy is
    VALUE_t + eps_t on the VALUE feature and 0 elsewhere: without noise smoothgrad = w_t, squaregrad = w_t^2, vargrad
    = 0; with noise of standard deviation sigma (0.2 of the embedding range 3 here: 0.6) vargrad is the variance of
    eps, sigma^2 = 0.36, within the sampling error of 400 copies (about 7% of it; 30% allowed)."""
    w = t(1.0, 0.0, -2.0, 0.5)
    torch.testing.assert_close(scores(linear, "smoothgrad", LINEAR_TEXT, noise=0.0, n_samples=2), w, **EXACT)
    torch.testing.assert_close(scores(linear, "squaregrad", LINEAR_TEXT, noise=0.0, n_samples=2), w ** 2, **EXACT)
    torch.testing.assert_close(scores(linear, "vargrad", LINEAR_TEXT, noise=0.0, n_samples=2), t(0, 0, 0, 0), **EXACT)
    var = scores(linear, "vargrad", LINEAR_TEXT, noise=0.2, n_samples=400, batch_samples=100)
    assert ((var - 0.36).abs() < 0.3 * 0.36).all(), var


@pytest.mark.parametrize(("head", "sign"), [("and", 1.0), ("or", -1.0)])
def test_interactions_find_the_planted_pair_with_its_sign(head, sign):
    """AND: v(S) = k only when both planted words are in S; the pair's Shapley interaction is
    v(AB) - v(A) - v(B) + v() = +k for every coalition of the fillers, so +k, and each word's first-order k-SII value 0
    (all of its Shapley value k/2 sits in the pair). OR: v = k when either is present: k - k - k + 0 = -k, first-order
    values k each (k - k/2 = k/2 each, their Shapley values). Exact here (budget 2^5 >= every coalition); the
    fillers' pairs are 0."""
    clf = handbuilt(head)
    text = "the trig film pair plot"
    imp = get_explainer("shapley-interactions", clf, level="token", budget=64).attribute(batch_of([text]), 1)
    pairs = imp.extras["interactions"][0]
    assert pairs.exact and pairs.top(1)[0][:2] == (1, 3)
    assert pairs.value(1, 3) == pytest.approx(sign * K, abs=1e-5)
    first = imp.token_scores(0).to(torch.float64)
    expected = t(0, 0, 0, 0, 0) if head == "and" else t(0, K, 0, K, 0)
    torch.testing.assert_close(first, expected, **EXACT)
    assert all(abs(v) < 1e-5 for i, j, v in pairs.pairs if (i, j) != (1, 3))


# -- every measure is covered --------------------------------------------------------------------------------------
#: measures these hand-built models cannot run, with the reason (each raises or is declared unavailable)
NOT_HERE = {
    "attention": "the BiLSTM-attention model's own additive attention: exact by definition (R-ROAR App. C.1)",
    "self-attribution": "prompted language models only (the model names its own words)",
    "attnlrp": "prompted Llama/Gemma 3/Qwen LMs only; checked against an explicit rule-by-rule LRP in test_attnlrp.py",
    "smat": "needs head weights SMaT learned for a BERT-like model",
    "value-zeroing": "needs the value projections of an encoder's attention layers: checked on a hand-built attention "
                     "model and against a forward that zeroes them by hand in test_noise_tunnel_value_zeroing.py",
    "value-zeroing-sign": "as value-zeroing",
}


def test_every_registered_measure_is_checked_here_or_excused():
    """A measure added to the registry must get a hand-derived check in this file, or a reason it cannot run on a
    hand-built model: the names this file's tests call, plus NOT_HERE, cover `builtin_measures()`."""
    import pathlib
    import re

    source = pathlib.Path(__file__).read_text()
    called = set(re.findall(r'"([a-z0-9-]+)"', source))
    missing = [m for m in builtin_measures() if m not in called and m not in NOT_HERE]
    assert not missing, f"measures with no hand-derived check: {missing}"
