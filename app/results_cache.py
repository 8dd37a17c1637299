"""What the Benchmarks page reads and derives from the results stores, memoised per state of the store.

A Streamlit page reruns top to bottom on every widget change: without this module the Benchmarks page would read the
whole results store again (hundreds of parquet cells) and recompute the evaluation table, the cost plot's areas and
the budget run's bootstrap intervals on every click (docs/methods.md#notes-behind-the-code). Each function
here is keyed by the state of the store (a digest of engine.results.ResultsStore.fingerprint: one `stat` per cell,
no parsing) or of the files it reads, so a cell a running sweep writes shows on the next rerun, and nothing else is read or
recomputed. st.cache_data hands every caller its own copy (it pickles the value), so a caller may change it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st


def file_stamp(path: str | Path) -> tuple[int, int, int] | None:
    """(inode, mtime in ns, size in bytes) of a file, None when it is not there: what a cached read of one file is
    keyed by (a rewrite renames a new file in, so its inode changes even within a coarse mtime tick)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def state_of(store) -> str:
    """A digest of a ResultsStore's fingerprint: what the functions below are keyed by (Streamlit hashes a key's
    every element on every call; the fingerprint of the shipped store has hundreds)."""
    return hashlib.sha256(repr(store.fingerprint()).encode()).hexdigest()


@st.cache_data(show_spinner="Reading the results store ...", max_entries=4)
def store_rows(root: str, state: str) -> pd.DataFrame:
    """Every run's rows of the results store at `root` (ResultsStore.load()), read once per `state` (state_of)."""
    from engine.results import ResultsStore

    return ResultsStore(root).load()


def rows_of(store) -> pd.DataFrame:
    """`store.load()` of a ResultsStore, through the cache."""
    return store_rows(str(store.root), state_of(store))


@st.cache_data(show_spinner=False, max_entries=8)
def evaluation_table_of(root: str, state: str, run: str) -> pd.DataFrame:
    """engine.faithfulness.evaluation.evaluation_table of one run's erasure rows of the evaluation store at `root`
    (its per-measure means with bootstrap CIs and MaSF shares)."""
    from engine.faithfulness.evaluation import ERASURE, evaluation_table

    data = store_rows(root, state)
    return evaluation_table(data[(data["run"] == run) & (data["method"] == ERASURE)])


@st.cache_data(show_spinner=False, max_entries=8)
def area_table_of(root: str, state: str, run: str) -> pd.DataFrame:
    """engine.faithfulness.summary.area_metrics_table of every row of one run of the results store at `root`."""
    from engine.faithfulness.summary import area_metrics_table

    data = store_rows(root, state)
    return area_metrics_table(data[data["run"] == run])


@st.cache_data(show_spinner=False, max_entries=4)
def budget_run(root: str, run: str, stamps: tuple) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """(points, provenance, summary) of a budget run under the results root (engine.results.budget_pareto's
    load_run and summarise: a bootstrap interval per method and budget); `stamps`: the file_stamp of its points and
    provenance files."""
    from engine.results.budget_pareto import load_run, summarise

    table, provenance = load_run(run, root)
    return table, provenance, summarise(table)


@st.cache_data(show_spinner=False, max_entries=8)
def gold_auprc_of(root: str, state: str, models: tuple[str, ...]) -> pd.DataFrame:
    """app.faith_plausibility.gold_auprc_by_measure of these checkpoints over the rationale store at `root` (its
    per-measure AUPRC with BCa intervals over inputs)."""
    from app.faith_plausibility import gold_auprc_by_measure

    return gold_auprc_by_measure(set(models), results_dir=root)


@st.cache_data(show_spinner=False, max_entries=2)
def shipped_pairing_of(results_root: str, states: tuple[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """app.faith_plausibility.shipped_pairing of the results root; `states`: state_of its results store and of its
    rationale store."""
    from app.faith_plausibility import shipped_pairing

    return shipped_pairing(results_root)
