"""AttnLRP (engine/importance/attnlrp.py, rules from lxt 2.1 via engine/importance/lrp_rules.py) on random-weight tiny
causal LMs built here with the packaged `tiny` BERT tokenizer (plain-text prompts):

- its relevance equals an independent, explicit layer-by-layer LRP computation (z-rule messages divided and
  multiplied out, no autograd) on a 1-layer Llama, and conservation holds exactly up to the softmax rule's
  absorbed term, which that computation measures;
- the scores come out in the same token layout as every other LLM measure (the input slot only);
- the rules are switched on for one thread and one call only: other measures' scores of the same model are
  bit-identical after an AttnLRP call, after one that raised, and in another thread while a call is running;
- it is offered for the Llama, Gemma 3 and Qwen2/3 prompted LMs, refused with the supported families named for
  the others and for encoders."""
from __future__ import annotations

import copy
import threading

import pytest
import torch

from engine.errors import NotApplicableError
from engine.importance import applicable_measures, get_explainer
from engine.importance.lrp_rules import FAMILIES, rules_installed
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (tests/conftest.py)

TEXTS = ["a gripping , funny and moving film", "dull , tedious and far too long"]
CONFIGS = {
    "llama": ("LlamaConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2}),
    "gemma3": ("Gemma3TextConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                                    "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"]}),
    "qwen2": ("Qwen2Config", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2}),
    "qwen3": ("Qwen3Config", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}),
    "gpt2": ("GPT2Config", {"n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 256}),
    "mistral": ("MistralConfig", {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8}),
}
# one classifier per check, so that no earlier check's memo or state can hide a change
ONE_WORD = {"negative": ["bad"], "positive": ["good"]}


def spec(**overrides) -> PromptSpec:
    base = {"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
            "template": "plain", "answer_prefix": "answer :", "examples": [{"input": "a delight", "label": "positive"}],
            "verbalizer": ONE_WORD, "replacement": "special"}
    base.update(overrides)
    return PromptSpec.from_dict(base)


@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def tiny(family: str, tokenizer, scale: float = 10.0, **config_overrides) -> PromptedClassifier:
    """A random-weight prompted LM of `family` (eager attention, float32); weights scaled by `scale` so that the
    attention is far from uniform and the softmax rule matters."""
    import transformers

    name, kwargs = CONFIGS[family]
    config = getattr(transformers, name)(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                         bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                                         **{**kwargs, **config_overrides})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(scale)
    tok = copy.deepcopy(tokenizer)
    return PromptedClassifier(model.eval(), tok, spec(), max_length=96)


# -- the independent computation ---------------------------------------------------------------------------------
def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _linear_back(x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor, r_z: torch.Tensor) -> torch.Tensor:
    """LRP z-rule (epsilon 0, no bias) for z = x W^T: R_x_i = sum_j x_i W_ji / z_j R_z_j."""
    return x * ((r_z / z) @ weight)


def explicit_attnlrp(clf: PromptedClassifier, text: str, target: int) -> tuple[torch.Tensor, float, float]:
    """AttnLRP of a 1-layer, 1-head Llama written out rule by rule in float64 (no autograd, no lxt): the input
    relevance R [T] (summed over the hidden units), the explained log-odds f_c, and the relevance the softmax rule
    absorbs (sum R_A - sum R_S). Rules (Achtibat et al. 2024): z-rule on linear maps and on the residual sums,
    identity on RMSNorm's 1/rms and on SiLU, uniform (halves) on the MLP's product and on both matrix products of
    the attention, the softmax's Taylor rule R_S = S * (R_A - A * sum_s R_A), rotary embeddings as per-position
    linear maps."""
    model = clf.model
    m, layer = model.model, model.model.layers[0]
    attention, mlp = layer.self_attn, layer.mlp

    def w(linear):
        return linear.weight.detach().double()

    def rms(x, norm):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon) * norm.weight.detach().double()

    batch = clf.batch(text)
    ids = batch.input_ids[0]
    T = ids.shape[0]
    x0 = clf.word_embeddings(ids[None])[0].detach().double()
    n1 = rms(x0, layer.input_layernorm)
    q, k, v = n1 @ w(attention.q_proj).T, n1 @ w(attention.k_proj).T, n1 @ w(attention.v_proj).T
    cos, sin = m.rotary_emb(x0[None].float(), torch.arange(T)[None])
    cos, sin = cos[0].double(), sin[0].double()
    eye = torch.eye(q.shape[-1], dtype=torch.float64)
    rotary = torch.diag_embed(cos) + _rotate_half(eye)[None] * sin[:, None, :]  # q'_t = q_t @ rotary[t]
    qr, kr = torch.einsum("td,tde->te", q, rotary), torch.einsum("td,tde->te", k, rotary)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    S = (qr @ kr.T) * attention.scaling
    A = torch.softmax(S.masked_fill(~allowed, float("-inf")), -1)
    o = A @ v
    a = o @ w(attention.o_proj).T
    x1 = x0 + a
    n2 = rms(x1, layer.post_attention_layernorm)
    g, u = n2 @ w(mlp.gate_proj).T, n2 @ w(mlp.up_proj).T
    product = torch.nn.functional.silu(g) * u
    f = product @ w(mlp.down_proj).T
    x2 = x1 + f
    h = rms(x2, m.norm)
    words = [toks[0] for _, toks in clf.label_word_tokens]
    head = model.get_output_embeddings().weight.detach().double()
    direction = head[words[target]] - head[words[1 - target]]
    last = int(batch.attention_mask[0].sum()) - 1
    f_c = float(h[last] @ direction)

    r_h = torch.zeros_like(h)
    r_h[last] = h[last] * direction
    r_x2 = r_h                                   # identity on the norm's 1/rms, the weight is a linear map
    r_x1, r_f = x1 / x2 * r_x2, f / x2 * r_x2   # z-rule on the residual sum
    r_product = _linear_back(product, w(mlp.down_proj), f, r_f)
    r_g = r_u = r_product / 2                    # uniform on act(g) * u; identity through SiLU
    r_x1 = r_x1 + _linear_back(n2, w(mlp.gate_proj), g, r_g) + _linear_back(n2, w(mlp.up_proj), u, r_u)
    r_x0, r_a = x0 / x1 * r_x1, a / x1 * r_x1
    r_o = _linear_back(o, w(attention.o_proj), a, r_a)
    ratio = r_o / o                              # o_td = sum_s A_ts v_sd, half to A and half to v
    r_A = A * (ratio @ v.T) / 2
    r_v = v * (A.T @ ratio) / 2
    r_S = torch.where(allowed, S * (r_A - A * r_A.sum(-1, keepdim=True)), torch.zeros((), dtype=torch.float64))
    ratio_S = torch.where(allowed, r_S / S, torch.zeros((), dtype=torch.float64)) * attention.scaling
    r_qr, r_kr = qr * (ratio_S @ kr) / 2, kr * (ratio_S.T @ qr) / 2
    r_q = q * torch.einsum("te,tde->td", r_qr / qr, rotary)
    r_k = k * torch.einsum("te,tde->td", r_kr / kr, rotary)
    r_x0 = r_x0 + (_linear_back(n1, w(attention.q_proj), q, r_q) + _linear_back(n1, w(attention.k_proj), k, r_k)
                   + _linear_back(n1, w(attention.v_proj), v, r_v))
    return r_x0.sum(-1), f_c, float(r_A.sum() - r_S.sum())


def test_attnlrp_equals_an_explicit_rule_by_rule_computation_and_conserves_up_to_the_softmax_term(bert_tokenizer):
    """On a 1-layer, 1-head Llama: every token's relevance (prompt included) equals the explicit computation (to
    1e-4 relative to the largest |R|: float32 model against float64 messages), its output is the explained
    log-odds, and sum_t R_t = f_c - (what the softmax rule absorbs) to 1e-4 of f_c: the only relevance not
    conserved is the softmax's, as the AttnLRP paper states (its Prop. 3.1 rule keeps a bias term)."""
    clf = tiny("llama", bert_tokenizer, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1)
    batch = clf.batch(TEXTS[0])
    imp = get_explainer("attnlrp", clf).attribute(batch)
    target = int(imp.target[0])
    relevance, f_c, absorbed = explicit_attnlrp(clf, TEXTS[0], target)
    got = imp.extras["relevance"][0].double()
    scale = relevance.abs().max()
    assert torch.allclose(got, relevance, atol=1e-4 * float(scale), rtol=0), (got - relevance).abs().max()
    assert abs(float(imp.extras["output"][0]) - f_c) <= 1e-4 * abs(f_c)
    assert abs(float(relevance.sum()) - (f_c - absorbed)) <= 1e-9 * max(1.0, abs(f_c))  # the explicit rules add up
    assert abs(float(imp.extras["relevance_total"][0]) - (f_c - absorbed)) <= 1e-4 * abs(f_c)
    assert abs(absorbed) > 1e-3 * abs(f_c)  # the softmax term is really exercised (not a trivially linear model)


def test_without_the_rules_the_same_pass_is_plain_gradient_times_input(bert_tokenizer):
    """The computation AttnLRP makes, run outside `lrp_rules`, gives x-grad-sign exactly (to float rounding): so the
    difference between the two measures is the rules alone, and the rules do change the scores."""
    clf = tiny("llama", bert_tokenizer)
    batch = clf.batch(TEXTS)
    plain = get_explainer("x-grad-sign", clf, memo=False).attribute(batch)
    explainer = get_explainer("attnlrp", clf, memo=False)
    e = clf.word_embeddings(batch.input_ids).detach()
    r, _, _ = explainer._relevance(e, batch.attention_mask, plain.target, clf.model.base_model.norm)
    r = torch.where(batch.maskable, r.float(), torch.zeros(()))
    assert torch.allclose(r, plain.scores, atol=1e-5, rtol=1e-4)
    lrp = explainer.attribute(batch, plain.target)
    assert not torch.allclose(lrp.scores, plain.scores, atol=1e-3)


@pytest.mark.parametrize("family", ["llama", "gemma3", "qwen2", "qwen3"])
def test_scores_are_the_relevance_of_the_slot_tokens_in_the_layout_of_the_other_measures(family, bert_tokenizer):
    """Per supported family: scores [B, T] with the same maskable layout as x-grad-sign, zero outside the slot,
    equal to the full relevance on the slot; slot + prompt relevance = relevance_total; with one single-token word
    per class and log-odds the head is linear (head_linear = output to 1e-5)."""
    clf = tiny(family, bert_tokenizer)
    batch = clf.batch(TEXTS)
    imp = get_explainer("attnlrp", clf).attribute(batch)
    other = get_explainer("x-grad-sign", clf).attribute(batch)
    assert imp.scores.shape == other.scores.shape and torch.equal(imp.maskable, other.maskable)
    assert (imp.scores[~imp.maskable] == 0).all() and torch.isfinite(imp.scores).all()
    relevance = imp.extras["relevance"]
    assert torch.allclose(imp.scores[imp.maskable], relevance[imp.maskable])
    assert torch.allclose(imp.extras["relevance_total"].float(), relevance.sum(1), atol=1e-5)
    assert torch.allclose(imp.extras["head_linear"], imp.extras["output"], atol=1e-5)
    assert imp.signed and imp.measure == "attnlrp"


def test_two_words_per_class_make_the_head_nonlinear_and_the_head_gap_is_reported(bert_tokenizer):
    """With two label words for a class, f_c is a difference of log-sum-exps: head_linear differs from the output
    (by the within-class entropy terms), and conservation_gap = network_gap + (head_linear - output)."""
    clf = tiny("llama", bert_tokenizer)
    clf = PromptedClassifier(clf.model, clf.tokenizer, spec(verbalizer={"negative": ["bad"], "positive": ["good", "great"]}),
                             max_length=96)
    x = get_explainer("attnlrp", clf).attribute(clf.batch(TEXTS)).extras
    assert (x["head_linear"] - x["output"]).abs().max() > 1e-4
    assert torch.allclose(x["conservation_gap"], x["network_gap"] + x["head_linear"] - x["output"], atol=1e-9)


# -- the rules stay inside the call --------------------------------------------------------------------------------
def _other_scores(clf, batch) -> dict[str, torch.Tensor]:
    return {name: get_explainer(name, clf, memo=False, **opts).attribute(batch).scores
            for name, opts in (("x-grad-sign", {}), ("grad-l2", {}), ("ig-sign", {"steps": 8, "max_steps": 8}))}


def _methods(family: str):
    import importlib

    family = next(f for f in FAMILIES if f.name == family)
    module = importlib.import_module(family.module)
    return [(module, "eager_attention_forward"), (getattr(module, family.mlp), "forward"),
            (getattr(module, family.norm), family.norm_method)]


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_other_measures_are_bit_identical_after_an_attnlrp_call_and_the_methods_are_restored(family, bert_tokenizer):
    """Gradient, grad-l2 and IG scores of the same model, computed without the memo, are bit-identical before and
    after an AttnLRP call, and every method lxt's rules replace is the very same object again."""
    clf = tiny(family, bert_tokenizer)
    batch = clf.batch(TEXTS)
    methods = {key: vars(key[0])[key[1]] for key in _methods(family)}
    before = _other_scores(clf, batch)
    get_explainer("attnlrp", clf, memo=False).attribute(batch)
    after = _other_scores(clf, batch)
    for name in before:
        assert torch.equal(before[name], after[name]), name
    assert not rules_installed()
    assert all(vars(owner)[attr] is methods[(owner, attr)] for owner, attr in methods)


def test_the_methods_are_restored_when_the_call_raises(bert_tokenizer):
    """A cancelled AttnLRP call (raising inside the rules) leaves no rule installed and the gradients unchanged."""
    from engine.errors import ExplanationCancelled

    clf = tiny("llama", bert_tokenizer)
    batch = clf.batch(TEXTS)
    methods = {key: vars(key[0])[key[1]] for key in _methods("llama")}
    before = _other_scores(clf, batch)
    with pytest.raises(ExplanationCancelled):
        get_explainer("attnlrp", clf, memo=False).attribute(batch, should_stop=lambda: True)
    broken = get_explainer("attnlrp", clf, memo=False)
    broken._relevance = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("inside the rules"))
    with pytest.raises(RuntimeError, match="inside the rules"):
        broken.attribute(batch)
    assert not rules_installed()
    assert all(vars(owner)[attr] is methods[(owner, attr)] for owner, attr in methods)
    after = _other_scores(clf, batch)
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_another_thread_computes_plain_gradients_while_the_rules_are_on(bert_tokenizer):
    """While one thread is inside `lrp_rules` (the dispatchers installed on the shared classes), another thread's
    x-grad-sign of the same model is bit-identical to its value with no rule installed; the first thread's
    forward does run the rules."""
    from engine.importance.lrp_rules import lrp_rules

    clf = tiny("llama", bert_tokenizer)
    batch = clf.batch(TEXTS)
    baseline = get_explainer("x-grad-sign", clf, memo=False).attribute(batch).scores
    inside, release, seen = threading.Event(), threading.Event(), {}

    def hold():
        with lrp_rules(clf.model):
            seen["installed"] = rules_installed()
            inside.set()
            release.wait(60)

    worker = threading.Thread(target=hold)
    worker.start()
    try:
        assert inside.wait(60) and seen["installed"]
        during = get_explainer("x-grad-sign", clf, memo=False).attribute(batch).scores
    finally:
        release.set()
        worker.join(60)
    assert torch.equal(baseline, during)
    assert not rules_installed()


# -- availability --------------------------------------------------------------------------------------------------
def test_offered_for_the_families_lxt_covers_and_refused_with_them_named_otherwise(bert_tokenizer):
    """attnlrp is among the applicable measures of Llama, Gemma 3 and Qwen2/3 prompted LMs; for GPT-2 and Mistral
    prompted LMs it is not, and a call raises NotApplicableError naming the supported families."""
    for family in ("llama", "gemma3", "qwen2", "qwen3"):
        assert "attnlrp" in applicable_measures(tiny(family, bert_tokenizer)), family
    for family in ("gpt2", "mistral"):
        clf = tiny(family, bert_tokenizer)
        assert "attnlrp" not in applicable_measures(clf)
        with pytest.raises(NotApplicableError, match="llama.*gemma3.*qwen2"):
            get_explainer("attnlrp", clf).attribute(clf.batch(TEXTS))


def test_not_offered_for_an_encoder_or_a_model_without_eager_attention(toy_classifier, bert_tokenizer):
    """An encoder classifier (BERT): not offered, the reason names prompted LMs and the families; a Llama running
    SDPA attention: refused, since lxt's attention rule wraps the eager function only."""
    ok, why = get_explainer("attnlrp", toy_classifier).supports()
    assert not ok and "prompted language models" in why and "llama" in why
    clf = tiny("llama", bert_tokenizer)
    clf.model.config._attn_implementation = "sdpa"
    ok, why = get_explainer("attnlrp", clf).supports()
    assert not ok and "eager" in why


def test_the_conservation_note_states_the_gap_and_its_two_parts(bert_tokenizer):
    """The line the CLI prints and the Explain page shows: the relevance total, the explained output and a gap equal
    to total - output, from an Importance's tensors and from an Explanation's lists alike; None for other measures."""
    from engine.explain import explain_text
    from engine.importance.attnlrp import conservation_note

    clf = tiny("llama", bert_tokenizer)
    result = explain_text(clf, TEXTS[0], measures=["attnlrp", "x-grad-sign"])
    extras = result.extras["attnlrp"]
    note = conservation_note(extras)
    total, output = extras["relevance_total"][0], extras["output"][0]
    assert f"{total:+.4f}" in note and f"{output:+.4f}" in note and f"gap {total - output:+.4f}" in note
    imp = get_explainer("attnlrp", clf).attribute(clf.batch(TEXTS[0]))
    assert conservation_note(imp.extras) == note
    assert conservation_note(result.extras.get("x-grad-sign", {})) is None


def test_without_the_lxt_package_it_is_not_offered_and_says_how_to_install_it(bert_tokenizer, monkeypatch):
    """With lxt not installed (find_spec finds nothing), attnlrp is not among a Llama's applicable measures, its
    reason names the pip command, and a call raises NotApplicableError saying the same."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "lxt" else real(name, *a))
    clf = tiny("llama", bert_tokenizer)
    assert "attnlrp" not in applicable_measures(clf)
    ok, why = get_explainer("attnlrp", clf).supports()
    assert not ok and "pip install --no-deps lxt==2.1" in why
    with pytest.raises(NotApplicableError, match="lxt==2.1"):
        get_explainer("attnlrp", clf).attribute(clf.batch(TEXTS))


@pytest.mark.parametrize("family", ["llama", "gemma3", "qwen2", "qwen3"])
def test_in_every_family_only_the_softmax_rule_loses_relevance(family, bert_tokenizer, monkeypatch):
    """Multi-layer, multi-head (grouped key/value heads) models of each family, where an explicit computation is not
    written out: the network gap (sum R - f_lin) equals minus the relevance the attention softmaxes absorb,
    sum over softmaxes of (sum A g_A - sum S g_S) / 2, recorded in the same pass (to 1e-5 of |f_c|): every other
    layer (norms, MLPs, q/k norms, rotary, residuals, Gemma 3's extra norms) conserves."""
    import torch.nn.functional as F

    records = []
    original = F.softmax

    def recording(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        if torch.is_grad_enabled() and x.requires_grad:
            x.retain_grad()
            out.retain_grad()
            records.append((x, out))
        return out

    from engine.importance.lrp_rules import lrp_rules

    clf = tiny(family, bert_tokenizer)
    batch = clf.batch(TEXTS[:1])
    imp = get_explainer("attnlrp", clf, memo=False).attribute(batch)
    e = clf.word_embeddings(batch.input_ids).detach().requires_grad_(True)
    monkeypatch.setattr(F, "softmax", recording)
    with lrp_rules(clf.model):  # the same pass, with every softmax's input and output kept for their gradients
        f = clf.explained_logits(clf.forward(inputs_embeds=e, attention_mask=batch.attention_mask).logits)
        f[0, int(imp.target[0])].backward()
    monkeypatch.undo()
    assert records
    absorbed = sum(float((a.detach().double() * a.grad.double()).sum() - (x.detach().double() * x.grad.double()).sum()) / 2
                   for x, a in records if a.grad is not None)
    network_gap = float(imp.extras["network_gap"][0])
    output = float(imp.extras["output"][0])
    assert abs(network_gap + absorbed) <= 1e-5 * max(1.0, abs(output)), (network_gap, absorbed)
    assert abs(absorbed) > 1e-3 * abs(output)  # the softmax term is exercised


def test_a_failure_while_installing_the_rules_leaves_nothing_installed(bert_tokenizer, monkeypatch):
    """If installing fails part-way (a transformers version without one of the patched names), the methods
    installed before the failure are put back and the error surfaces."""
    import engine.importance.lrp_rules as lrp_rules_module

    clf = tiny("llama", bert_tokenizer)
    methods = {key: vars(key[0])[key[1]] for key in _methods("llama")}
    real = lrp_rules_module._targets
    monkeypatch.setattr(lrp_rules_module, "_targets",
                        lambda family, lxt: [*real(family, lxt), (type("Missing", (), {}), "forward", None)])
    with pytest.raises(AttributeError):
        get_explainer("attnlrp", clf, memo=False).attribute(clf.batch(TEXTS))
    assert not rules_installed()
    assert all(vars(owner)[attr] is methods[(owner, attr)] for owner, attr in methods)


def test_the_explain_page_offers_attnlrp_for_a_registered_prompted_llama_and_shows_its_conservation(
        tmp_path, models_cache, bert_tokenizer):
    """A tiny prompted Llama registered with `models add --prompt` (the sidebar's only model): the Explain page
    offers attnlrp among its measures, draws its heatmap and shows the conservation line under it."""
    import json
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine.cli import main

    clf = tiny("llama", bert_tokenizer)
    folder = tmp_path / "tiny-llama"
    clf.model.save_pretrained(folder)
    clf.tokenizer.save_pretrained(folder)
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps(spec().to_dict()))
    assert main(["models", "add", str(folder), "--prompt", str(prompt), "--id", "tiny-lrp"]) == 0
    root = Path(__file__).resolve().parents[2]
    at = AppTest.from_file(str(root / "app" / "main.py"), default_timeout=120)
    at.run(timeout=120)
    at.switch_page(str(root / "pages" / "explain.py")).run(timeout=120)  # the app opens on the home page
    chooser = at.multiselect(key="explain_measures")
    assert "attnlrp" in chooser.options
    chooser.set_value(["attnlrp"])
    at.text_area(key="explain_text").input(TEXTS[0])
    at.button[0].click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert any("Relevance over every prompt token" in c.value and "softmax" in c.value for c in at.caption)
