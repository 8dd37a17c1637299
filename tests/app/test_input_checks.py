"""What Explain and Step-by-step masking say about the input itself (app/input_check.py): a text the tokenizer
mostly does not know (emoji only: one [UNK]) is warned about next to its confident prediction; masking warns of
truncation as Explain does; masking refuses an empty text, in words, before MaSF is fitted; a picked test example
shows its gold label. On the toy classifier (its tokenizer knows no emoji), driven by Streamlit's AppTest."""
from __future__ import annotations

from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app.input_check import MOSTLY_UNKNOWN, check_input
from engine.errors import EmptyInputError

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
MASKING = str(ROOT / "pages" / "masking.py")
EXPLAIN = str(ROOT / "pages" / "explain.py")
EMOJI_ONLY = "😀🎬🍿"
UNKNOWN_WORDS = "does not know most of this text"

pytestmark = pytest.mark.usefixtures("one_thread")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=300)


def _explain_page() -> AppTest:
    """The Explain page of a fresh session (the app opens on the home page)."""
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(EXPLAIN)
    return _run(at)


def test_the_check_counts_unknown_tokens_and_truncation_and_words_its_refusals(toy_classifier):
    """Emoji only: every token the model reads is [UNK], so the input is mostly unknown and the warning names the
    token; an ordinary review has no warning; a long one is truncated; an empty or blank text is refused in words
    (no "input 0")."""
    emoji = check_input(toy_classifier, EMOJI_ONLY)
    assert emoji.n_tokens >= 1 and emoji.n_unknown == emoji.n_tokens and emoji.mostly_unknown
    assert any(UNKNOWN_WORDS in w and "[UNK]" in w for w in emoji.warnings())
    ordinary = check_input(toy_classifier, "the movie was really good and fun")
    assert ordinary.n_unknown == 0 and ordinary.warnings() == []
    some = check_input(toy_classifier, "good fun film 😀")  # three known words and one [UNK]: not most of it
    assert some.n_unknown == 1 and some.n_unknown <= MOSTLY_UNKNOWN * some.n_tokens and some.warnings() == []
    long = check_input(toy_classifier, "good fun " * 2000)
    assert long.truncated and any("truncated to" in w for w in long.warnings())
    for blank in ("", "   \n\t"):
        with pytest.raises(EmptyInputError) as err:
            check_input(toy_classifier, blank)
        assert "input 0" not in str(err.value) and "empty" in str(err.value)


def test_explain_warns_when_the_model_reads_next_to_nothing_of_the_text(cache_with_toy):
    at = _explain_page()
    at.text_area(key="explain_text").input(EMOJI_ONLY)
    at.button[0].click()
    _run(at)
    assert at.subheader[0].value.startswith("Prediction: "), "the prediction is still shown"
    assert any(UNKNOWN_WORDS in w.value for w in at.warning), [w.value for w in at.warning]
    at.text_area(key="explain_text").input("the movie was really good and fun")
    at.button[0].click()
    _run(at)
    assert not any(UNKNOWN_WORDS in w.value for w in at.warning)


def test_explain_shows_a_picked_examples_gold_label(cache_with_toy, toy_classifier):
    """The picker lists each example with its gold label, and once one is picked the page says its gold label
    beside the text and the prediction; an edited text is no longer that example."""
    from engine.data import get_dataset

    dataset = get_dataset("toy", toy_classifier.metadata.get("split_seed", 0))
    example = dataset.split("test")[3]
    gold = dataset.classes[example.label]
    at = _explain_page()
    box = at.selectbox(key="explain_example")
    assert box.options[4].startswith(f"3: [{gold}] "), box.options[:5]
    box.set_value(box.options[4])
    _run(at)
    assert at.text_area(key="explain_text").value == example.primary
    assert any(f"gold label is **{gold}**" in c.value for c in at.caption), [c.value for c in at.caption]
    at.button[0].click()
    _run(at)
    assert at.subheader[0].value.endswith(f"gold label: {gold}"), at.subheader[0].value
    at.text_area(key="explain_text").input(example.primary + " indeed")
    _run(at)
    assert not any("gold label" in c.value for c in at.caption)


def _masking_page() -> AppTest:
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(MASKING)
    return _run(at)


def test_masking_refuses_an_empty_text_in_words_before_fitting_masf(cache_with_toy, monkeypatch):
    """An empty text costs no MaSF fit (the fit can take minutes), and the message names no internal index."""
    import engine

    fits = []
    real = engine.load_or_fit_masf
    monkeypatch.setattr(engine, "load_or_fit_masf", lambda *a, **k: fits.append(a) or real(*a, **k))
    at = _masking_page()
    at.text_area(key="masking_text").input("   ")
    at.button(key="masking_run").click()
    _run(at)
    messages = [w.value for w in at.warning]
    assert any("The text is empty" in m for m in messages), messages
    assert not any("input 0" in m for m in messages)
    assert fits == [], "MaSF was fitted for an empty text"


def test_masking_warns_of_truncation_and_of_unknown_tokens_as_explain_does(cache_with_toy):
    at = _masking_page()
    at.selectbox(key="masking_measure").set_value("grad-l2")
    at.text_area(key="masking_text").input("good fun " * 200)
    at.button(key="masking_run").click()
    _run(at)
    assert any("truncated to" in w.value for w in at.warning), [w.value for w in at.warning]
    at.text_area(key="masking_text").input(EMOJI_ONLY + " " + EMOJI_ONLY)
    at.button(key="masking_run").click()
    _run(at)
    warnings = [w.value for w in at.warning]
    assert any(UNKNOWN_WORDS in w for w in warnings) and not any("truncated to" in w for w in warnings), warnings


def test_masking_draws_a_signed_measure_on_the_signed_scale(cache_with_toy):
    """LOO (signed: a token can speak against the class) is drawn orange/purple around a white 0, with the signed
    legend; grad-l2 (a magnitude) on the one-hue scale (the page once drew every measure unsigned)."""
    at = _masking_page()
    for measure, signed in (("loo-sign", True), ("grad-l2", False)):
        at.selectbox(key="masking_measure").set_value(measure)
        at.text_area(key="masking_text").input("the movie was really good and fun")
        at.button(key="masking_run").click()
        _run(at)
        at.slider(key="masking_slider").set_value(1)  # a step whose scores chose the tokens masked next
        _run(at)
        first = at.get("html")[0].proto.body
        assert "colour-scale" in first and ("(0 = white)" in first) == signed, measure
        assert any(("purple" in c.value) == signed for c in at.caption if "bar: the colour scale" in c.value)
