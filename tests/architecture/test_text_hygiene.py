"""Text people type is kept as typed, minus what would show something else: control characters are refused in a
study's free-text fields (tab and line breaks kept where a field has lines), every CSV cell a spreadsheet would
run as a formula is neutralised by one function (one table of cases), and an address shown on a page is never
linked and copies as the characters typed (no invisible character added)."""
from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from app.text import md
from engine.annotation.text_fields import check_text
from engine.csv_safe import safe_cell
from engine.errors import InvalidInputError

# -- control characters in a study's fields ----------------------------------------------------------------------
REFUSED_ANYWHERE = ["name\x00", "\x1b[31mred", "bell\x07", "del\x7f", "nel\x85", "rtl \u202eevil", "iso \u2066x\u2069",
                    "lone \ud800 surrogate", "cr only\rhere"]


@pytest.mark.parametrize(("text", "multiline", "refused"), [
    *[(t, m, True) for t in REFUSED_ANYWHERE for m in (False, True)],
    ("tab\there", False, True), ("two\nlines", False, True),
    ("tab\there", True, False), ("two\nlines\n\n- a list", True, False), ("windows\r\nlines", True, False),
    ("<b>markup</b> **stays** [as](typed) =1+2", False, False), ("émoji 😀 日本語 ‏", False, False),
])
def test_control_characters_are_refused_naming_the_field_character_and_position(text, multiline, refused):
    if not refused:
        assert check_text(text, "the comment", multiline=multiline) == text
        return
    with pytest.raises(InvalidInputError, match=r"the comment holds .*U\+[0-9A-F]{4}.* at character \d+") as err:
        check_text(text, "the comment", multiline=multiline)
    assert ("line breaks" in str(err.value)) is multiline


@pytest.fixture()
def studies(tmp_path, monkeypatch):
    from engine.annotation.studies import StudyConfig, StudyStore
    from engine.plausibility import make_task

    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    tasks = [make_task("m", f"input {i}", ["a", "fine", "film"], {"grad-l2": [0.1, 0.9, 0.2], "random": [0.3, 0.2, 0.1]},
                       target=1, target_name="positive") for i in range(2)]
    config = StudyConfig(name="hygiene", model_id="m", measures=("grad-l2", "random"), n_examples=2,
                         tasks_per_annotator=1, overlap=1, attention_checks=0)
    return StudyStore(), config, tasks


def test_a_study_refuses_control_characters_in_its_name_instructions_names_and_comments(studies):
    """Each refused before anything is stored (the study, the invitation, the answer), with the field named;
    instructions keep their tabs and line breaks."""
    from dataclasses import replace

    store, config, tasks = studies
    with pytest.raises(InvalidInputError, match="the study name holds a null byte"):
        store.create(replace(config, name="evil\x00name"), tasks)
    with pytest.raises(InvalidInputError, match="the instructions holds a control character .U\\+001B"):
        store.create(replace(config, instructions="read \x1b[2J this"), tasks)
    with pytest.raises(InvalidInputError, match="the consent holds a bidirectional"):
        store.create(replace(config, consent="I agree \u202e"), tasks)
    assert not store.studies(), "nothing stored"
    study = store.create(replace(config, instructions="Rank them.\n\n\tThen submit."), tasks)
    with pytest.raises(InvalidInputError, match="the annotator name holds a null byte"):
        store.invite(study.id, ["al\x00ice"])
    token = store.invite(study.id, ["alice"])[0].token
    session = store.open_session(token)
    assignment = store.next_assignment(session)
    slots = [e.slot for e in assignment.task.explanations]
    with pytest.raises(InvalidInputError, match="the comment holds a null byte"):
        store.submit(session, assignment.assignment_id, ordering=slots, comment="fine\x00")
    assert store.submit(session, assignment.assignment_id, ordering=slots, comment="fine,\n\tthanks")
    assert [a.comment for a in store.answers(study.id)] == ["fine,\n\tthanks"]


# -- CSV cells: one function, one table ---------------------------------------------------------------------------
@pytest.mark.parametrize(("cell", "written"), [
    ("=1+1", "'=1+1"), ("+1+1", "'+1+1"), ("-1+1", "'-1+1"), ("@SUM(A1)", "'@SUM(A1)"),
    ('=HYPERLINK("http://evil")', "'=HYPERLINK(\"http://evil\")"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("\tplain", "'\tplain"),
    ("\n=1+1", "'\n=1+1"), ("\r\n@x", "'\r\n@x"), ("   =1+1", "'   =1+1"), (" \n -1+2", "' \n -1+2"),
    ("\u00a0=cmd", "'\u00a0=cmd"),
    ("plain", "plain"), ("a=b", "a=b"), ("  plain", "  plain"), ("\nplain", "\nplain"), ("", ""),
    ("-0.25", "-0.25"), ("+1e-3", "+1e-3"), ("-inf", "-inf"), ("nan", "nan"),
    (-0.25, -0.25), (3, 3), (None, None),
])
def test_every_csv_cell_a_spreadsheet_would_run_is_neutralised(cell, written):
    assert safe_cell(cell) == written


# -- addresses on a page ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["see http://evil.example/x?a=1&b=2 now", "HTTPS://evil.example", "www.evil.example",
                                  "mail me@evil.example", "ftp://files.example", "mailto:me@evil.example",
                                  "a`b http://x.example/`y`` end", "[x](http://evil.example)"])
def test_an_address_is_shown_unlinked_and_copies_as_typed(text):
    """The markdown holds no invisible character; rendered, the text a reader sees and copies is the text typed,
    and every address sits in a code span (GFM's autolink step never looks inside one), not in plain text."""
    out = md(text)
    assert "\u2060" not in out and "\u200b" not in out
    rendered = MarkdownIt("commonmark").render(out)
    shown = re.sub(r"<[^>]+>", "", rendered).replace("&amp;", "&").replace("&quot;", '"').replace("&lt;", "<") \
        .replace("&gt;", ">").strip()
    assert shown == text
    outside_code = re.sub(r"<code>.*?</code>", " ", rendered)
    assert not re.search(r"(?i)https?://|ftp://|mailto:|www\.|@\w", outside_code)
    assert "<a " not in rendered
