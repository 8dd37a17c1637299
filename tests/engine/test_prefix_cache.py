"""The prompt prefix computed once (engine/models/prefix_cache.py): with the key/value cache of the
prompt before the input slot, a prompted LM's logits, its MaSF features and every perturbation measure's scores
equal those of the plain forward, per family (random-weight tiny causal LMs built here, the families of
tests/engine/test_prompted.py plus Gemma 3 with a sliding window shorter than the prompt), for each replacement
(positions fixed, and [REDACTED] / delete, whose suffixes differ in length per row), and for multi-token label
words. Tolerance: 1e-5 on logits and scores (float32; measured differences are 0 to ~1e-6)."""
from __future__ import annotations

import copy

import pytest
import torch
from tiny_lms import TINY_LM_FAMILIES

from engine.importance import get_explainer
from engine.models.prefix_cache import shared_prefix_length
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

TOL = 1e-5
TEXTS = ["a gripping , funny and moving film", "dull , tedious and far too long", "fine"]
FAMILIES = {
    **{name: TINY_LM_FAMILIES[name] for name in ("llama", "gpt2", "qwen2")},
    # Gemma 3: sliding-window layers (window 8, shorter than the prompt) between full-attention ones
    "gemma3": ("Gemma3TextConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
                                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                                    "sliding_window": 8, "layer_types": ["sliding_attention", "sliding_attention",
                                                                         "full_attention"]}),
}


@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def spec(**overrides) -> PromptSpec:
    base = {"instruction": "is the review positive or negative ? answer with one word .",
            "input_format": "review : {input}", "template": "plain", "answer_prefix": "answer :",
            "examples": [{"input": "a delight", "label": "positive"}, {"input": "a bore", "label": "negative"}],
            "verbalizer": {"negative": ["bad"], "positive": ["good", "great"]}, "replacement": "special"}
    base.update(overrides)
    return PromptSpec.from_dict(base)


def classifier(family: str, tokenizer, **overrides) -> PromptedClassifier:
    import transformers

    name, kwargs = FAMILIES[family]
    config = getattr(transformers, name)(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                         bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                                         **kwargs)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # larger than the init's 0.02 so the random model is not flat
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(10)
    tok = copy.deepcopy(tokenizer)
    return PromptedClassifier(model.eval(), tok, spec(**overrides), max_length=128)


def both(clf: PromptedClassifier, fn):
    """fn() without and with the prefix cache (the cache emptied first)."""
    clf.prefix_cache = False
    plain = fn()
    clf.prefix_cache = True
    clf.clear_prefix_cache()
    return plain, fn()


def perturbed(clf: PromptedClassifier, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [n, T] of `text` with slot token i masked in row i, and the attention mask."""
    b = clf.batch([text])
    slot = b.maskable[0].nonzero().flatten()
    ids = b.input_ids.repeat(len(slot), 1)
    ids[torch.arange(len(slot)), slot] = clf.mask_token_id
    return ids, b.attention_mask.repeat(len(slot), 1)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("replacement", ["special", "redacted", "delete"])
def test_cached_prefix_gives_the_plain_forwards_logits_and_features(family, replacement, bert_tokenizer):
    """Logits of a batch of different inputs, of one input's perturbations, and the hidden states MaSF pools are
    the plain forward's (within 1e-5), and the cache was really used (a prefix computed)."""
    clf = classifier(family, bert_tokenizer, replacement=replacement)
    b = clf.batch(TEXTS)
    ids, att = perturbed(clf, TEXTS[0])

    def run():
        with torch.no_grad():
            out = clf.forward(input_ids=b.input_ids, attention_mask=b.attention_mask, output_hidden_states=True)
            return out.logits, out.hidden_states, clf.forward(input_ids=ids, attention_mask=att).logits

    (l0, h0, p0), (l1, h1, p1) = both(clf, run)
    assert clf.prefix_kv().prefix_rows == 1  # one prefix served both calls
    assert (l0 - l1).abs().max() < TOL and (p0 - p1).abs().max() < TOL
    assert len(h0) == len(h1) and all(a.shape == c.shape and (a - c).abs().max() < 1e-4 for a, c in zip(h0, h1))


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_perturbation_measures_score_the_same_with_the_cache(family, bert_tokenizer):
    """LOO, occlusion, KernelSHAP and LIME (seeded) give the same scores with and without the cache."""
    clf = classifier(family, bert_tokenizer, replacement="redacted")
    b = clf.batch(TEXTS[:2])
    for measure, options in (("loo-sign", {}), ("occlusion", {}), ("kernel-shap", {"n_samples": 40}),
                             ("lime", {"n_samples": 40})):
        plain, cached = both(clf, lambda m=measure, o=options: get_explainer(m, clf, memo=False, **o).attribute(b).scores)
        assert (plain - cached).abs().max() < TOL, measure


def test_multi_token_label_words_are_scored_the_same_with_the_cache(bert_tokenizer):
    """Teacher-forced multi-token label words run their extended rows on the cached prefix too."""
    clf = classifier("llama", bert_tokenizer, verbalizer={"negative": ["very bad"], "positive": ["very good", "great"]})
    assert not clf.single_token_words
    ids, att = perturbed(clf, TEXTS[0])

    def run():
        with torch.no_grad():
            return clf.forward(input_ids=ids, attention_mask=att).logits

    plain, cached = both(clf, run)
    assert (plain - cached).abs().max() < TOL


def test_a_weight_change_is_never_served_an_old_prefix(bert_tokenizer):
    """After an in-place change of the weights (an optimizer step, a loaded adapter) the cached forward equals
    the plain forward under the new weights, not the old prefix's."""
    clf = classifier("llama", bert_tokenizer)
    b = clf.batch(TEXTS)
    with torch.no_grad():
        before = clf.logits(b)
        next(clf.model.base_model.layers[0].parameters()).mul_(1.5)
        after = clf.logits(b)
        clf.prefix_cache = False
        reference = clf.logits(b)
    assert (after - reference).abs().max() < TOL and (after - before).abs().max() > 1e-3


def test_gradients_and_attentions_run_the_whole_prompt(bert_tokenizer):
    """The cache is used only without a gradient and without attentions: a forward with gradients on (training,
    a gradient measure's backward pass) and an attention request compute no prefix and read none."""
    clf = classifier("llama", bert_tokenizer)
    b = clf.batch(TEXTS[:1])
    logits = clf.forward(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
    logits[0, 1].backward()
    assert clf._prefix_store is None
    assert clf.model.get_input_embeddings().weight.grad is not None
    with torch.no_grad():
        out = clf.forward(input_ids=b.input_ids, attention_mask=b.attention_mask, output_attentions=True)
    assert out.attentions is not None and clf._prefix_store is None


def test_the_shared_prefix_stops_at_the_slot_and_leaves_each_row_its_last_token():
    """shared_prefix_length: the leading tokens all rows share and the template holds, never a row's last real
    token."""
    ids = torch.tensor([[5, 6, 7, 8, 9, 0], [5, 6, 7, 8, 2, 3]])
    att = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    assert shared_prefix_length(ids, att) == 4
    assert shared_prefix_length(ids, att, torch.tensor([5, 6, 7])) == 3
    assert shared_prefix_length(ids, att, torch.tensor([5, 9])) == 1
    assert shared_prefix_length(ids[:1], att[:1]) == 4  # one row: all but its last real token
    assert shared_prefix_length(ids[:1, :1], att[:1, :1]) == 0


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_gradient_measures_score_the_same_on_the_cached_prefix(family, bert_tokenizer):
    """The gradient measures (gradients, x-grad, IG, GradientSHAP, DeepLift) run forward and backward over the
    suffix only when the cache is on (the prefix computed once, suffix positions counted), and score the slot
    as the whole-prompt forward does (within 1e-5)."""
    clf = classifier(family, bert_tokenizer)
    b = clf.batch(TEXTS)
    for measure, options in (("grad-l2", {}), ("grad-l1", {}), ("x-grad-sign", {}), ("ig-sign", {"steps": 8}),
                             ("gradient-shap", {"n_samples": 8}), ("deeplift", {})):
        explainer = get_explainer(measure, clf, memo=False, **options)
        clf.prefix_cache = False
        plain = explainer.attribute(b).scores
        clf.prefix_cache = True
        clf.clear_prefix_cache()
        kv = clf.prefix_kv()
        with torch.enable_grad():
            e = clf.word_embeddings(b.input_ids).detach().requires_grad_(True)
            before = kv.suffix_tokens
            clf.logits_from_embeddings(e, b)[:, 1].sum().backward()
        assert kv.suffix_tokens > before and e.grad is not None, "a gradient forward did not run on the cached prefix"
        suffix = kv.suffix_tokens
        cached = explainer.attribute(b).scores
        # beyond the prediction's forward (one pass over the rows' suffixes), the measure's passes ran on the cache
        assert kv.suffix_tokens - suffix > len(b) * (b.input_ids.shape[1] - len(clf.template_prefix_ids())), measure
        assert kv.prefix_rows == 1, measure
        assert (plain - cached).abs().max() < TOL * max(1.0, float(plain.abs().max())), measure
        assert plain.abs().max() > 0, measure


def test_an_interpolated_prefix_runs_the_whole_prompt(bert_tokenizer):
    """Embeddings whose prefix positions are not the prompt's own (here scaled, as an IG path over the whole
    prompt would be) never read the cache: their logits are the whole forward's."""
    clf = classifier("llama", bert_tokenizer)
    b = clf.batch(TEXTS[:2])
    e = clf.word_embeddings(b.input_ids) * 0.5
    clf.prefix_cache = False
    plain = clf.logits_from_embeddings(e, b)
    clf.prefix_cache = True
    clf.clear_prefix_cache()
    cached = clf.logits_from_embeddings(e, b)
    assert clf._prefix_store is None and torch.equal(plain, cached)


def test_the_gradient_prefix_stops_where_the_slot_merges_with_the_prompt(bert_tokenizer):
    """The template's prefix is tokenised around a placeholder, so its last piece can merge with the slot's first
    word in a real input (SmolLM2's ":" + newline did: the gradient measures then never used the cache). Here
    'un' + 'believable' is one piece: the gradient forward still runs on the cache, over the prefix every row
    really shares (the length the no-grad path finds), and its logits are the whole prompt's."""
    clf = classifier("llama", bert_tokenizer, input_format="review : un{input}")
    b = clf.batch(["believable and moving", "believable"])
    template = clf.template_prefix_ids()
    shared = shared_prefix_length(b.input_ids, b.attention_mask, template)
    assert 4 <= shared < len(template), "the example no longer merges the slot with the prompt"
    e = clf.word_embeddings(b.input_ids)
    found = clf._gradient_prefix(e, b)
    assert found is not None and len(found) == shared
    clf.prefix_cache = False
    plain = clf.logits_from_embeddings(e, b)
    clf.prefix_cache = True
    clf.clear_prefix_cache()
    cached = clf.logits_from_embeddings(e, b)
    assert clf.prefix_kv().prefix_rows == 1
    assert (plain - cached).abs().max() < TOL
