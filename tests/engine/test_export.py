"""Exports of an explanation: JSON and CSV hold the engine's scores per token, word and sentence with the
prediction and provenance; HTML and LaTeX print hostile text literally."""
from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pytest

from engine.explain import explain_text
from engine.export import explanation_record, latex_escape, to_csv, to_html, to_json, to_latex, write

HOSTILE = "Unredeemable <b>x</b> 5% film. Good!"  # within the toy model's 14 maskable tokens


@pytest.fixture(scope="module")
def explained(toy_classifier):
    result = explain_text(toy_classifier, HOSTILE, measures=("ig-sign", "grad-l2"))
    return result, explanation_record(result, toy_classifier, level="word", command="pytest")


def test_json_holds_the_engines_token_scores_and_word_sums(explained):
    result, record = explained
    back = json.loads(to_json(record))
    assert [t["text"] for t in back["tokens"]] == result.tokens
    for m in ("ig-sign", "grad-l2"):
        assert np.allclose([t["scores"][m] for t in back["tokens"]], result.scores[m], atol=1e-6)
        words = [w["scores"][m] for w in back["words"]]
        assert sum(words) == pytest.approx(float(result.scores[m].sum()), abs=1e-5), "sum keeps the total"
    assert [w["text"] for w in back["words"]][:2] == ["Unredeemable", "<b>x</b>"]
    assert back["prediction"]["predicted_class"] in back["prediction"]["classes"]
    prov = back["provenance"]
    assert prov["command"] == "pytest" and prov["code_version"] and prov["model_id"]
    assert back["measures"]["ig-sign"]["signed"] is True and "steps" in back["measures"]["ig-sign"]["options"]


def test_csv_rows_match_the_json_per_level(explained):
    result, record = explained
    table = pd.read_csv(io.StringIO(to_csv(record)), keep_default_na=False)
    tokens = table[table["level"] == "token"]
    assert list(tokens["text"]) == result.tokens
    assert np.allclose(tokens["ig-sign"].astype(float), result.scores["ig-sign"], atol=1e-6)
    words = table[table["level"] == "word"]
    assert np.allclose(words["ig-sign"].astype(float), [w["scores"]["ig-sign"] for w in record["words"]])
    assert set(table["level"]) == {"token", "word", "sentence"}
    assert (table["model_id"] == record["provenance"]["model_id"]).all()


def test_html_is_a_self_contained_page_with_the_text_escaped(explained):
    _, record = explained
    page = to_html(record)
    assert page.startswith("<!doctype html>")
    assert "<b>x" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert not re.search(r"<(link|img|iframe|script)\b", page) and "src=" not in page, "no external or active content"
    assert page.count('class="token-heatmap"') == 2 and page.count('class="colour-scale"') == 2


def _record(texts, scores):
    """A minimal export record over word units (what `to_latex` reads)."""
    return {"level": "word", "aggregation": "sum", "measures": {"m_1": {"signed": True, "options": {}}},
            "provenance": {"code_version": "x", "model_id": "toy\n\\end{document}", "weights_sha256": None,
                           "created": "now"},
            "words": [{"text": t, "scores": {"m_1": v}} for t, v in zip(texts, scores)]}


def test_latex_escapes_every_special_and_colours_every_unit():
    words = ["100%", "{fun}", "&", "$5", "#1", "a_b", "~x^2", "\\end{document}", "<b>"]
    tex = to_latex(_record(words, [1.0, -1.0, 0.5, None, 0.0, 0.1, -0.1, 0.2, 0.3]))
    body = "\n".join(line for line in tex.splitlines() if not line.startswith("%"))
    assert len(tex.splitlines()) == len(body.splitlines()) + 2, "the model id's line break stays inside its comment"
    assert body.count("\\colorbox[RGB]") == len(words)
    assert "100\\%" in body and "\\{fun\\}" in body and "\\&" in body and "\\$5" in body and "\\#1" in body
    assert "a\\_b" in body and "\\textasciitilde{}x\\textasciicircum{}2" in body and "m\\_1" in body
    assert "\\textbackslash{}end\\{document\\}" in body and "\\end{document}" not in body
    assert "\\textless{}b\\textgreater{}" in body
    unescaped = body.replace("\\{", "").replace("\\}", "")
    assert unescaped.count("{") == unescaped.count("}"), "braces balance"
    assert "\\colorbox[RGB]{230,97,1}" in body and "\\colorbox[RGB]{94,60,153}" in body, "the PuOr ends"


def test_latex_escape_prints_specials_literally():
    assert latex_escape("50% of {x}_1 & $y$ #2 ~ ^ \\") == (
        "50\\% of \\{x\\}\\_1 \\& \\$y\\$ \\#2 \\textasciitilde{} \\textasciicircum{} \\textbackslash{}")


def test_unknown_format_names_the_formats(explained):
    from engine.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="json, csv, html, latex"):
        write(explained[1], "pdf")


def test_cli_word_level_table_and_json_export(models_cache, toy_classifier, capsys, tmp_path):
    """`explain --level word` prints the words as typed; `--format json` writes the same scores as the engine."""
    from engine.cli import main
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-export")
    assert main(["explain", "--model", "toy-export", "--text", "an unredeemable mess", "--measure", "loo-sign",
                 "--level", "word", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "unredeemable" in out and "##" not in out and "word scores: sum" in out
    assert main(["explain", "--model", "toy-export", "--text", "an unredeemable mess", "--measure", "loo-sign",
                 "--color", "always"]) == 0
    coloured = capsys.readouterr().out
    assert "48;2;230;97;1m" in coloured or "48;2;94;60;153m" in coloured, "the largest score gets a full PuOr end"
    target = tmp_path / "x.json"
    assert main(["explain", "--model", "toy-export", "--text", "an unredeemable mess", "--measure", "loo-sign",
                 "--format", "json", "--output", str(target)]) == 0
    record = json.loads(target.read_text())
    engine_scores = explain_text(toy_classifier, "an unredeemable mess", measures=["loo-sign"]).scores["loo-sign"]
    assert np.allclose([t["scores"]["loo-sign"] for t in record["tokens"]], engine_scores, atol=1e-5)
    assert [w["text"] for w in record["words"]] == ["an", "unredeemable", "mess"]
    assert record["provenance"]["weights_sha256"], "a saved checkpoint's weights are hashed"


def test_csv_export_neutralises_formula_tokens_and_keeps_scores_numeric(toy_classifier):
    """Tokens and words such as '=HYPERLINK(...)', '@SUM' or '-2+3' are written with a leading apostrophe, so a
    spreadsheet shows them as text; the signed score columns still read back as (negative) numbers."""
    from engine.csv_safe import FORMULA_STARTS

    result = explain_text(toy_classifier, "=HYPERLINK(1) @SUM -2+3", measures=("ig-sign",))  # within 14 tokens
    text = to_csv(explanation_record(result, toy_classifier, level="word"))
    frame = pd.read_csv(io.StringIO(text), keep_default_na=False)
    for cell in frame.select_dtypes("object").to_numpy().ravel():
        assert not str(cell).startswith(FORMULA_STARTS), cell
    words = frame[frame["level"] == "word"]["text"].tolist()
    assert words == ["'=HYPERLINK(1)", "'@SUM", "'-2+3"]
    assert frame["ig-sign"].dtype == "float64" and (frame["ig-sign"] < 0).any()  # signed scores stay numbers
