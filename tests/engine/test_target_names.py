"""A target class may be named, not only indexed: `Classifier.check_target` (the one place targets are resolved,
which explain_text, the measures' `attribute`, mask_single_input and the `explain` and `faithfulness` commands
use) takes a class index, a class name, or a prompted LM's label word, and refuses anything else with an
InvalidInputError (an EngineError) that lists the classes."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from engine.errors import EngineError, InvalidInputError
from engine.models.prompt_spec import PromptSpec
from engine.models.prompted import PromptedClassifier

TEXT = "a gripping , funny and moving film"


def test_an_encoders_classes_are_accepted_by_name_and_by_index(toy_classifier):
    """classes (negative, positive): the names (as given, or up to case and surrounding space), the indices (int,
    numpy int, a string of digits) name the same class; a list of names gives the same tensor as the indices."""
    assert toy_classifier.classes == ("negative", "positive")
    for given in ("positive", " Positive ", "POSITIVE", 1, np.int64(1), "1", torch.tensor(1)):
        assert toy_classifier.check_target(given) == 1, given
    assert toy_classifier.check_target("negative") == toy_classifier.check_target(0) == 0
    assert torch.equal(toy_classifier.check_targets(["negative", "positive"], 2).cpu(), torch.tensor([0, 1]))
    assert torch.equal(toy_classifier.check_targets("positive", 3).cpu(), torch.tensor([1, 1, 1]))


@pytest.mark.parametrize("bad", ["neutral", "pos", "2", "-1", "", 2, 0.5, None])
def test_anything_else_is_the_typed_error_listing_the_classes(toy_classifier, bad):
    """A name of no class, an index out of range, a fraction: an InvalidInputError naming every class (never the
    bare ValueError of int('neutral') it was)."""
    with pytest.raises(InvalidInputError) as caught:
        toy_classifier.check_target(bad)
    assert isinstance(caught.value, EngineError)
    assert "negative" in str(caught.value) and "positive" in str(caught.value)


def test_classes_named_by_numbers_are_matched_by_name(toy_classifier):
    """As for data labels (engine.data.labels): where a class name reads as a number, a string of digits is that
    class's name, not an index: classes ('1', '2') take '1' as class 0, and '0' names none."""
    numbered = copy.copy(toy_classifier)
    numbered.classes = ("1", "2")
    assert numbered.check_target("1") == 0 and numbered.check_target("2") == 1
    assert numbered.check_target(1) == 1  # a number (not a string) is always an index
    with pytest.raises(InvalidInputError, match="'1'"):
        numbered.check_target("0")


def test_explain_text_explains_the_named_class(toy_classifier):
    """explain_text(target='negative') explains class 0 ('given'), with the scores of target=0 to the bit; a name
    of no class is refused before any measure runs."""
    from engine.explain import explain_text

    named = explain_text(toy_classifier, TEXT, measures=["grad-l2"], target="negative")
    indexed = explain_text(toy_classifier, TEXT, measures=["grad-l2"], target=0)
    assert named.target == 0 and named.target_source == "given"
    assert np.array_equal(named.scores["grad-l2"], indexed.scores["grad-l2"])
    with pytest.raises(InvalidInputError, match="'negative'.*'positive'"):
        explain_text(toy_classifier, TEXT, measures=["grad-l2"], target="neutral")


def test_the_commands_take_a_class_name(toy_classifier, models_cache, capsys):
    """`explain --target positive` (refused by the parser before) explains that class; `explain` and
    `faithfulness` refuse a name of no class in one line naming the classes, exit code 2."""
    from engine.cli import main
    from engine.models import save_classifier

    save_classifier(copy.copy(toy_classifier), "toy-targets")
    assert main(["explain", "--model", "toy-targets", "--text", TEXT, "--measure", "grad-l2", "--target", "negative",
                 "--color", "never"]) == 0
    assert "explained class: negative (given)" in capsys.readouterr().out
    for command in (["explain", "--measure", "grad-l2"], ["mask", "--measure", "grad-l2"]):
        assert main([*command, "--model", "toy-targets", "--text", TEXT, "--target", "neutral"]) == 2
        err = capsys.readouterr().err
        assert "target 'neutral' names no class" in err and "'negative'" in err and "'positive'" in err


def _prompted() -> PromptedClassifier:
    """A random-weight 2-layer Llama over the packaged `tiny` BERT tokenizer, prompted with label words 'bad' for
    negative and 'good', 'great' for positive (as tests/engine/test_prompted.py builds them)."""
    import transformers
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    config = transformers.LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    spec = PromptSpec.from_dict({"instruction": "is the review positive or negative ?", "input_format": "review : {input}",
                                 "template": "plain", "answer_prefix": "answer :", "replacement": "special",
                                 "verbalizer": {"negative": ["bad"], "positive": ["good", "Great"]}})
    return PromptedClassifier(model, tokenizer, spec, max_length=96)


def test_a_prompted_lm_takes_its_verbalizers_words_as_targets():
    """A prompted LM's class is named by its class name or any of its label words ('great', 'Great'); the error for
    a word of neither lists the classes and the label words."""
    from engine.explain import explain_text

    clf = _prompted()
    assert clf.check_target("great") == clf.check_target("Great") == clf.check_target("good") == 1
    assert clf.check_target("bad") == clf.check_target("negative") == clf.check_target(0) == 0
    assert explain_text(clf, TEXT, measures=["grad-l2"], target="great").target == 1
    with pytest.raises(InvalidInputError) as caught:
        clf.check_target("awful")
    message = str(caught.value)
    assert "'negative'" in message and "'positive'" in message and "bad, good, great" in message
