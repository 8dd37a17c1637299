"""The Models page's plant form (app/plant_form.py): the spec it builds, the command it shows (one the CLI accepts,
meaning the same plant), its refusals, and the admin gate on the action. The planting itself runs end to end in
tests/browser/test_browser_groundtruth.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app import admin
from app.plant_form import parse_words, plant_command, plant_spec, progress_text
from engine.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[2]


def test_empty_words_take_the_mechanisms_defaults_and_q_and_gate_only_apply_where_used():
    """An empty word box plants the mechanism's default words; q reaches only a graded spec and the gate only a
    gated one (the form disables them elsewhere, but a stale value must not leak into another mechanism)."""
    from engine.groundtruth import DEFAULT_WORDS

    for mechanism, words in DEFAULT_WORDS.items():
        assert plant_spec("toy", mechanism, "", 0.3, 0.5, 0).words == words
    assert plant_spec("toy", "trigger", "", 0.3, 0.5, 0).q == 1.0
    assert plant_spec("toy", "graded", "", 0.3, 0.65, 0).q == 0.65
    assert plant_spec("toy", "trigger", "", 0.3, 1.0, 0, gate="not-after:not").gate == "first-half"
    assert plant_spec("toy", "gated", "", 0.3, 1.0, 0, gate="not-after:not").gate_word == "not"
    assert parse_words(" vessel, orbit ") == ("vessel", "orbit")


@pytest.mark.parametrize(("mechanism", "words", "gate", "says"), [
    ("or", "vessel", "first-half", "plants 2 word(s)"),
    ("trigger", "vessel orbit", "first-half", "plants 1 word(s)"),
    ("gated", "vessel", "inside", "unknown gate"),
])
def test_wrong_form_values_are_refused_with_the_alternatives(mechanism, words, gate, says):
    with pytest.raises(InvalidInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        plant_spec("toy", mechanism, words, 0.3, 1.0, 0, gate=gate)


def test_the_shown_command_is_accepted_by_the_cli_and_plants_the_same_spec():
    """The command under the form, parsed by `python -m engine plant`'s own parser, gives the same PlantSpec, model,
    strategy, epochs, learning rate, training limit and id (so copying it reproduces the plant)."""
    import argparse
    import shlex

    from engine.cli import plant
    from engine.groundtruth import PlantSpec

    spec = plant_spec("toy", "graded", "vessel", 0.25, 0.65, 3)
    line = plant_command(spec, "toy-model", "plain", 2, 100, "my-id", lr=3e-4)
    parser = argparse.ArgumentParser()
    plant.configure(parser)
    args = parser.parse_args(shlex.split(line)[4:])
    again = PlantSpec(base_dataset=args.dataset, mechanism=args.mechanism, words=tuple(args.words), rate=args.rate,
                      q=args.q, target=args.target, gate=args.gate, seed=args.seed)
    assert again == spec
    assert (args.model, args.strategy, args.epochs, args.lr, args.train_limit, args.id) == (
        "toy-model", "plain", 2, 3e-4, 100, "my-id")
    gated = plant_spec("toy", "gated", "vessel", 0.3, 1.0, 0, gate="not-after:not")
    args = parser.parse_args(shlex.split(plant_command(gated, "tiny", "masked", 1, 0, ""))[4:])
    assert args.gate == "not-after:not" and args.train_limit is None and args.id is None


def test_progress_events_read_as_a_fraction_and_words():
    assert progress_text({"stage": "train", "epoch": 1, "epochs": 2, "step": 5, "steps": 10, "loss": 0.5}) == (
        0.5, "epoch 1/2 · batch 5/10 · loss 0.500")
    fraction, words = progress_text({"stage": "validate", "epoch": 1, "val_unmasked": 0.9, "val_masked": 0.8})
    assert fraction is None and "unmasked 0.900" in words and "masked 0.800" in words
    assert progress_text({"stage": "test"})[0] == 1.0


def _plant_app() -> AppTest:
    def script():
        from app.plant_form import plant_form

        plant_form()

    return AppTest.from_function(script, default_timeout=120)


def test_served_to_a_network_the_plant_action_needs_the_admin(monkeypatch, models_cache, tmp_path):
    """Checked where it runs, not only by the page: a session that is not the admin who submits the form gets the
    refusal and nothing is planted (no dataset variant written, no checkpoint)."""
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, "correct horse battery staple")
    at = _plant_app()
    at.run()
    assert not at.exception
    at.selectbox(key="plant_dataset").set_value("toy")
    next(b for b in at.button if b.label == "Plant and fine-tune").click()
    at.run()
    assert any("needs the admin" in e.value for e in at.error), [e.value for e in at.error]
    assert not (tmp_path / "user" / "planted").exists() and not list(models_cache.glob("planted-*"))


def test_a_wrong_word_count_is_shown_as_an_error_and_nothing_is_planted(models_cache, tmp_path):
    at = _plant_app()
    at.run()
    at.selectbox(key="plant_mechanism").set_value("or")
    at.run()
    at.selectbox(key="plant_dataset").set_value("toy")
    at.text_input(key="plant_words").input("vessel")
    next(b for b in at.button if b.label == "Plant and fine-tune").click()
    at.run()
    assert not at.exception
    assert any("plants 2 word" in e.value for e in at.error), [e.value for e in at.error]
    assert not (tmp_path / "user" / "planted").exists() and not list(models_cache.glob("planted-*"))
