"""The BiLSTM-attention model (Jain & Wallace; R-ROAR App. C.1) behind the common interface."""
from __future__ import annotations

import pytest
import torch

from engine.data import get_dataset
from engine.models import TrainConfig, load_classifier, save_classifier, tokenize, train_classifier
from engine.models.bilstm import BiLSTMAttentionClassifier, new_bilstm

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


@pytest.fixture(scope="module")
def paired_model():
    d = get_dataset("babi-2")
    train = d.split("train")[:300]
    model, tok = new_bilstm([e.primary + " " + e.auxiliary for e in train], 6, d.classes, paired=True)
    test = d.split("test")[:5]
    batch = tokenize(tok, [e.primary for e in test], [e.auxiliary for e in test], max_length=160)
    return model.eval(), tok, batch


def test_attention_sums_to_one_over_the_primary_tokens_only(paired_model):
    model, _, b = paired_model
    out = model(input_ids=b.input_ids, attention_mask=b.attention_mask, token_type_ids=b.token_type_ids, output_attentions=True)
    alpha = out.attentions[0]
    assert torch.allclose(alpha.sum(1), torch.ones(len(b)), atol=1e-6)
    assert (alpha[~b.maskable] == 0).all(), "no weight on specials, padding or the question"
    assert (alpha[b.maskable] > 0).all()


def test_frozen_uniform_attention_is_uniform(paired_model):
    model, _, b = paired_model
    model.config.attention = "uniform"
    try:
        alpha = model(input_ids=b.input_ids, attention_mask=b.attention_mask, token_type_ids=b.token_type_ids,
                      output_attentions=True).attentions[0]
    finally:
        model.config.attention = "additive"
    n = b.maskable.sum(1, keepdim=True).float()
    assert torch.allclose(alpha[b.maskable], (1 / n).expand_as(alpha)[b.maskable])


def test_segments_are_recovered_from_token_types(paired_model):
    _, _, b = paired_model
    seg = BiLSTMAttentionClassifier._segments(b.attention_mask, b.token_type_ids, b.input_ids.shape[1], "cpu")
    assert torch.equal(seg, b.segments)


def test_padding_does_not_change_the_output(paired_model):
    model, tok, _ = paired_model
    e = get_dataset("babi-2").split("test")[0]
    alone = tokenize(tok, [e.primary], [e.auxiliary], max_length=160)
    padded = tokenize(tok, [e.primary, e.primary + " " + e.primary], [e.auxiliary, e.auxiliary], max_length=160)
    with torch.no_grad():
        a = model(input_ids=alone.input_ids, attention_mask=alone.attention_mask, token_type_ids=alone.token_type_ids).logits
        p = model(input_ids=padded.input_ids, attention_mask=padded.attention_mask, token_type_ids=padded.token_type_ids).logits
    assert torch.allclose(a[0], p[0], atol=1e-5)


def test_trains_saves_and_reloads_through_the_common_checkpoint_path(models_cache):
    c = train_classifier(TrainConfig(base_model="bilstm", dataset="toy", epochs=4, lr=3e-3, batch_size=16), show_progress_bar=False)
    assert c.metadata["architecture"] == "bilstm-attention"
    assert c.metadata["test"]["unmasked"] >= 0.8, "the toy polarity words are learnable from GloVe vectors"
    save_classifier(c, "bilstm-toy")
    loaded = load_classifier("bilstm-toy")
    b = c.batch(["the movie was great", "the plot was dull"])
    with torch.no_grad():
        assert torch.allclose(c.logits(b), loaded.logits(b.to(loaded.device)), atol=1e-6)
    embeds = loaded.word_embeddings(b.input_ids).detach().requires_grad_(True)
    loaded.logits_from_embeddings(embeds, b)[:, 1].sum().backward()
    assert embeds.grad[b.maskable].abs().sum() > 0, "gradients reach the word embeddings (gradient measures work)"
