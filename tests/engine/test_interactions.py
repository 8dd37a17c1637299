"""shapley-interactions (engine/importance/interactions.py): its values against shapiq's exact computation on a game
evaluated here by hand, its word players, its seeding, the theory of threshold sets, and the top pairs `explain` prints."""
from __future__ import annotations

from itertools import product

import numpy as np
import pytest
import torch

from engine.importance import get_explainer
from engine.importance.interactions import word_players

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "a gripping , funny film"


def _hand_game(clf, batch, target: int):
    """v(S) for every coalition of the batch's maskable tokens (one row each, [MASK] written by hand, one forward of
    all rows): the game shapiq's ExactComputer reads, independent of the measure's batching."""
    positions = batch.maskable[0].nonzero().flatten().tolist()
    n = len(positions)
    coalitions = np.array(list(product((False, True), repeat=n)))
    ids = batch.input_ids.repeat(len(coalitions), 1)
    for row, keep in enumerate(coalitions):
        for j, kept in enumerate(keep):
            if not kept:
                ids[row, positions[j]] = clf.mask_token_id
    with torch.no_grad():
        v = clf.model(input_ids=ids, attention_mask=batch.attention_mask.repeat(len(coalitions), 1),
                      token_type_ids=batch.token_type_ids.repeat(len(coalitions), 1)).logits[:, target].double().numpy()
    table = {tuple(c): float(x) for c, x in zip(coalitions, v)}

    def game(c):
        return np.array([table[tuple(bool(x) for x in row)] for row in np.asarray(c, dtype=bool)])

    return game, n


@pytest.mark.parametrize("index", ["k-SII", "FSII"])
def test_full_budget_equals_shapiqs_exact_computation(toy_classifier, index):
    """With budget >= 2^n every coalition is evaluated: the measure's first-order values and pairs equal
    shapiq.ExactComputer's on the same game (built here by hand), to float32 rounding of the logits."""
    import shapiq

    b = toy_classifier.batch([TEXT])
    game, n = _hand_game(toy_classifier, b, 1)
    exact = shapiq.ExactComputer(game, n_players=n)(index, 2)
    imp = get_explainer("shapley-interactions", toy_classifier, index=index, level="token", budget=2 ** n).attribute(b, 1)
    pairs = imp.extras["interactions"][0]
    assert pairs.exact and pairs.budget == 2 ** n and len(pairs.pairs) == n * (n - 1) // 2
    first = imp.token_scores(0).double().numpy()
    np.testing.assert_allclose(first, [exact[(p,)] for p in range(n)], atol=2e-5)
    for i, j, v in pairs.pairs:
        assert v == pytest.approx(exact[(i, j)], abs=2e-5), (i, j)
    magnitudes = [abs(v) for _, _, v in pairs.pairs]
    assert magnitudes == sorted(magnitudes, reverse=True)
    assert pairs.baseline == pytest.approx(game(np.zeros((1, n), dtype=bool))[0], abs=1e-5)


def test_a_sampled_budget_is_seeded_per_input(toy_classifier):
    b = toy_classifier.batch(["the film was gripping and funny and far too long for its own good"])

    def run(seed):
        imp = get_explainer("shapley-interactions", toy_classifier, budget=40, seed=seed, memo=False).attribute(b, 1)
        return imp.extras["interactions"][0]

    first, again, other = run(0), run(0), run(1)
    assert not first.exact and first.budget == 40
    assert first.pairs == again.pairs and first.pairs != other.pairs


def test_words_are_the_players_by_default(toy_classifier):
    """A word of several pieces is one player (its pieces masked together), its score split evenly over its pieces;
    punctuation attached to a word stays with it, as the Explain page's word level has it."""
    b = toy_classifier.batch(["an unredeemable mess."])
    tokens = toy_classifier.maskable_tokens(b)
    assert len(tokens) > 3  # 'unredeemable' is several pieces
    imp = get_explainer("shapley-interactions", toy_classifier, budget=64).attribute(b, 1)
    pairs = imp.extras["interactions"][0]
    labels = [pairs.label(p, tokens) for p in range(len(pairs.players))]
    assert labels == ["an", "unredeemable", "mess."]
    s = imp.token_scores(0).double()
    for p, members in enumerate(pairs.players):
        assert float(s[list(members)].sum()) == pytest.approx(pairs.first_order[p], abs=1e-5)
        assert len(set(s[list(members)].tolist())) == 1


def test_word_players_from_offsets_and_space_marks():
    assert word_players([(0, 2), (3, 6), (6, 10), (10, 11)], ["an", "unr", "##ede", "."]) == [(0,), (1, 2, 3)]
    assert word_players([(0, 3), (3, 8), (8, 9)], ["the", "Ġfilm", "."]) == [(0,), (1, 2)]
    assert word_players([(0, 0), (0, 0)], ["a", "b"]) == [(0,), (1,)]


def test_threshold_pairs_follow_theory():
    """At least 2 of 4 (tests/engine/test_groundtruth_set_theory.py's model): with exactly two planted words present the
    pair is an AND (+k); with all four present, a pair's discrete derivative is +k when neither other planted word is
    in the coalition, -k when one is, 0 when both are, each count equally likely under the Shapley weights: 0."""
    from test_groundtruth_set_theory import K, batch_of, model

    clf = model("threshold")
    two = get_explainer("shapley-interactions", clf, level="token", budget=64).attribute(batch_of(["w1 the w2 film plot"]), 1)
    assert two.extras["interactions"][0].value(0, 2) == pytest.approx(K, abs=1e-5)
    four = get_explainer("shapley-interactions", clf, level="token", budget=64).attribute(batch_of(["w1 the w2 w3 w4"]), 1)
    pairs = four.extras["interactions"][0]
    for i, j in ((0, 2), (0, 3), (2, 3), (3, 4)):
        assert pairs.value(i, j) == pytest.approx(0.0, abs=1e-5)


def test_explain_prints_the_top_pairs(toy_classifier, models_cache, capsys):
    from engine.cli import main
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-pairs")
    assert main(["explain", "--model", "toy-pairs", "--text", TEXT, "--measure", "shapley-interactions",
                 "--option", "budget=32"]) == 0
    out = capsys.readouterr().out
    assert "k-SII pair interactions over words" in out and "exact" in out
    pairs = [line for line in out.splitlines() if line.startswith("  ") and " x " in line]
    assert len(pairs) == 5 and all(line.split()[-1][0] in "+-" for line in pairs)
