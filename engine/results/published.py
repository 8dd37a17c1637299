"""Published reference numbers shipped in results/published/ (citations in each CSV's header)."""
from __future__ import annotations

from io import StringIO
from pathlib import Path

import pandas as pd

from engine.errors import InvalidInputError
from engine.settings import PROJECT_ROOT

PUBLISHED_DIR = PROJECT_ROOT / "results" / "published"
TABLES = {
    "fmm_table1": "fmm_table1.csv",
    "recursive_roar_table2": "recursive_roar_table2.csv",
    "wiegreffe_pinter": "wiegreffe_pinter_tables.csv",
    "smat_table1": "smat_table1.csv",
    "madsen2024_selfexplain": "madsen2024_selfexplain.csv",
}


def load_published(name: str) -> tuple[pd.DataFrame, str]:
    """(table, citation): the citation is the CSV's '#' header, kept with the numbers."""
    if name not in TABLES:
        raise InvalidInputError(f"unknown published table {name!r}; known: {', '.join(TABLES)}")
    text = (Path(PUBLISHED_DIR) / TABLES[name]).read_text(encoding="utf-8")
    header = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return pd.read_csv(StringIO(body)), " ".join(header)
