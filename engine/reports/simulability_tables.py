"""The docs' tables of simulability runs (SMaT): simulation accuracy per explainer and budget, and sentence-level
plausibility against bAbI's supporting facts."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from engine.errors import InvalidInputError


def _markdown(frame: pd.DataFrame, index_name: str) -> str:
    header = [index_name, *map(str, frame.columns)]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for index, row in frame.iterrows():
        lines.append("| " + " | ".join([str(index), *("" if pd.isna(v) else str(v) for v in row)]) + " |")
    return "\n".join(lines)


def simulation_accuracy(run: str) -> Callable[[Path], str]:
    """SMaT's Table 1 shape for one simulability run: explainers x student budgets, median [IQR] over seeds (%)."""
    def build(root: Path) -> str:
        from engine.simulability.results import load_simulability, simulation_table

        table = simulation_table(load_simulability(run, str(root)))
        if table.empty:
            raise InvalidInputError(f"simulability run {run!r} in {root} has no simulation accuracy")
        return _markdown(table, "explainer")

    return build


def sentence_plausibility(run: str) -> Callable[[Path], str]:
    """Sentence-level AUC of each explainer against bAbI's supporting facts in one simulability run."""
    def build(root: Path) -> str:
        from engine.simulability.results import load_simulability, plausibility_table

        table = plausibility_table(load_simulability(run, str(root)))
        lines = ["| explainer | sentence AUC | cells |", "|---|---|---|"]
        lines += [f"| {r.explainer} | {r._2:.3f} | {r.cells} |" for r in table.itertuples()]
        return "\n".join(lines)

    return build
