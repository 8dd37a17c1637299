"""A study shows lay annotators words, not word pieces, and its colour legend names the colours drawn: the task's tokens are found in its text again and grouped into the words as typed; the study records its
choice (words by default, pieces on request; studies stored before the choice read as pieces); a rationale marks
whole words, and an instructed check names a word and expects all of its pieces; the legend's colour names are
those of engine/colours.py's colours."""
from __future__ import annotations

import colorsys
import html
import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import admin
from engine.annotation.studies import StudyConfig, StudyStore, make_checks
from engine.annotation.task_words import task_words, token_offsets
from engine.plausibility import make_task

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
TEXT = "Sanjay Mehta's gorgeous, witty film."


def test_a_real_tokenizers_pieces_group_into_the_words_as_typed(toy_classifier):
    """With the packaged tiny model's WordPiece tokens (`me ##hta`, `'`, `s`), every token lands in exactly one
    word, in order, and the words are the text's whitespace-separated words."""
    tokens = toy_classifier.maskable_tokens(toy_classifier.batch([TEXT]), 0)
    assert any(t.startswith("##") for t in tokens), tokens  # the check needs pieces
    words = task_words(TEXT, tokens)
    assert [w.text for w in words] == TEXT.split()
    assert [i for w in words for i in w.tokens] == list(range(len(tokens)))


def test_unknown_tokens_and_accents_are_placed_between_their_neighbours():
    """An uncased tokenizer strips accents and case; a token the vocabulary lacks ([UNK]) takes the text between
    the tokens around it."""
    text = "a great 😀 film — Café"
    tokens = ["a", "great", "[UNK]", "film", "—", "cafe"]
    assert [text[s:e] for s, e in token_offsets(text, tokens)] == ["a", "great", "😀", "film", "—", "Café"]
    assert [w.text for w in task_words(text, tokens)] == text.split()


def _hue_name(rgb: tuple[int, int, int]) -> str:
    """The plain colour word for an RGB colour's hue (degrees on the HSV wheel)."""
    h, _, _ = colorsys.rgb_to_hsv(*(c / 255 for c in rgb))
    degrees = h * 360
    for name, upper in (("red", 15), ("orange", 45), ("yellow", 70), ("green", 150), ("teal", 200), ("blue", 250),
                        ("purple", 300), ("pink", 345), ("red", 361)):
        if degrees < upper:
            return name
    raise AssertionError(degrees)


@pytest.fixture()
def study_store(tmp_path, monkeypatch, models_cache, toy_classifier):
    """Two studies over the same tasks (real tiny-model tokens of TEXT, signed scores), one shown as words (the
    default), one as pieces; served as to a network with an admin secret. Returns (store, {shown_as: token})."""
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, "a secret long enough for words")
    tokens = toy_classifier.maskable_tokens(toy_classifier.batch([TEXT]), 0)
    n = len(tokens)
    tasks = [make_task("m", TEXT, tokens, {"x": [(-1) ** i * (i + 1) / n for i in range(n)],
                                          "y": [1.0 / (i + 1) for i in range(n)]}, target=1, target_name="positive")]
    store = StudyStore()
    links = {}
    for shown_as in ("word", "token"):
        kw = {} if shown_as == "word" else {"shown_as": "token"}
        study = store.create(StudyConfig(name=f"study {shown_as}", model_id="m", measures=("x", "y"), n_examples=1,
                                         tasks_per_annotator=1, overlap=1, attention_checks=0,
                                         kinds=("ranking", "rationale"), **kw), tasks)
        links[shown_as] = store.invite(study.id, ["alice"])[0].token
    return store, links, tokens


def _task_page(token: str) -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=120)
    at.query_params["study_token"] = token
    at.run(timeout=120)
    at.checkbox(key="study_consent_box").check()
    at.run(timeout=120)
    at.button(key="study_start").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    return at


def _heatmap_texts(at: AppTest) -> list[list[str]]:
    return [[html.unescape(t) for t in re.findall(r">([^<>]+)</span>", h.proto.body)] for h in at.get("html")]


def test_a_study_shows_words_by_default_and_a_marked_word_is_all_its_pieces(study_store):
    store, links, tokens = study_store
    at = _task_page(links["word"])
    shown = _heatmap_texts(at)
    assert shown and all("Mehta's" in h for h in shown[:2]), shown
    assert not any(t.startswith("##") for h in shown for t in h), "no word piece is shown"
    picker = next(m for m in at.multiselect if m.key.startswith("study_rationale_"))
    assert list(picker.options)[:2] == ["Sanjay (#1)", "Mehta's (#2)"], picker.options
    picker.set_value([1])  # Mehta's
    at.run(timeout=120)
    expected = list(task_words(TEXT, tokens)[1].tokens)
    assert len(expected) > 1
    for slot in ("A", "B"):
        next(b for b in at.selectbox if b.key.endswith(f"_{slot}")).set_value(1 if slot == "A" else 2)
    next(b for b in at.button if b.label == "Submit and continue").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    (study,) = [s for s in store.studies() if s.config.shown_as == "word"]
    (answer,) = store.answers(study.id)
    assert list(answer.rationale) == expected, "a marked word stores every one of its tokens"


def test_a_study_can_show_word_pieces_and_records_its_choice(study_store):
    store, links, tokens = study_store
    at = _task_page(links["token"])
    shown = _heatmap_texts(at)
    assert shown[0][:len(tokens)] == list(tokens)
    recorded = {s.name: json.loads(json.dumps(s.config.shown_as)) for s in store.studies()}
    assert recorded == {"study word": "word", "study token": "token"}


def test_a_study_stored_before_the_choice_reads_as_word_pieces(study_store):
    """Those studies showed pieces: resuming one must not change what its annotators see mid-study."""
    from engine.annotation.studies.records import config_from_json, config_to_json

    config = StudyConfig(name="old", model_id="m", measures=("x", "y"))
    stored = json.loads(config_to_json(config))
    del stored["shown_as"]
    assert config_from_json(json.dumps(stored)).shown_as == "token"
    assert config_from_json(config_to_json(config)).shown_as == "word"


def test_an_instructed_word_check_names_a_word_and_expects_all_its_pieces(toy_classifier):
    tokens = toy_classifier.maskable_tokens(toy_classifier.batch([TEXT]), 0)
    task = make_task("m", TEXT, tokens, {"x": [1.0] * len(tokens)})
    words = task_words(TEXT, tokens)
    config = StudyConfig(name="c", model_id="m", measures=("x",), kinds=("rationale",))
    for seed in range(12):
        (check,) = make_checks([task], config, 1, seed=seed)
        number = int(re.search(r"word number (\d+)", check.note).group(1))
        assert f"\u201c{words[number - 1].text}\u201d" in check.note
        assert check.expected == {"tokens": list(words[number - 1].tokens)}


def test_the_legend_names_the_colours_drawn(study_store):
    """Signed heatmaps: the colour said to support the class is the positive end's hue, the one said to speak
    against it the negative end's (engine/colours.py); no other colour word appears."""
    from engine.colours import NEGATIVE, POSITIVE, UNSIGNED

    _store, links, _tokens = study_store
    at = _task_page(links["word"])
    legend = next(c.value for c in at.caption if "supports" in c.value)
    supports = re.search(r"(\w+): supports", legend).group(1)
    against = re.search(r"(\w+): speaks against", legend).group(1)
    assert (supports, against) == (_hue_name(POSITIVE), _hue_name(NEGATIVE)) == ("orange", "purple"), legend
    assert not {"red", "blue"} & set(re.findall(r"\w+", legend)), legend
    unsigned = re.search(r"unsigned ones: darker (\w+)", legend).group(1)  # the task has an unsigned explanation too
    assert unsigned == _hue_name(UNSIGNED) == "teal", legend
