"""Take a page's tables and charts away for a paper: every table as CSV (through engine.csv_safe, so a spreadsheet
never runs a cell as a formula), every chart as PNG, SVG and PDF.

Each file is made when its button is pressed, not when the page is drawn: st.download_button is handed a function
(Streamlit calls it on the click, on a thread of its own), so a page with a dozen charts pays nothing for them until
one is asked for.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.csv_safe import frame_to_csv


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV with formula-like text cells neutralised (engine.csv_safe.frame_to_csv)."""
    return frame_to_csv(frame).encode("utf-8")


def csv_button(frame: pd.DataFrame, stem: str, key: str, label: str = "CSV") -> None:
    """A download button for `frame` as `<stem>.csv`, built on the click."""
    st.download_button(label, lambda: csv_bytes(frame), file_name=f"{_safe_stem(stem)}.csv", mime="text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


def _safe_stem(stem: str) -> str:
    """A file name from store values (run, model and dataset names): letters, digits, '.', '_' and '-' only."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(stem)).strip("-") or "table"
