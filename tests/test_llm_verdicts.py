"""Language-model verdicts that cannot be wrong silently (issue 34, items 1-3): a self-explanation reply is judged
only when it is the object asked for (engine.selfexplain.replies); IG, DeepLift and GradientSHAP check completeness
and IG raises its steps until its scores add up (engine.importance.completeness); prompt specs say what the model
reads (the plain template's newline, label words that do not start a new word)."""
from __future__ import annotations

import copy

import pytest
import torch

from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier
from engine.selfexplain import explain_one
from engine.selfexplain.parsing import parse_attribution, parse_counterfactual, parse_redaction
from engine.selfexplain.replies import check_rewrite, is_label_statement

TEXT = "a gripping , funny and moving film"
LABELS = ["negative", "positive", "Negative", "Positive", "neutral", "unknown"]
REFUSAL = "I'm sorry, but I cannot rewrite this text."

NOT_A_REWRITE = {
    "gibberish": "asdf qwer ###",
    "bare label": "positive",
    "statement about the label": "The sentiment is not positive.",
    "negated label": "not negative",
    "empty": "",
    "whitespace": "  \n\t ",
    "refusal": REFUSAL,
    "the input echoed": TEXT,
}
REWRITES = ["a dull , tedious and plodding film", "Here is the rewritten text:\n\na boring , unfunny and flat film",
            'Rewritten text: "a gripping , funny and moving film ? no , a dull one"']


# -- the rule, on the parsers ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_counterfactual_reply_that_is_not_a_rewrite_of_the_input_is_not_parsable(case):
    value, why = parse_counterfactual(NOT_A_REWRITE[case], TEXT, LABELS)
    assert value is None and why, case


@pytest.mark.parametrize("reply", REWRITES)
def test_counterfactual_rewrites_of_the_input_are_still_read(reply):
    value, why = parse_counterfactual(reply, TEXT, LABELS)
    assert value is not None and why == "", why


def test_counterfactual_rule_bounds_length_and_kept_words():
    """A rewrite keeps at least 30% of the input's words and stays within a factor of 3 of its length."""
    long_input = "the plot is thin but the actors carry it with charm and wit to the very end"
    assert not check_rewrite("it is bad", long_input)[0]                     # 3 words against 17
    assert not check_rewrite("an entirely different sentence about cooking pasta at home tonight", TEXT)[0]
    assert not check_rewrite(" ".join([TEXT + " but dull"] * 4), TEXT)[0]   # 36 words against 7
    assert check_rewrite("the plot is thin and the actors cannot carry it to the end", long_input)[0]


def test_label_statements_are_recognised_but_a_review_using_a_label_word_is_not_one():
    assert is_label_statement("The sentiment is not positive.", LABELS)
    assert is_label_statement("Negative", LABELS)
    assert not is_label_statement("a positive surprise of a film", LABELS)
    assert not is_label_statement("asdf qwer", LABELS)


@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_redaction_reply_that_is_not_a_redacted_copy_is_not_parsable(case):
    assert parse_redaction(NOT_A_REWRITE[case], source=TEXT, labels=LABELS)[0] is None, case


@pytest.mark.parametrize("reply", ["[REDACTED]", "[REDACTED] qwer asdf zxcv [REDACTED] uiop hjkl",
                                   "The sentiment is [REDACTED]."])
def test_redaction_reply_must_be_made_of_the_inputs_words(reply):
    assert parse_redaction(reply, source=TEXT, labels=LABELS)[0] is None


def test_a_genuine_redaction_is_still_read():
    assert parse_redaction("a gripping , [REDACTED] and [REDACTED] film", source=TEXT, labels=LABELS)[0] == \
        "a gripping , [REDACTED] and [REDACTED] film"


@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_attribution_reply_that_is_not_a_choice_of_the_inputs_words_is_not_parsable(case):
    assert parse_attribution(NOT_A_REWRITE[case], TEXT)[0] is None, case


def test_attribution_echo_of_a_short_input_is_not_parsable_but_a_choice_of_its_words_is():
    short = "a gorgeous , witty film"
    assert parse_attribution("a gorgeous, witty film", short)[0] is None     # every word named
    assert parse_attribution("gorgeous, witty", short)[0] == ["gorgeous", "witty"]


# -- the rule, through the whole check on a fake generator -----------------------------------------------------
@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def _tiny_prompted(tokenizer) -> PromptedClassifier:
    import transformers

    tok = copy.deepcopy(tokenizer)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=tok.pad_token_id,
                                      bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :",
                                 "verbalizer": {"negative": ["bad"], "positive": ["good"]}})
    return PromptedClassifier(model, tok, spec, max_length=96)


class FakeGenerator:
    """Answers every request with one fixed reply (no model generates it)."""

    def __init__(self, reply: str):
        self.reply = reply
        self.last_cached = False
        self.calls = 0

    def chat_prompt(self, request: str) -> str:
        return request

    def generate(self, prompt: str, **_) -> str:
        self.calls += 1
        return self.reply


@pytest.mark.parametrize("kind", ["counterfactual", "attribution", "redaction"])
@pytest.mark.parametrize("case", list(NOT_A_REWRITE))
def test_a_reply_that_is_not_the_requested_object_is_never_judged(bert_tokenizer, kind, case):
    """Before the rule, "positive", "not negative" or "asdf qwer ###" were classified again and could be judged
    faithful; now every such reply is "not parsable" and never classified again."""
    clf = _tiny_prompted(bert_tokenizer)
    gen = FakeGenerator(NOT_A_REWRITE[case])
    r = explain_one(clf, gen, kind, TEXT, label="positive", only_correct=False)
    assert gen.calls == 1
    assert r.verdict == "not parsable" and r.reason and r.reclassification is None, (kind, case, r.reason)


@pytest.mark.parametrize("kind, reply", [("counterfactual", "a dull , tedious and plodding film"),
                                         ("attribution", "1. funny\n2. gripping"),
                                         ("redaction", "a gripping , [REDACTED] and [REDACTED] film")])
def test_legitimate_replies_are_still_classified_again_and_judged(bert_tokenizer, kind, reply):
    clf = _tiny_prompted(bert_tokenizer)
    r = explain_one(clf, FakeGenerator(reply), kind, TEXT, label="positive", only_correct=False)
    assert r.verdict in ("faithful", "unfaithful") and r.reclassification is not None, r.reason
