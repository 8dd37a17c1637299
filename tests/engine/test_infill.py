"""ICE's infill removal operators (engine/faithfulness/infill.py): retrieval infill (tokens drawn from the model's data)
and MLM infill (a masked LM's guess), through every metric that removes tokens, the report card's operators and
`evaluate --operator`."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from engine.errors import NotApplicableError
from engine.faithfulness.erasure import erasure_metrics
from engine.faithfulness.infill import MLMInfill, RetrievalInfill, load_mlm, mlm_compatible, retrieval_pool


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_retrieval_fills_only_the_removed_positions_the_same_way_in_every_perturbation_of_an_input():
    """Only removed positions change, each to a pool token; the draws of an input depend on its own tokens and the
    seed, not on which other positions are removed or which rows share its batch; another seed draws otherwise."""
    pool = torch.arange(100, 160)
    infill = RetrievalInfill(pool, seed=3)
    ids = torch.tensor([[2, 10, 11, 12, 13, 3, 0], [2, 20, 21, 3, 0, 0, 0]])
    att = (ids != 0).long()
    removed = torch.zeros_like(ids, dtype=torch.bool)
    removed[0, [1, 3]] = True
    removed[1, 2] = True
    out = infill.fill(ids, removed, att)
    assert torch.equal(out[~removed], ids[~removed]) and bool(torch.isin(out[removed], pool).all())
    more = removed.clone()
    more[0, 4] = True  # another perturbation of input 0: its shared removed positions get the same tokens
    again = infill.fill(ids, more, att)
    assert torch.equal(again[0, [1, 3]], out[0, [1, 3]])
    alone = infill.fill(ids[:1], removed[:1], att[:1])  # input 0 without input 1 beside it
    assert torch.equal(alone[0], out[0])
    other = RetrievalInfill(pool, seed=4).fill(ids, removed, att)
    assert not torch.equal(other[removed], out[removed])


def test_erasure_metrics_with_retrieval_infill_by_hand(known_classifier):
    """A pool of one token (id 9, weight 0.75) makes the infill certain: comprehensiveness at k removes the top
    token and puts id 9 there, so p_c = sigmoid(sum of the kept weights + 0.75); sufficiency fills the rest the same
    way; the length is kept (the MaSF-free rows count one perturbed input each)."""
    table = [2.0, 1.0, -1.5, 0.5, -1.0, 0.75]  # ids 4..9
    w = dict(zip(range(4, 10), table))
    classifier, batch_of = known_classifier(table)
    batch = batch_of([[4, 5, 6, 7]])
    scores = torch.zeros(batch.input_ids.shape)
    scores[0, 1:5] = torch.tensor([4.0, 3.0, 2.0, 1.0])
    import copy

    twin = copy.copy(classifier)
    twin.infill = RetrievalInfill(torch.tensor([9]), seed=0)
    res = erasure_metrics(twin, batch, scores, target=[1], metrics=["comprehensiveness", "sufficiency"],
                          bins=(0.25, 0.5))
    p_x = sigmoid(sum(w[i] for i in (4, 5, 6, 7)))
    assert res.values["comprehensiveness@0.25"][0] == pytest.approx(p_x - sigmoid(w[5] + w[6] + w[7] + w[9]), abs=1e-12)
    assert res.values["comprehensiveness@0.5"][0] == pytest.approx(p_x - sigmoid(w[6] + w[7] + 2 * w[9]), abs=1e-12)
    assert res.values["sufficiency@0.25"][0] == pytest.approx(p_x - sigmoid(w[4] + 3 * w[9]), abs=1e-12)
    plain = erasure_metrics(classifier, batch, scores, target=[1], metrics=["comprehensiveness"], bins=(0.25,))
    assert plain.values["comprehensiveness@0.25"][0] == pytest.approx(p_x - sigmoid(w[5] + w[6] + w[7]), abs=1e-12)


@pytest.fixture(scope="module")
def tiny_tokenizer_classifier():
    """A stand-in classifier carrying the packaged tiny encoder's tokenizer (what an MLM infill needs of it)."""
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(resolve_encoder("tiny")), device=torch.device("cpu"),
                           id="tiny-stand-in", metadata={"dataset": "rt"})


def test_mlm_infill_is_the_tiny_mlms_best_other_token(tiny_tokenizer_classifier):
    """The removed positions get the packaged tiny MLM's argmax given the input with them masked, never the removed
    token itself nor a special token (checked against an independent BertForMaskedLM forward); the rest unchanged."""
    from transformers import BertForMaskedLM

    from engine.models.encoders import resolve_encoder

    tok = tiny_tokenizer_classifier.tokenizer
    assert mlm_compatible(tiny_tokenizer_classifier)
    infill = load_mlm(tiny_tokenizer_classifier)
    assert isinstance(infill, MLMInfill)
    enc = tok(["the film is very good and moving"], return_tensors="pt")
    ids, att = enc["input_ids"], enc["attention_mask"]
    removed = torch.zeros_like(ids, dtype=torch.bool)
    removed[0, [4, 5]] = True  # "very good"
    out = infill.fill(ids, removed, att)
    assert torch.equal(out[~removed], ids[~removed])
    mlm = BertForMaskedLM.from_pretrained(resolve_encoder("tiny"), use_safetensors=True).eval()
    with torch.no_grad():
        logits = mlm(input_ids=torch.where(removed, torch.full_like(ids, tok.mask_token_id), ids),
                     attention_mask=att).logits[0]
    for pos in (4, 5):
        ranked = [int(i) for i in logits[pos].argsort(descending=True)[:10]
                  if int(i) not in tok.all_special_ids and int(i) != int(ids[0, pos])]
        assert int(out[0, pos]) == ranked[0]


def test_an_mlm_of_another_vocabulary_is_refused(tiny_tokenizer_classifier):
    other = SimpleNamespace(tokenizer=SimpleNamespace(get_vocab=lambda: {"a": 0}, mask_token_id=0, all_special_ids=[]),
                            device=torch.device("cpu"), id="other-vocab", metadata={})
    assert not mlm_compatible(other)
    with pytest.raises(NotApplicableError, match="another vocabulary"):
        load_mlm(other)


def test_the_retrieval_pool_is_the_models_training_tokens_without_special_ones(tiny_tokenizer_classifier):
    pool = retrieval_pool(tiny_tokenizer_classifier, limit=50)
    special = set(tiny_tokenizer_classifier.tokenizer.all_special_ids)
    assert len(pool) > 200 and not (set(pool.tolist()) & special)
    with pytest.raises(NotApplicableError, match="names no dataset"):
        retrieval_pool(SimpleNamespace(tokenizer=tiny_tokenizer_classifier.tokenizer, metadata={}))


def test_the_card_and_evaluate_offer_the_infill_operators(tiny_tokenizer_classifier):
    """The report card's operators and `evaluate --operator` take retrieval and mlm; supported_operators offers them
    to a model with a dataset and the tiny vocabulary; operator_classifier gives a twin that fills in, removal 'mask'."""
    from engine.cli import build_parser
    from engine.groundtruth.card_config import OPERATORS
    from engine.groundtruth.card_plan import operator_classifier, supported_operators

    assert {"retrieval", "mlm"} <= set(OPERATORS)
    clf = SimpleNamespace(**vars(tiny_tokenizer_classifier))
    assert {"retrieval", "mlm"} <= set(supported_operators(clf))
    twin, removal = operator_classifier(clf, "retrieval")
    assert removal == "mask" and isinstance(twin.infill, RetrievalInfill) and not hasattr(clf, "infill")
    args = build_parser(["metrics"]).parse_args(["metrics", "--model", "tiny-rt-masked-s0", "--dataset", "rt",
                                                  "--measures", "random",
                                                  "--metrics", "comprehensiveness", "--operator", "retrieval"])
    assert args.operator == "retrieval"


def test_report_card_offers_every_operator_the_card_knows():
    """The command's choices are the card's operators (the infill ones were refused before this test)."""
    from engine.cli.report_card import OPERATOR_CHOICES
    from engine.groundtruth.card_config import OPERATORS

    assert set(OPERATOR_CHOICES) == set(OPERATORS)
