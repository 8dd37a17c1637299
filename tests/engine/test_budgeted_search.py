"""Faithfulness-optimised explanations under a budget (engine/importance/aopc_search.py, the measures in
budgeted_search.py): exact optima by enumerating every masking order, beam at unbounded width equal to them, the anytime search never below its
starting ranking and within its budget, forward passes counted, progress and cancellation."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from engine.data import get_dataset
from engine.errors import ExplanationCancelled, InvalidInputError
from engine.importance import get_explainer
from engine.importance.aopc_search import (
    SetScores,
    beam_search,
    curve_weights,
    exact_bounds,
    local_search,
    loo_order,
    order_value,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (tests/conftest.py)


# -- brute force, written independently of the module: every subset through the model, every order enumerated --


def _subset_probabilities(classifier, batch, row, target, score="probability"):
    """{frozenset of positions: s(x with them masked)} for every subset of the row's maskable tokens."""
    pos = batch.maskable[row].nonzero().flatten().tolist()
    out = {}
    for r in range(len(pos) + 1):
        for subset in itertools.combinations(pos, r):
            ids = batch.input_ids[row].clone()
            ids[list(subset)] = classifier.mask_token_id
            one = type(batch)(input_ids=ids[None], attention_mask=batch.attention_mask[row][None],
                              token_type_ids=batch.token_type_ids[row][None], segments=batch.segments[row][None],
                              maskable=batch.maskable[row][None], target=None, truncated=batch.truncated[row][None],
                              offsets=[batch.offsets[row]])
            with torch.no_grad():
                logits = classifier.logits(one).double()[0]
            out[frozenset(subset)] = float(logits[target] if score == "logit" else torch.softmax(logits, -1)[target])
    return pos, out


def _j(order, table, weights):
    """J(order) = sum_k w_k [s(x) - s(x with the first k of `order` masked)]."""
    s0 = table[frozenset()]
    return sum(weights[k] * (s0 - table[frozenset(order[:k])]) for k in range(1, len(order) + 1))


def _enumerate(pos, table, weights):
    values = {order: _j(order, table, weights) for order in itertools.permutations(pos)}
    return max(values.values()), min(values.values()), values


def _order_of(importance, row):
    """Positions of a rank-valued explanation (N = masked first) from first to last."""
    s = importance.scores[row]
    pos = importance.maskable[row].nonzero().flatten().tolist()
    return tuple(sorted(pos, key=lambda p: -float(s[p])))


@pytest.fixture(scope="module")
def short_inputs(toy_classifier):
    """Three toy test inputs of 4-6 maskable tokens (at most 720 orders each: enumerable)."""
    rows = [e for e in get_dataset("toy").split("test") if 4 <= len(toy_classifier.batch_of([e]).maskable[0].nonzero()) <= 6][:3]
    batch = toy_classifier.batch_of(rows)
    target = toy_classifier.targets_for(batch)
    tables = [_subset_probabilities(toy_classifier, batch, i, int(target[i])) for i in range(len(rows))]
    return batch, target, tables


# -- the search algorithms on arbitrary set functions ------------------------------------------------------------


@pytest.mark.parametrize("curve", ["full", "eraser"])
def test_dynamic_programme_and_unbounded_beam_equal_enumeration_on_random_set_functions(curve):
    """On random (non-additive) set functions of n <= 6 tokens, the DP bounds and the unbounded beam (both
    directions) equal the max and min of J over all n! orders, and the returned orders attain them."""
    rng = np.random.default_rng(1)
    for n in range(1, 7):
        table = rng.normal(size=2 ** n)

        def evaluate(masks):
            return [table[m] for m in masks]

        w = curve_weights(n, curve)
        s = SetScores(n, evaluate)
        hi, hi_order, lo, lo_order = exact_bounds(s, w)
        values = [order_value(s, p, w) for p in itertools.permutations(range(n))]
        assert hi == pytest.approx(max(values), abs=1e-12) and lo == pytest.approx(min(values), abs=1e-12)
        assert order_value(s, hi_order, w) == pytest.approx(hi, abs=1e-12)
        assert order_value(s, lo_order, w) == pytest.approx(lo, abs=1e-12)
        assert s.spent == 1 + sum(1 for m in range(1, 2 ** n) if w[bin(m).count("1")]), "one forward per weighted subset"
        up = beam_search(SetScores(n, evaluate), w, None, sign=1.0)
        down = beam_search(SetScores(n, evaluate), w, None, sign=-1.0)
        assert up.value == pytest.approx(hi, abs=1e-12) and down.value == pytest.approx(lo, abs=1e-12)


def test_local_search_never_falls_below_its_start_and_never_exceeds_its_budget():
    """For every budget from the minimum up, the swap search spends at most the budget and ends with J at least
    that of its starting (LOO) order; with no budget it reaches a local optimum no neighbour swap improves."""
    rng = np.random.default_rng(2)
    n = 6
    table = rng.normal(size=2 ** n)
    w = curve_weights(n, "full")
    for budget in range(n + 1, 60):
        s = SetScores(n, lambda masks: [table[m] for m in masks], budget=budget)
        s.fetch([1 << t for t in range(n)])
        start = loo_order(s)
        result = local_search(s, w, start)
        assert s.spent <= budget
        if not np.isnan(result.value):
            assert result.value >= result.start_value - 1e-12
            assert result.start_value == pytest.approx(order_value(s, start, w))
    s = SetScores(n, lambda masks: [table[m] for m in masks])
    s.fetch([1 << t for t in range(n)])
    result = local_search(s, w, loo_order(s))
    assert result.complete
    for i in range(n - 1):
        swapped = list(result.order)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        s.fetch([sum(1 << t for t in swapped[:k]) for k in range(1, n + 1)])
        assert order_value(s, swapped, w) <= result.value + 1e-12


# -- the registered measures on the toy model --------------------------------------------------------------------


@pytest.mark.parametrize("curve", ["full", "eraser"])
def test_unbounded_beam_and_exact_anytime_find_the_enumerated_optimum(toy_classifier, short_inputs, curve):
    """On toy inputs of 4-6 tokens, beam-budget at unbounded width and anytime-aopc (exact when 2^N fits) return
    an order whose J equals the best of all N! orders, computed by brute force through the model."""
    batch, target, tables = short_inputs
    beam = get_explainer("beam-budget", toy_classifier, width=0, curve=curve, memo=False).attribute(batch, target)
    anytime = get_explainer("anytime-aopc", toy_classifier, curve=curve, memo=False).attribute(batch, target)
    for i, (pos, table) in enumerate(tables):
        w = curve_weights(len(pos), curve)
        best, _, values = _enumerate(pos, table, w)
        for imp in (beam, anytime):
            assert values[_order_of(imp, i)] == pytest.approx(best, abs=1e-6), imp.measure
            assert float(imp.extras["objective"][i]) == pytest.approx(best, abs=1e-6)
        assert int(beam.extras["forwards"][i]) == 2 ** len(pos), "unbounded beam scores every subset once (dedup)"


def test_greedy_loo_is_beam_of_width_one_and_costs_n_n_plus_one_over_two_plus_one(toy_classifier, short_inputs):
    """greedy-loo masks, at each step, the token whose removal lowers p_c most (checked by brute force), equals
    beam-budget at width 1, and spends exactly N(N+1)/2 + 1 forwards (the +1: the unmasked input)."""
    batch, target, tables = short_inputs
    greedy = get_explainer("greedy-loo", toy_classifier, memo=False).attribute(batch, target)
    beam1 = get_explainer("beam-budget", toy_classifier, width=1, memo=False).attribute(batch, target)
    for i, (pos, table) in enumerate(tables):
        n = len(pos)
        order = _order_of(greedy, i)
        assert order == _order_of(beam1, i)
        for k in range(n):
            done = frozenset(order[:k])
            drops = {p: table[done] - table[done | {p}] for p in pos if p not in done}
            assert drops[order[k]] == pytest.approx(max(drops.values()), abs=1e-6)
        assert int(greedy.extras["forwards"][i]) == n * (n + 1) // 2 + 1


def test_budget_is_respected_and_reported_and_too_small_a_budget_is_refused(toy_classifier, short_inputs):
    """Every measure spends at most `budget` forwards per input and says so; a budget below N + 1 is refused
    with the minimum named; the anytime search ends at or above its starting order's J: LOO's order (checked by
    brute force) or, by default (start auto), greedy-loo's order at the same budget where the budget pays for greedy
    (N(N+1)/2 + 1 passes) and LOO's order below that."""
    batch, target, tables = short_inputs
    for budget in (8, 12, 20, 30):
        greedy = get_explainer("greedy-loo", toy_classifier, budget=budget, memo=False).attribute(batch, target)
        for name, opts in (("greedy-loo", {}), ("beam-budget", {"width": 3}), ("anytime-aopc", {"exact_tokens": 0}),
                           ("anytime-aopc", {"exact_tokens": 0, "start": "loo-sign"})):
            imp = get_explainer(name, toy_classifier, budget=budget, memo=False, **opts).attribute(batch, target)
            assert (imp.extras["forwards"] <= budget).all(), name
            assert imp.options["budget"] == budget
            if name != "anytime-aopc":
                continue
            obj, start = imp.extras["objective"], imp.extras["start_objective"]
            ok = ~torch.isnan(obj)
            assert (obj[ok] >= start[ok] - 1e-12).all()
            for i, (pos, table) in enumerate(tables):
                w = curve_weights(len(pos), "full")
                n = len(pos)
                if opts.get("start") == "loo-sign" or budget < n * (n + 1) // 2 + 1:
                    first = tuple(sorted(pos, key=lambda p: -(table[frozenset()] - table[frozenset({p})])))
                    if ok[i]:
                        assert float(start[i]) == pytest.approx(_j(first, table, w), abs=1e-6)
                else:
                    first = _order_of(greedy, i)
                assert _j(_order_of(imp, i), table, w) >= _j(first, table, w) - 1e-9
    with pytest.raises(InvalidInputError, match="budget 3 is below"):
        get_explainer("greedy-loo", toy_classifier, budget=3, memo=False).attribute(batch, target)


def test_logit_objective_reproduces_the_fmm_beam(toy_classifier, short_inputs):
    """With score=logit and the full curve, J is the FMM beam's objective divided by N, so beam-budget gives the
    same order as the `beam` measure at the same width (both keep one order per masked set)."""
    batch, target, _ = short_inputs
    for width in (1, 3):
        ours = get_explainer("beam-budget", toy_classifier, width=width, score="logit", memo=False).attribute(batch, target)
        fmm = get_explainer("beam", toy_classifier, beam_size=width, memo=False).attribute(batch, target)
        assert torch.equal(ours.scores, fmm.scores)


def test_progress_streams_forward_passes_and_cancel_stops(toy_classifier, short_inputs):
    """progress(done, total) counts forward passes, never decreases and ends at total; should_stop cancels."""
    batch, target, _ = short_inputs
    seen = []
    get_explainer("anytime-aopc", toy_classifier, budget=15, exact_tokens=0, memo=False).attribute(
        batch, target, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1][0] == seen[-1][1] == 15 * len(batch)
    assert all(b[0] >= a[0] for a, b in zip(seen, seen[1:])) and all(d <= t for d, t in seen)
    with pytest.raises(ExplanationCancelled):
        get_explainer("greedy-loo", toy_classifier, memo=False).attribute(batch, target, should_stop=lambda: True)


def test_gradient_start_counts_its_passes(toy_classifier, short_inputs):
    """A gradient-started anytime search charges the gradient 2 passes (forward + backward) and stays in budget."""
    batch, target, _ = short_inputs
    imp = get_explainer("anytime-aopc", toy_classifier, start="x-grad-sign", exact_tokens=0, budget=10,
                        memo=False).attribute(batch, target)
    assert (imp.extras["forwards"] <= 10).all() and (imp.extras["forwards"] >= 3).all()
    with pytest.raises(InvalidInputError, match="start"):
        get_explainer("anytime-aopc", toy_classifier, start="ig-sign")


def test_a_spent_time_limit_still_returns_a_complete_order_and_is_not_memoised(toy_classifier, short_inputs):
    """With a time limit already spent, each search still runs its first (LOO) step and returns a full order:
    every maskable token ranked 1..N, LOO's N + 1 forwards spent; results under a time limit are not memoised."""
    batch, target, _ = short_inputs
    n = batch.maskable.sum(1)
    for name in ("greedy-loo", "beam-budget", "anytime-aopc"):
        explainer = get_explainer(name, toy_classifier, seconds=1e-9, exact_tokens=0) if name == "anytime-aopc" \
            else get_explainer(name, toy_classifier, seconds=1e-9)
        assert not explainer.deterministic
        imp = explainer.attribute(batch, target)
        for i in range(len(batch)):
            ranks = sorted(imp.scores[i][imp.maskable[i]].tolist())
            assert ranks == list(range(1, int(n[i]) + 1)), name
        assert (imp.extras["forwards"] == n + 1).all(), name


def test_budgeted_measures_plug_into_recursive_masking_and_the_erasure_metrics(toy_classifier, short_inputs):
    """The searches are ordinary measures: recursive masking computes them once (computed_once) and masks along
    their order, and the erasure metrics rank by them; anytime-aopc (eraser curve, exact on these short inputs)
    has an aopc-comprehensiveness at least LOO's."""
    from engine.faithfulness.erasure import erasure_metrics
    from engine.faithfulness.recursive import recursive_masking

    batch, target, _ = short_inputs
    explainer = get_explainer("anytime-aopc", toy_classifier, curve="eraser", memo=False)
    result = recursive_masking(toy_classifier, explainer, batch, target)
    assert result.measure == "anytime-aopc" and result.options["curve"] == "eraser"
    ours = erasure_metrics(toy_classifier, batch, explainer.attribute(batch, target).scores, target,
                           metrics=["comprehensiveness"]).values["aopc-comprehensiveness"]
    loo = erasure_metrics(toy_classifier, batch, get_explainer("loo-sign", toy_classifier).attribute(batch, target).scores,
                          target, metrics=["comprehensiveness"]).values["aopc-comprehensiveness"]
    assert (ours >= loo - 1e-6).all()


def _random_table(n: int, seed: int):
    """evaluate(masks) over a random but fixed s of every subset of n tokens: a rugged objective where pair swaps
    stall at local optima (what the widening beams are for)."""
    rng = np.random.default_rng(seed)
    s = rng.random(1 << n)
    s[0] = 1.0
    return lambda masks: [float(s[m]) for m in masks]


def test_the_anytime_search_without_a_budget_ends_at_or_above_every_beam_it_widens_through():
    """widening_search (the anytime search after its start) runs beams of width 2, 3, 5, 8 on the evaluated sets, so
    with an unlimited budget its J is at least each of those beams' J, and at least its start's; on these rugged
    objectives swaps alone (max_width 0, the earlier search) stall below beam-2 on some inputs."""
    from engine.importance.aopc_search import widening_search

    swaps_below_beam = 0
    for seed in range(12):
        n = 8
        w = curve_weights(n, "full")
        evaluate = _random_table(n, seed)
        beams = [beam_search(SetScores(n, evaluate), w, width).value for width in (2, 3, 5, 8)]
        start = beam_search(SetScores(n, evaluate), w, 1)
        widened = widening_search(SetScores(n, evaluate), w, start.order, max_width=8)
        assert widened.value >= max(beams) - 1e-12
        assert widened.value >= start.value - 1e-12 and widened.complete
        swaps = widening_search(SetScores(n, evaluate), w, start.order, max_width=0)
        swaps_below_beam += swaps.value < beams[0] - 1e-9
    assert swaps_below_beam > 0, "the objectives are rugged enough to tell the two searches apart"


def test_the_anytime_search_stays_within_any_budget_and_never_below_its_start():
    """Under budgets from N + 1 passes to past beam-8's cost, widening_search never spends more than its budget
    and its J (when known) is at least that of its start order."""
    from engine.importance.aopc_search import widening_search

    n = 8
    w = curve_weights(n, "full")
    evaluate = _random_table(n, 99)
    for budget in (9, 20, 40, 80, 160, 320, 640):
        s = SetScores(n, evaluate, budget=budget)
        start = beam_search(s, w, 1)
        if not start.complete:
            continue
        result = widening_search(s, w, start.order, max_width=8)
        assert s.spent <= budget
        assert result.value >= start.value - 1e-12


def test_a_shared_cache_changes_no_order_and_no_pass_count(toy_classifier, short_inputs):
    """Searches that share one cache of masked-set scores (a sweep over widths and budgets) return the same orders
    and report the same forward passes as each run alone: a set another search computed still counts for this one."""
    batch, target, _ = short_inputs
    cache: dict = {}
    for name, opts in (("beam-budget", {"width": 3}), ("greedy-loo", {}), ("anytime-aopc", {"exact_tokens": 0, "budget": 40})):
        alone = get_explainer(name, toy_classifier, memo=False, **opts).attribute(batch, target)
        shared = get_explainer(name, toy_classifier, memo=False, **opts)
        shared.shared_cache = cache
        together = shared.attribute(batch, target)
        assert torch.equal(alone.scores, together.scores), name
        assert torch.equal(alone.extras["forwards"], together.extras["forwards"]), name
    assert len(cache) == len(batch) and all(len(sets) > 1 for sets in cache.values())
