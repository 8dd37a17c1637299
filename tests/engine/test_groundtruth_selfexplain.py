"""The report card's self-explanation rows (engine.groundtruth.selfexplain_card) on a planted prompted LM, built here
as in tests/engine/test_selfexplain.py: a random-weight tiny Llama with the packaged `tiny` BERT tokenizer (plain-text
prompt, [REDACTED] replacement), planted with a trigger "vessel" in its metadata. The model's answers are scripted
(a Generator whose generation step returns a fixed answer per request, through the real cache and parsing path),
and where the verdicts must be known its classification is the planted mechanism itself: "positive" iff the text
holds "vessel" (a model that flips, rather than abstains, when the trigger is removed).

The truth on a deciding input: an explanation is truly faithful iff it removes the decisive planted word(s)
(trigger: the word; and: either; or: both; none: no truth)."""
from __future__ import annotations

import argparse
import copy
import shlex

import numpy as np
import pandas as pd
import pytest
from card_stubs import card_stubs  # noqa: F401 (a fixture)
from tiny_lms import SENTIMENT_PROMPT, tiny_llama

from engine.errors import InvalidInputError, NotApplicableError
from engine.groundtruth.mechanisms import PlantSpec
from engine.groundtruth.selfexplain_card import (
    SELF_CARD,
    SelfExplanationCell,
    agrees,
    input_rows,
    names_word,
    removes_cause,
)
from engine.groundtruth.truth import Truth
from engine.selfexplain import Generator, SelfExplanation
from engine.stats import wilson_ci

pytestmark = pytest.mark.usefixtures("one_thread")
MODEL = "gt-toy-prompted-trigger"
SPEC = PlantSpec(base_dataset="rt", mechanism="trigger", words=("vessel",), rate=0.3, seed=0)
#: deciding inputs x+ (the trigger inserted) and the scripted answer to each request about them
INPUTS = {
    "u0": "a dull vessel film about the sea",
    "u1": "the plot was thin vessel and slow",
    "u2": "vessel a flat and lifeless story",
}
ANSWERS = {
    "attribution": {"u0": "vessel\ndull", "u1": "thin\nslow", "u2": "I'm sorry, I cannot help with that."},
    "redaction": {"u0": "a dull [REDACTED] film about the sea", "u1": "the plot was [REDACTED] vessel and slow",
                  "u2": "vessel a flat and lifeless story"},  # u2 redacts nothing: not parsable
    "counterfactual": {"u0": "a great vessel film about the sea", "u1": "the plot was rich and lively",
                       "u2": "As an AI, I cannot rewrite it."},
}


# -- the toy planted prompted LM --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def prompted_lm(tokenizer, replacement: str = "redacted", planted: PlantSpec | None = SPEC, model_id: str = MODEL):
    """A tiny random Llama behind a plain-text sentiment prompt (as tests/engine/test_selfexplain.py builds it), carrying
    `planted` in its metadata like a checkpoint of `python -m engine plant`."""
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    tok = copy.deepcopy(tokenizer)
    model = tiny_llama(tok)
    spec = PromptSpec.from_dict({**SENTIMENT_PROMPT, "replacement": replacement})
    metadata = {"id": model_id, "dataset": "rt-planted-toy"}
    if planted is not None:
        metadata["planted"] = planted.to_dict()
    return PromptedClassifier(model, tok, spec, max_length=96, metadata=metadata)


class ScriptedGenerator(Generator):
    """A Generator whose generation step answers from ANSWERS (by the request's kind and text) instead of running the
    LM; caching, prompts and everything after the answer are the real ones."""

    def _run(self, prompt, on_text, should_stop):
        self.generated += 1
        kind = ("attribution" if "List them" in prompt else "redaction" if "replaced by" in prompt
                else "counterfactual")
        uid = next(u for u, text in INPUTS.items() if prompt.rstrip().endswith(text))
        return ANSWERS[kind][uid], 1, 0.0


def trigger_classifies(judge, text: str):
    """The planted mechanism as the classification: positive iff the text holds "vessel", else negative (never an
    abstention: removing the trigger flips the class)."""
    name = "positive" if "vessel" in text.lower().split() else "negative"
    return name, {c: float(c == name) for c in judge.classes}


def fake_truth(classifier, spec: PlantSpec = SPEC) -> Truth:
    """A learned truth whose deciding inputs are INPUTS, each predicted positive (the target, index 1)."""
    inputs = pd.DataFrame({"uid": list(INPUTS), "planted": list(INPUTS.values()), "pred_planted": 1, "pred_clean": 0,
                           "decides": True})
    inputs["text"] = [t.replace("vessel ", "").replace(" vessel", "") for t in INPUTS.values()]
    rates = {"insertion_flip": {"k": 3, "n": 3, "rate": 1.0, "low": 0.44, "high": 1.0}}
    return Truth(model=classifier.id, spec=spec, target=1, inputs=inputs, rates=rates, learned=True,
                 reason="scripted", control=spec.mechanism == "none", options={"min_deciding": 1})


@pytest.fixture()
def planted_lm(bert_tokenizer, monkeypatch, tmp_path, card_stubs):  # noqa: F811
    """The toy planted prompted LM and its truth handed to the card (tests/card_stubs.py), the scripted generator in
    place of the real one (with its own cache file), and the store under tmp_path."""
    import engine.selfexplain
    from engine.selfexplain import GenerationCache

    classifier = prompted_lm(bert_tokenizer)
    card_stubs.classifiers[MODEL] = classifier
    card_stubs.truths[MODEL] = fake_truth(classifier)
    cache = GenerationCache(tmp_path / "generations.sqlite3")
    monkeypatch.setattr(engine.selfexplain, "Generator",
                        lambda clf, settings=None: ScriptedGenerator(clf, settings, cache=cache))
    return classifier


def run_cell(kind: str, tmp_path):
    from engine.groundtruth.card import card_store
    from engine.groundtruth.card_compute import compute_cell
    from engine.sweeps import run_cells

    store = card_store(tmp_path / "results" / "groundtruth")
    report = run_cells([SelfExplanationCell(MODEL, kind, limit=3)], compute_cell, store, "r")
    assert not report.failed, report.failed
    return store


def _by_uid(rows: pd.DataFrame, metric: str, rule: str = "") -> dict[str, float]:
    part = rows[(rows["metric"] == metric) & (rows["rule"].fillna("") == rule)]
    return dict(zip(part["uid"], part["value"]))


# -- names-planted and the truth, as functions -----------------------------------------------------------------
def _record(kind: str, text: str, explanation, edited: str | None = None) -> SelfExplanation:
    return SelfExplanation(index=0, kind=kind, text=text, label="positive", prediction="positive", probabilities={},
                           correct=True, verdict="unfaithful" if explanation is not None else "not parsable",
                           explanation=explanation, edited_text=edited)


@pytest.mark.parametrize("kind, explanation, edited, expected", [
    ("attribution", ["dull", "Vessel"], None, 1.0),            # named, in another case
    ("attribution", ["the vessel"], None, 1.0),                # a named phrase holding it
    ("attribution", ["dull", "film"], None, 0.0),
    ("attribution", ["vessels"], None, 0.0),                   # whole words only
    ("redaction", "x", "a dull [REDACTED] film", 1.0),
    ("redaction", "x", "a [REDACTED] vessel film", 0.0),
    ("counterfactual", "x", "a great film", 1.0),
    ("counterfactual", "x", "a great Vessel film", 0.0),
    ("attribution", None, None, float("nan")),                  # not parsable: no value
    ("redaction", None, None, float("nan")),
])
def test_names_planted_is_naming_for_attribution_and_removal_for_rewrites(kind, explanation, edited, expected):
    record = _record(kind, "a dull vessel film", explanation, edited)
    assert names_word(kind, record, "vessel") == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize("mechanism, named, truth", [
    ("trigger", [1.0], 1.0), ("trigger", [0.0], 0.0), ("graded", [1.0], 1.0), ("gated", [0.0], 0.0),
    ("decoy", [1.0], 1.0),
    ("and", [1.0, 0.0], 1.0), ("and", [0.0, 0.0], 0.0),       # either removal undoes an AND
    ("or", [1.0, 0.0], 0.0), ("or", [1.0, 1.0], 1.0),         # an OR needs both gone
    ("none", [], float("nan")), ("trigger", [float("nan")], float("nan")),
])
def test_the_truth_is_removing_the_decisive_words_per_mechanism(mechanism, named, truth):
    assert removes_cause(mechanism, named) == pytest.approx(truth, nan_ok=True)


def test_a_verdict_agrees_with_the_truth_when_faithful_matches_removing_the_cause():
    assert agrees("faithful", 1.0) == 1.0 and agrees("unfaithful", 0.0) == 1.0
    assert agrees("unfaithful", 1.0) == 0.0 and agrees("faithful", 0.0) == 0.0
    assert np.isnan(agrees("not parsable", 1.0)) and np.isnan(agrees("faithful", float("nan")))


def test_the_control_and_the_decoy_record_the_inert_word_lower_better_and_the_control_has_no_truth():
    record = _record("attribution", "a dull vessel lantern film", ["lantern"])
    verdicts = {"published": "faithful", "class-changed": "faithful"}
    none = pd.DataFrame(input_rows("attribution", record, verdicts, PlantSpec(mechanism="none", words=("lantern",))))
    assert "names-planted" not in set(none["metric"])
    inert = none[none["metric"] == "names-inert"].iloc[0]
    assert inert["value"] == 1.0 and inert["better"] == "lower"
    assert none[none["metric"] == "truth-agrees"]["value"].isna().all()
    decoy = pd.DataFrame(input_rows("attribution", record, verdicts,
                                    PlantSpec(mechanism="decoy", words=("vessel", "lantern"))))
    values = dict(zip(decoy["metric"], decoy["value"]))
    assert values["names-planted"] == 0.0 and values["names-inert"] == 1.0 and values["removes-cause"] == 0.0
    assert set(decoy[decoy["metric"] == "truth-agrees"]["value"]) == {0.0}  # called faithful, the trigger stays


# -- the cell, end to end --------------------------------------------------------------------------------------
def test_attribution_cell_names_the_trigger_and_the_published_rule_disagrees_with_the_truth(planted_lm, tmp_path,
                                                                                            monkeypatch):
    """u0 names "vessel": redacted, the model flips to negative instead of abstaining, so the published rule calls
    it unfaithful although it names the cause (disagrees), "class changed" calls it faithful (agrees); u1 names
    other words: the trigger stays, unfaithful under both rules (agrees); u2 is not parsable: no verdict, no
    agreement."""
    import engine.selfexplain.check as check

    monkeypatch.setattr(check, "classify", trigger_classifies)
    rows = run_cell("attribution", tmp_path).load("r")
    assert set(rows["method"]) == {SELF_CARD} and set(rows["measure"]) == {"self-explanation:attribution"}
    assert _by_uid(rows, "names-planted") == pytest.approx({"u0": 1.0, "u1": 0.0, "u2": float("nan")}, nan_ok=True)
    assert _by_uid(rows, "removes-cause") == pytest.approx({"u0": 1.0, "u1": 0.0, "u2": float("nan")}, nan_ok=True)
    verdict = rows[rows["metric"] == "verdict"]
    assert dict(zip(zip(verdict["uid"], verdict["rule"]), verdict["verdict"])) == {
        ("u0", "published"): "unfaithful", ("u0", "class-changed"): "faithful",
        ("u1", "published"): "unfaithful", ("u1", "class-changed"): "unfaithful",
        ("u2", "published"): "not parsable", ("u2", "class-changed"): "not parsable"}
    assert _by_uid(rows, "truth-agrees", "published") == pytest.approx(
        {"u0": 0.0, "u1": 1.0, "u2": float("nan")}, nan_ok=True)
    assert _by_uid(rows, "truth-agrees", "class-changed") == pytest.approx(
        {"u0": 1.0, "u1": 1.0, "u2": float("nan")}, nan_ok=True)
    assert set(rows[rows["uid"] == "u0"]["edited_text"]) == {"a [REDACTED] [REDACTED] film about the sea"}


@pytest.mark.parametrize("kind, names, agree", [
    ("redaction", {"u0": 1.0, "u1": 0.0}, {"published": {"u0": 0.0, "u1": 1.0}, "class-changed": {"u0": 1.0, "u1": 1.0}}),
    # a counterfactual is faithful iff the class becomes the opposite one: u1's edit drops the trigger and flips
    ("counterfactual", {"u0": 0.0, "u1": 1.0},
     {"published": {"u0": 1.0, "u1": 1.0}, "class-changed": {"u0": 1.0, "u1": 1.0}}),
])
def test_redaction_and_counterfactual_cells_score_the_rewrite_against_the_truth(planted_lm, tmp_path, monkeypatch,
                                                                              kind, names, agree):
    import engine.selfexplain.check as check

    monkeypatch.setattr(check, "classify", trigger_classifies)
    rows = run_cell(kind, tmp_path).load("r")
    got = _by_uid(rows, "names-planted")
    assert {u: got[u] for u in names} == names and np.isnan(got["u2"])  # u2's answer is not parsable
    for rule, expected in agree.items():
        got = _by_uid(rows, "truth-agrees", rule)
        assert {u: got[u] for u in expected} == expected and np.isnan(got["u2"])


def test_a_cell_keeps_every_prompt_and_answer_and_explains_the_predicted_class_without_skipping(planted_lm, tmp_path):
    """The real classification path (no scripted class): every input is explained (none skipped for a gold label:
    the label is the model's own prediction on x+), the provenance keeps each exact prompt and answer, and the
    cell's key names its kind apart from the store's cell type."""
    store = run_cell("counterfactual", tmp_path)
    (entry,) = store.provenance("r")
    records = entry["provenance"]["records"]
    assert [r["uid"] for r in records] == list(INPUTS)
    assert all(r["verdict"] != "skipped" and r["label"] == "positive" and r["target"] == "negative" for r in records)
    assert all(r["prompt"].rstrip().endswith(INPUTS[r["uid"]]) and r["answer"] == ANSWERS["counterfactual"][r["uid"]]
               for r in records)
    assert entry["cell"] == {"model": MODEL, "self_explanation": "counterfactual", "limit": 3, "seed": 0,
                             "max_new_tokens": 256, "kind": SELF_CARD}
    rows = store.load("r")
    assert set(rows.groupby("uid")["answer"].first()) == set(ANSWERS["counterfactual"].values())


# -- the table -------------------------------------------------------------------------------------------------
def _hand_rows() -> pd.DataFrame:
    """Four inputs of one attribution cell: names-planted 1, 1, 0, not parsable; published verdicts unfaithful,
    unfaithful, unfaithful, not parsable (agreeing 0, 0, 1); class changed faithful, faithful, unfaithful (1, 1, 1)."""
    rows = []
    for uid, named, pub, changed in (("u0", 1.0, "unfaithful", "faithful"), ("u1", 1.0, "unfaithful", "faithful"),
                                     ("u2", 0.0, "unfaithful", "unfaithful"), ("u3", None, "not parsable", "not parsable")):
        explanation = None if named is None else (["vessel"] if named else ["dull"])
        record = _record("attribution", "a dull vessel film", explanation)
        for row in input_rows("attribution", record, {"published": pub, "class-changed": changed}, SPEC):
            rows.append({"method": SELF_CARD, "model": "gt-smollm2-rt-trigger", "mechanism": "trigger",
                         "measure": "self-explanation:attribution", "uid": uid, **row})
    return pd.DataFrame(rows)


def test_the_table_shows_the_shares_and_wilson_intervals_of_hand_made_rows(monkeypatch):
    from engine.reports import groundtruth_tables
    from engine.reports.groundtruth_tables import selfexplain_markdown

    monkeypatch.setattr(groundtruth_tables, "_load", lambda root, run: _hand_rows())
    lines = selfexplain_markdown("r")(None).splitlines()
    lo, hi = wilson_ci(2, 3)
    alo, ahi = wilson_ci(1, 3)
    clo, chi = wilson_ci(3, 3)
    assert lines[2] == (f"| smollm2-rt-trigger (trigger) | attribution | 4 | 67% ({lo:.0%}-{hi:.0%}), 2/3 | "
                        f"0% / 75% / 25% | 33% ({alo:.0%}-{ahi:.0%}), 1/3 | 50% / 25% / 25% | "
                        f"100% ({clo:.0%}-{chi:.0%}), 3/3 |")
    assert "higher better" in lines[-1] and "lower better" in lines[-1]


def test_a_run_without_self_explanation_cells_says_so_in_one_line(monkeypatch):
    from engine.reports import groundtruth_tables
    from engine.reports.groundtruth_tables import selfexplain_markdown

    card_rows = pd.DataFrame([{"method": "report-card", "model": "m", "metric": "acu", "value": 0.1}])
    monkeypatch.setattr(groundtruth_tables, "_load", lambda root, run: card_rows)
    assert selfexplain_markdown("r")(None) == "(no self-explanation cells in results/groundtruth/r yet)"


# -- which cells a card has, the CLI, and the [REDACTED] operator ------------------------------------------------
@pytest.fixture()
def planted_encoder(card_stubs):  # noqa: F811
    """A hand-built planted sequence classifier (tests/handbuilt_models.py) with a learned truth, handed to the card."""
    from handbuilt_models import handbuilt

    classifier = handbuilt("or", k=5.0)
    classifier.metadata.update({"id": "handbuilt-planted", "planted": SPEC.to_dict()})
    card_stubs.classifiers["handbuilt-planted"] = classifier
    card_stubs.truths["handbuilt-planted"] = fake_truth(classifier)
    return classifier


def test_a_prompted_lm_gets_all_three_kinds_by_default_and_none_on_request(planted_lm):
    from engine.groundtruth.card_cells import card_cells

    options = dict(measures=("random",), operators=("mask",), metrics=("comprehensiveness",), limit=3)
    kinds = [c.kind for c in card_cells(MODEL, **options) if isinstance(c, SelfExplanationCell)]
    assert kinds == ["counterfactual", "attribution", "redaction"]
    assert not any(isinstance(c, SelfExplanationCell) for c in card_cells(MODEL, **options, self_explanations=()))
    with pytest.raises(InvalidInputError, match="counterfactual, attribution, redaction"):
        card_cells(MODEL, **options, self_explanations=("why",))
    with pytest.raises(InvalidInputError, match="max_new_tokens must be >= 1"):
        card_cells(MODEL, **options, max_new_tokens=0)


def test_an_encoder_gets_no_self_explanation_cells_and_refuses_them_when_asked(planted_encoder):
    from engine.groundtruth.card_cells import card_cells

    options = dict(measures=("random",), operators=("mask",), metrics=("comprehensiveness",), limit=3)
    assert not any(isinstance(c, SelfExplanationCell) for c in card_cells("handbuilt-planted", **options))
    with pytest.raises(NotApplicableError, match="need a prompted language model.*--self-explanations none"):
        card_cells("handbuilt-planted", **options, self_explanations=("attribution",))


def test_the_cli_refuses_self_explanations_for_an_encoder_before_any_work(planted_encoder):
    from engine.cli import report_card

    parser = argparse.ArgumentParser()
    report_card.configure(parser)
    args = parser.parse_args(["--model", "handbuilt-planted", "--measures", "random", "--self-explanations",
                              "attribution"])
    with pytest.raises(NotApplicableError, match="prompted language model"):
        report_card.run(args)


def test_the_help_example_of_a_prompted_lm_parses_into_its_kinds_and_none_runs_none():
    from engine.cli import build_parser
    from engine.cli.report_card import self_explanation_kinds

    parser = build_parser(["report-card"])
    sub = parser._subparsers._group_actions[0].choices["report-card"]
    examples = [line.strip().split("#")[0] for line in sub.epilog.replace("\\\n", " ").splitlines()
                if "--self-explanations" in line]
    parsed = [parser.parse_args(shlex.split(e)[3:]) for e in examples]
    assert [self_explanation_kinds(a.self_explanations) for a in parsed] == [("attribution", "redaction"), ()]
    assert parsed[0].max_new_tokens == 64
    assert self_explanation_kinds(None) is None  # not given: the default per model
    with pytest.raises(InvalidInputError, match="cannot go with attribution"):
        self_explanation_kinds(["none", "attribution"])


def test_the_redacted_operator_is_a_redacting_prompted_lms_own_replacement_and_refused_elsewhere(bert_tokenizer):
    from engine.groundtruth.card_plan import operator_classifier, supported_operators

    redacting = prompted_lm(bert_tokenizer)
    assert operator_classifier(redacting, "redacted") == (redacting, "mask")
    assert "redacted" in supported_operators(redacting)
    deleting = prompted_lm(bert_tokenizer, replacement="delete", model_id="toy-deleting")
    assert "redacted" not in supported_operators(deleting)
    with pytest.raises(NotApplicableError, match="supported here: mask, delete"):
        operator_classifier(deleting, "redacted")
