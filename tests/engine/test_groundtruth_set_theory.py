"""Theory as tests: hand-built models (no training) with exact redundancy, thresholds and cancellation over token
presence, and what the project's own measure implementations must give on them (REFERENCE.md section 20).

The module: logit_0 = 0, logit_1 = a closed form of the count n of the set's words present ("w1".."w4"), plus the
fillers' linear weight; ids 0 [PAD], 1 [MASK], 2 [CLS], 3 [SEP] have the zero embedding, so masking removes a word
exactly and IG's zero baseline is the [MASK] baseline. k = 3 (logits).

    redundant  logit_1 = k * (1 - relu(1 - n))              = k min(1, n): any one word suffices
    threshold  logit_1 = k * (relu(n - 1) - relu(n - 2))    = k for n >= 2, else 0: at least 2 of 4
    cancel     logit_1 = k * (n_t - n_o)                    "up" pushes to class 1, "down" to class 0; both offset
"""
from __future__ import annotations

from types import SimpleNamespace

import handbuilt_models
import pytest
import torch
from handbuilt_models import EmbeddingModule, _Tokenizer

from engine.importance import get_explainer
from engine.models import Batch, Classifier

pytestmark = pytest.mark.usefixtures("one_thread")
K = 3.0
EXACT = dict(atol=1e-5, rtol=0)
SPECIALS = ("[PAD]", "[MASK]", "[CLS]", "[SEP]")
#: word -> (VALUE, SET, UP, DOWN)
WORDS = {"the": (0, 0, 0, 0), "film": (0, 0, 0, 0), "plot": (0, 0, 0, 0), "good": (1.0, 0, 0, 0),
         "w1": (0, 1, 0, 0), "w2": (0, 1, 0, 0), "w3": (0, 1, 0, 0), "w4": (0, 1, 0, 0),
         "up": (0, 0, 1, 0), "down": (0, 0, 0, 1)}
VOCAB = {**{s: i for i, s in enumerate(SPECIALS)}, **{w: i + len(SPECIALS) for i, w in enumerate(WORDS)}}


class SetModule(EmbeddingModule):
    def __init__(self, head: str, k: float = K):
        table = torch.zeros(len(VOCAB), 4, dtype=torch.float64)
        for word, features in WORDS.items():
            table[VOCAB[word]] = torch.tensor(features, dtype=torch.float64)
        super().__init__(table)
        self.head, self.k, self.relu = head, float(k), torch.nn.ReLU()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_attentions=False, output_hidden_states=False):
        e = self.embedded(input_ids, inputs_embeds)
        e = e * attention_mask.to(e.dtype)[..., None]
        n = e[..., 1].sum(1)
        linear = e[..., 0].sum(1)
        if self.head == "redundant":
            logit = linear + self.k * (1 - self.relu(1 - n))
        elif self.head == "threshold":
            logit = linear + self.k * (self.relu(n - 1) - self.relu(n - 2))
        else:  # cancel
            logit = linear + self.k * (e[..., 2].sum(1) - e[..., 3].sum(1))
        logits = torch.stack([torch.zeros_like(logit), logit], dim=1)
        return SimpleNamespace(logits=logits, attentions=None, hidden_states=(e,) if output_hidden_states else None)


def model(head: str) -> Classifier:
    classifier = Classifier(SetModule(head), _Tokenizer(VOCAB), ("neg", "pos"), max_length=32)
    classifier.metadata["id"] = f"handbuilt-set-{head}"
    return classifier


def batch_of(texts: list[str]) -> Batch:
    return handbuilt_models.batch_of(texts, VOCAB)


def scores(classifier, measure: str, text: str, target: int = 1, **options) -> torch.Tensor:
    imp = get_explainer(measure, classifier, **options).attribute(batch_of([text]), target)
    return imp.token_scores(0).to(torch.float64)


def exact_shapley(classifier, text: str, target: int = 1) -> torch.Tensor:
    """phi_i = sum over S without i of |S|! (N - |S| - 1)! / N! (v(S + i) - v(S)), removal = [MASK], all 2^N S."""
    return handbuilt_models.exact_shapley(classifier, text, target, VOCAB)


def at(text: str, words: tuple[str, ...]) -> list[int]:
    return [i for i, w in enumerate(text.split()) if w in words]


REDUNDANT = "w1 the w2 film w3"


def test_redundant_loo_and_occlusion_give_each_of_k_words_zero():
    """With 3 of the set present n = 3; removing one leaves n = 2, still saturated: LOO and 1-token occlusion give
    every word 0 exactly (the planted ones included), though the set sets the class."""
    clf = model("redundant")
    for measure, options in (("loo-sign", {}), ("loo-abs", {}), ("occlusion", {"window": 1})):
        torch.testing.assert_close(scores(clf, measure, REDUNDANT, **options), torch.zeros(5, dtype=torch.float64),
                                   **EXACT, msg=measure)


def test_redundant_exact_shapley_splits_the_credit_equally_and_sampling_sums_to_the_effect():
    """v(S) = k iff S holds one of the 3 words: by symmetry and efficiency phi = k/3 each, 0 for the fillers.
    Shapley value sampling gives the whole k to whichever planted word comes first in a permutation: the three
    estimates sum to k exactly, each within 4 binomial standard errors of k/3."""
    clf = model("redundant")
    planted = at(REDUNDANT, ("w1", "w2", "w3"))
    phi = torch.zeros(5, dtype=torch.float64)
    phi[planted] = K / 3
    torch.testing.assert_close(exact_shapley(clf, REDUNDANT), phi, **EXACT)
    s = scores(clf, "shapley-sampling", REDUNDANT, n_samples=300)
    assert float(s[planted].sum()) == pytest.approx(K, abs=1e-5)
    sd = K * ((1 / 3) * (2 / 3) / 300) ** 0.5
    assert (s[planted] - K / 3).abs().max() < 4 * sd, s


def test_redundant_set_statistics_separate_split_credit_from_no_credit():
    """On the word level: exact Shapley puts the whole set in the top 3 (set-top-share 1), LOO's zeros tie the set
    with the two fillers and ties count against it (the top 3: both fillers, then one planted word: 1/3); the mass
    share is 1 for Shapley and 0 for LOO."""
    from engine.groundtruth.mechanisms import PlantSpec
    from engine.groundtruth.recovery import set_recovery

    clf = model("redundant")
    spec = PlantSpec(mechanism="redundant", words=("w1", "w2", "w3"))
    batch = batch_of([REDUNDANT])
    ordered = [batch.input_ids == VOCAB[w] for w in spec.words]
    shap = torch.zeros(batch.input_ids.shape, dtype=torch.float64)
    shap[0, batch.maskable[0]] = exact_shapley(clf, REDUNDANT)
    loo = get_explainer("loo-sign", clf).attribute(batch, 1).scores
    good = set_recovery(shap, batch.maskable, ordered, spec)
    bad = set_recovery(loo, batch.maskable, ordered, spec)
    assert good["set-top-share"][0] == 1.0 and good["set-mass-share"][0] == pytest.approx(1.0)
    assert bad["set-top-share"][0] == pytest.approx(1 / 3) and bad["set-mass-share"][0] == 0.0


@pytest.mark.parametrize(("text", "loo", "phi"), [
    ("w1 the w2 w3 w4", 0.0, K / 4),   # 4 of 4 present: removing one leaves 3 >= 2, nothing changes
    ("w1 the w2 film plot", K, K / 2),  # exactly 2: each is pivotal, LOO double-counts (k each, 2k in all)
])
def test_threshold_loo_depends_on_how_many_are_above_the_threshold_and_shapley_splits(text, loo, phi):
    """At least 2 of 4: with all 4 present no single removal drops below the threshold (LOO = 0 each); with exactly
    2 each removal does (LOO = k each, their sum 2k exceeds the effect k). Exact Shapley splits k equally among the
    words present: k/4 or k/2."""
    clf = model("threshold")
    planted = at(text, ("w1", "w2", "w3", "w4"))
    fillers = [i for i in range(5) if i not in planted]
    s = scores(clf, "loo-sign", text)
    torch.testing.assert_close(s[planted], torch.full((len(planted),), loo, dtype=torch.float64), **EXACT)
    assert s[fillers].abs().max() < 1e-6
    shap = exact_shapley(clf, text)
    torch.testing.assert_close(shap[planted], torch.full((len(planted),), phi, dtype=torch.float64), **EXACT)
    assert float(shap.sum()) == pytest.approx(K, abs=1e-6)


CANCEL = "up the film down plot"


@pytest.mark.parametrize("measure", ["loo-sign", "x-grad-sign", "ig-sign", "deeplift", "shapley-sampling"])
def test_cancellation_signed_measures_score_each_word_toward_its_own_class(measure):
    """logit_1 = k (n_up - n_down) is additive: phi_up = +k, phi_down = -k (they offset: logit_1 = 0). Every signed
    additive-exact measure gives these values, so explaining class 1 "up" is positive and "down" negative, and the
    card's sign statistic is right for both words."""
    from engine.groundtruth.mechanisms import PlantSpec
    from engine.groundtruth.recovery import set_recovery

    clf = model("cancel")
    s = scores(clf, measure, CANCEL)
    assert float(s[0]) == pytest.approx(K, abs=1e-5) and float(s[3]) == pytest.approx(-K, abs=1e-5), s
    spec = PlantSpec(mechanism="cancellation", words=("up", "down"))
    batch = batch_of([CANCEL])
    ordered = [batch.input_ids == VOCAB[w] for w in spec.words]
    full = get_explainer(measure, clf).attribute(batch, 1).scores
    signs = set_recovery(full, batch.maskable, ordered, spec, explained=torch.tensor([1]), target=1, other=0)
    assert signs["signs-both"][0] == 1.0
    # explaining class 0 instead: logit_0 is constant here, so every attribution is 0 and no word has a sign
    zero = set_recovery(torch.zeros_like(full), batch.maskable, ordered, spec, explained=torch.tensor([0]), target=1,
                        other=0)
    assert zero["signs-both"][0] == 0.0


@pytest.mark.parametrize("measure", ["grad-l2", "loo-abs"])
def test_cancellation_unsigned_measures_cannot_give_the_opposing_word_its_sign(measure):
    """An unsigned measure scores both words >= 0: the opposing word "down" is never scored against class 1, so the
    sign check fails on it (sign-other-word 0) while the supporting word passes."""
    from engine.groundtruth.mechanisms import PlantSpec
    from engine.groundtruth.recovery import set_recovery

    clf = model("cancel")
    spec = PlantSpec(mechanism="cancellation", words=("up", "down"))
    batch = batch_of([CANCEL])
    ordered = [batch.input_ids == VOCAB[w] for w in spec.words]
    full = get_explainer(measure, clf).attribute(batch, 1).scores
    assert (full[batch.maskable] >= 0).all()
    signs = set_recovery(full, batch.maskable, ordered, spec, explained=torch.tensor([1]), target=1, other=0)
    assert signs["sign-target-word"][0] == 1.0 and signs["sign-other-word"][0] == 0.0 and signs["signs-both"][0] == 0.0
