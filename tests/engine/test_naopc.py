"""Per-input AOPC bounds and NAOPC (engine/faithfulness/naopc.py): the bounds equal the best and worst AOPC
over every masking order, agree with the authors' reference code on shared fixtures, and normalise AOPC to
[0, 1] with 1 at the best order; the eraser curve matches the erasure metrics' AOPC."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.data import get_dataset
from engine.errors import InvalidInputError
from engine.faithfulness.erasure import erasure_metrics
from engine.faithfulness.naopc import aopc_bounds, naopc, normalise
from engine.importance import get_explainer
from engine.importance.aopc_search import SetScores, beam_search, curve_weights, exact_bounds

REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "naopc_reference.json").read_text())


# device: a lent GPU runs it (-m device); tiny models: one torch thread (tests/conftest.py)
pytestmark = [pytest.mark.device, pytest.mark.usefixtures("one_thread")]


def _table_scores(entry):
    """A `SetScores` reading p_c off a fixture's table (local token t = feature t + 1 of the authors' keys)."""
    n, table = entry["n"], entry["table"]

    def evaluate(masks):
        return [table[",".join(str(t + 1) for t in range(n) if m >> t & 1)] for m in masks]

    return SetScores(n, evaluate)


def test_exact_bounds_equal_the_authors_exhaustive_search_on_shared_fixtures():
    """On the shared fixtures (masked-set probabilities of the toy model, 5-7 tokens), our DP's U and L equal
    those of Edin et al.'s permutation search (JoakimEdin/naopc @ 0976aa3) run on the same tables."""
    assert len(REFERENCE["inputs"]) >= 5
    for entry in REFERENCE["inputs"]:
        s = _table_scores(entry)
        hi, _, lo, _ = exact_bounds(s, curve_weights(entry["n"], "full"))
        assert hi == pytest.approx(entry["their_exact_upper"], abs=1e-12)
        assert lo == pytest.approx(entry["their_exact_lower"], abs=1e-12)


def test_beam_without_deduplication_reproduces_the_authors_beam_bounds():
    """Our beam at width 5 keeping duplicate paths (as theirs does) returns the same bound values as the
    authors' beam on the fixtures, and both lie within the exact bounds."""
    for entry in REFERENCE["inputs"]:
        w = curve_weights(entry["n"], "full")
        up = beam_search(_table_scores(entry), w, 5, sign=1.0, dedup=False)
        down = beam_search(_table_scores(entry), w, 5, sign=-1.0, dedup=False)
        assert up.value == pytest.approx(entry["their_beam5_upper"], abs=1e-12)
        assert down.value == pytest.approx(entry["their_beam5_lower"], abs=1e-12)
        assert entry["their_exact_lower"] - 1e-12 <= down.value <= up.value <= entry["their_exact_upper"] + 1e-12


@pytest.fixture(scope="module")
def short_batch(toy_classifier):
    rows = [e for e in get_dataset("toy").split("test") if len(toy_classifier.batch_of([e]).maskable[0].nonzero()) <= 6][:3]
    batch = toy_classifier.batch_of(rows)
    return batch, toy_classifier.targets_for(batch)


def _brute_aopc(classifier, batch, row, target, curve):
    """Every order's AOPC through the model (one forward per subset), independent of the module."""
    pos = batch.maskable[row].nonzero().flatten().tolist()
    n = len(pos)
    p = {}
    for r in range(n + 1):
        for sub in itertools.combinations(pos, r):
            ids = batch.input_ids[row].clone()
            ids[list(sub)] = classifier.mask_token_id
            with torch.no_grad():
                logits = classifier.logits(batch, ids[None].expand(len(batch), -1).clone())[row].double()
            p[frozenset(sub)] = float(torch.softmax(logits, -1)[target])
    w = curve_weights(n, curve)
    return {o: sum(w[k] * (p[frozenset()] - p[frozenset(o[:k])]) for k in range(1, n + 1))
            for o in itertools.permutations(pos)}


@pytest.mark.parametrize("curve", ["full", "eraser"])
def test_bounds_equal_the_enumerated_best_and_worst_aopc(toy_classifier, short_batch, curve):
    """aopc_bounds (exact) equals max and min AOPC over all N! orders through the model, for both curves, and
    its orders attain them; the beam bounds lie inside."""
    batch, target = short_batch
    exact = aopc_bounds(toy_classifier, batch, target, curve=curve, method="exact")
    beam = aopc_bounds(toy_classifier, batch, target, curve=curve, method="beam", beam_size=2)
    assert exact.exact.all() and not beam.exact.any()
    for i in range(len(batch)):
        values = _brute_aopc(toy_classifier, batch, i, int(target[i]), curve)
        assert exact.upper[i] == pytest.approx(max(values.values()), abs=1e-6)
        assert exact.lower[i] == pytest.approx(min(values.values()), abs=1e-6)
        assert values[tuple(exact.upper_order[i])] == pytest.approx(exact.upper[i], abs=1e-6)
        assert values[tuple(exact.lower_order[i])] == pytest.approx(exact.lower[i], abs=1e-6)
        # separate batches of forwards differ by float32 rounding (~1e-8): compare to 1e-6
        assert exact.lower[i] - 1e-6 <= beam.lower[i] <= beam.upper[i] <= exact.upper[i] + 1e-6


def test_naopc_is_one_at_the_best_order_zero_at_the_worst_and_within_bounds(toy_classifier, short_batch):
    """NAOPC of the U-attaining ranking is 1 and of the L-attaining one 0; any measure's NAOPC (both curves'
    senses) lies in [0, 1] with exact bounds; the raw AOPC is reported beside it."""
    batch, target = short_batch
    bounds = aopc_bounds(toy_classifier, batch, target)
    B, T = batch.input_ids.shape

    def ranking(orders):
        out = torch.zeros(B, T)
        for i, order in enumerate(orders):
            for rank, p in enumerate(order):
                out[i, p] = len(order) - rank
        return out

    # the AOPC is re-scored in other batches of forwards than the bounds: float32 rounding, ~1e-7 after dividing
    top = naopc(toy_classifier, batch, ranking(bounds.upper_order), target, bounds=bounds)
    assert top.naopc_comprehensiveness == pytest.approx(np.ones(B), abs=1e-5)
    bottom = naopc(toy_classifier, batch, ranking(bounds.lower_order), target, bounds=bounds)
    assert bottom.naopc_comprehensiveness == pytest.approx(np.zeros(B), abs=1e-5)
    # sufficiency in the authors' sense masks the least important first: the ranking whose reverse is the
    # U-attaining order has the highest sufficiency AOPC (1 normalised), the ranking itself a lower one
    flipped = naopc(toy_classifier, batch, ranking([o[::-1] for o in bounds.upper_order]), target, bounds=bounds)
    assert flipped.naopc_sufficiency == pytest.approx(np.ones(B), abs=1e-5)
    assert flipped.aopc_comprehensiveness == pytest.approx(top.aopc_sufficiency, abs=1e-6)
    loo = get_explainer("loo-sign", toy_classifier).attribute(batch, target).scores
    r = naopc(toy_classifier, batch, loo, target, bounds=bounds)
    for v in (r.naopc_comprehensiveness, r.naopc_sufficiency):
        assert ((v >= -1e-5) & (v <= 1 + 1e-5)).all()
    assert r.aopc_comprehensiveness == pytest.approx(bounds.lower + r.naopc_comprehensiveness * (bounds.upper - bounds.lower))
    assert set(r.summary()) >= {"aopc-comprehensiveness", "naopc-comprehensiveness"}


def test_eraser_curve_aopc_is_the_erasure_metrics_aopc(toy_classifier, short_batch):
    """With curve='eraser' the AOPC that NAOPC normalises is exactly erasure_metrics' aopc-comprehensiveness."""
    batch, target = short_batch
    scores = get_explainer("loo-sign", toy_classifier).attribute(batch, target).scores
    ours = naopc(toy_classifier, batch, scores, target, curve="eraser")
    theirs = erasure_metrics(toy_classifier, batch, scores, target, metrics=["comprehensiveness"])
    assert ours.aopc_comprehensiveness == pytest.approx(theirs.values["aopc-comprehensiveness"], abs=1e-6)


def test_normalise_is_zero_without_range_and_bad_options_are_refused(toy_classifier, short_batch):
    """U = L gives NAOPC 0 (every order is alike); unknown methods or curves and exact bounds beyond max_exact
    are refused with the alternatives named."""
    assert normalise([0.3, 0.5], [0.3, 0.0], [0.3, 1.0]).tolist() == [0.0, 0.5]
    batch, target = short_batch
    with pytest.raises(InvalidInputError, match="auto, exact, beam"):
        aopc_bounds(toy_classifier, batch, target, method="brute")
    with pytest.raises(InvalidInputError, match="full, eraser"):
        aopc_bounds(toy_classifier, batch, target, curve="binned")
    with pytest.raises(InvalidInputError, match="max_exact"):
        aopc_bounds(toy_classifier, batch, target, method="exact", max_exact=2)


def test_evaluate_reports_naopc_beside_aopc_end_to_end(toy_classifier, models_cache, tmp_path, monkeypatch):
    """`evaluate --naopc` stores naopc-comprehensiveness (higher = better, in [0, 1] with exact bounds on toy
    inputs) beside aopc-comprehensiveness, with the bounds' provenance; its value is the per-input normalisation
    of the stored AOPC by add_naopc's bounds; cells without --naopc keep their old keys."""
    import argparse

    from engine.cli import metrics as metrics_command
    from engine.faithfulness.evaluation import EvaluationCell, evaluation_store
    from engine.models import save_classifier

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    save_classifier(toy_classifier, "toy-masked-s0", overwrite=True)
    parser = argparse.ArgumentParser()
    metrics_command.configure(parser)
    args = parser.parse_args(["--model", "toy-masked-s0", "--dataset", "toy", "--measures", "loo-sign", "random",
                              "--limit", "4", "--metrics", "comprehensiveness", "--run", "n", "--naopc"])
    assert metrics_command.run(args) == 0
    store = evaluation_store()
    data = store.load("n")
    naopc_rows = data[data.metric == "naopc-comprehensiveness"]
    assert set(naopc_rows.measure) == {"loo-sign", "random"} and (naopc_rows.better == "higher").all()
    assert naopc_rows.value.between(0, 1).all()
    prov = store.provenance("n")[0]
    assert prov["cell"]["naopc"] is True and prov["provenance"]["naopc"][0]["exact_share"] == 1.0
    assert "naopc" not in EvaluationCell(model="m", dataset="toy", measure="loo-sign", seed=0).key()


def test_normalisation_can_reorder_measures_and_rank_by_both_reports_it():
    """Per-input normalisation can change which measure ranks first: A has the higher mean AOPC only thanks to
    an input with a wide range, B the higher mean NAOPC; rank_by_both gives both ranks and Kendall's tau = -1."""
    from engine.faithfulness.naopc import AopcBounds, NaopcResult, rank_by_both

    bounds = AopcBounds(lower=np.array([0.0, 0.0]), upper=np.array([1.0, 0.1]), exact=np.ones(2, bool),
                        lower_order=[[], []], upper_order=[[], []], forwards=np.zeros(2, int), curve="full")

    def result(aopc):
        aopc = np.asarray(aopc)
        n = normalise(aopc, bounds.lower, bounds.upper)
        return NaopcResult(aopc, n, aopc, n, bounds)

    rows, tau = rank_by_both({"A": result([0.9, 0.0]), "B": result([0.5, 0.1])})
    assert [r["measure"] for r in rows] == ["B", "A"]
    assert rows[0]["rank_aopc"] == 2 and rows[0]["rank_naopc"] == 1 and tau == pytest.approx(-1.0)
