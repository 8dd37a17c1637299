"""The Benchmarks page's summary, what it opens on: the view's selectors (run, dataset, model, method, ...), the ranking
table of that view (ACU/RACU per measure with 95% intervals, best first) with the published numbers of the same task
beside ours in the same table, each measure one link from Explain on an example with that measure, and the paired
comparison of two measures. The other parts of the page (curves, MaSF, ROAR, ...) are drawn by pages/benchmarks.py,
one at a time, from the `View` chosen here.

Only the chosen run is read (a run's cells, once per state of its files): opening the page reads one run, not the
whole store (359 cells of the shipped results, seconds on 2 cores); a part that compares runs reads the rest itself.
The run the page opens on is found from the cells' file names (engine.results.store.cell_key starts with the model).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from app.column_labels import column_config
from app.follow_sidebar import follow, other_model_note
from app.text import md
from engine.results.store import RECURSIVE_MASKING, ResultsStore, cell_key, is_count_schedule

EXPLAIN = str(Path(__file__).resolve().parent.parent / "pages" / "explain.py")
RUN_KEY = "bench_run"
PART_KEY = "bench_part"
URL_APPLIED = "bench_url_applied"
#: the page's parts after the summary, each computed only when chosen (st.segmented_control), in reading order
PARTS = {"curves": "Curves", "masf": "MaSF", "roar": "ROAR", "plausibility": "Plausibility", "budget": "Budget",
         "compare": "Two models", "own": "Own explanations", "evaluation": "Evaluation suite"}
#: the README summary's recursive-masking runs, in its order (engine.reports.masking_tables.RACU_RUNS; a test keeps the two
#: equal: importing the report module costs over a second on 2 cores, on a page that must open in two)
HEADLINE_RUNS = ("tiny-rt-3seeds", "minilm-rt-3seeds", "tiny-babi1-3seeds", "minilm-babi1-full")
#: our dataset -> FMM's (Madsen et al. 2024, Table 1) row of the same task, or of another task (labelled so); as
#: engine.reports.masking_tables' SAME_TASK_FMM / OTHER_TASK_FMM (the same test keeps them equal)
SAME_TASK_FMM = {"rt": "SST2"}
OTHER_TASK_FMM = {"babi-1": "bAbI-2"}
PUBLISHED = "published_racu_pct"
METHOD_TITLE = {RECURSIVE_MASKING: "Recursive masking (no retraining)", "recursive-roar": "Recursive ROAR",
                "roar": "ROAR"}
METHOD_HELP = ("recursive masking: a masked-fine-tuned model is fed the masked inputs, no retraining (FMM). "
               "roar: the level-0 model ranks once, a model is retrained at every level (Hooker et al.). "
               "recursive-roar: the model retrained at the previous level ranks the next tokens (R-ROAR).")
SCHEDULE_HELP = ("ratio / quantile: a share of each input's tokens. count 0..N: k tokens per input (capped at its "
                 "length); ACU is then taken over k / N, so it stays a mean gap on the same scale.")
# The area table's reading order: the measure and its results first, the published number of the same task, then the
# CIs' methods.
AREA_ORDER = ["measure", "racu_pct", "racu_low", "racu_high", PUBLISHED, "published_racu_low", "published_racu_high",
              "acu_pct", "acu_low", "acu_high", "racu_clipped_pct", "racu_clipped_low", "racu_clipped_high", "seeds",
              "racu_ci", "acu_ci"]


@dataclass(frozen=True)
class View:
    """What the selectors chose: `data` the rows of one run, dataset, split, model, method, schedule, fine-tuning and
    set of examples, and the chosen measures; the x-axis of its curves (k tokens for a count schedule, else the
    share masked); `run_rows` every row of the run (before the filters)."""

    data: pd.DataFrame
    run_rows: pd.DataFrame
    run: str
    dataset: str
    split: str
    model: str
    method: str
    schedule: str

    @property
    def counted(self) -> bool:
        return is_count_schedule(self.schedule)

    @property
    def retrained(self) -> bool:
        return self.method != RECURSIVE_MASKING

    @property
    def k_max(self) -> float:
        """Count schedules store k / k_max as `ratio` (the x of ACU); the plots show k itself."""
        return float(self.data["count"].max()) if self.counted and not self.data.empty else 1.0

    @property
    def x_title(self) -> str:
        return "tokens masked per input (k)" if self.counted else "fraction of tokens masked"

    @property
    def x_format(self) -> str | None:
        return None if self.counted else ".0%"


# -- reading: one run at a time ------------------------------------------------------------------------------------
@st.cache_data(show_spinner="Reading the run ...", max_entries=16)
def _run_rows(root: str, run: str, fingerprint: tuple) -> pd.DataFrame:
    return ResultsStore(root).load(run)


def run_rows(store: ResultsStore, run: str) -> pd.DataFrame:
    """Every row of one run, read once per state of its cell files (ResultsStore.run_fingerprint: one `stat` each)."""
    return _run_rows(str(store.root), run, store.run_fingerprint(run))


def _has_cells_of(store: ResultsStore, run: str, model_id: str) -> bool:
    prefix = cell_key({"model": model_id}).rsplit("_", 1)[0]
    return any((store.root / run / "cells").glob(f"{prefix}_*.json"))


def opening_run_of(store: ResultsStore, model_id: str | None = None) -> str | None:
    """app.benchmark_views.opening_run without reading the store: the headline run of the sidebar's model where one
    holds its cells (found by the cells' file names), else any run of it, else the first headline run stored, else
    the first run of recursive masking (read run by run until one is found), else the first run; None without runs."""
    runs = store.runs()
    if not runs:
        return None
    headline = [run for run in HEADLINE_RUNS if run in runs]
    if model_id:
        for run in headline + runs:
            if _has_cells_of(store, run, model_id):
                return run
    if headline:
        return headline[0]
    for run in runs:
        rows = run_rows(store, run)
        if not rows.empty and (rows["method"] == RECURSIVE_MASKING).any():
            return run
    return runs[0]


@st.cache_data(show_spinner=False, max_entries=8)
def first_example(dataset: str, split: str, split_seed: int = 0) -> tuple[str, str | None] | None:
    """(text, auxiliary) of the first input of a dataset's split, None when the dataset cannot be loaded: what a
    link from a ranking opens Explain on."""
    from engine.data import get_dataset
    from engine.errors import EngineError

    try:
        example = get_dataset(dataset, split_seed).split(split)[0]
    except (EngineError, OSError, IndexError, KeyError, ValueError):
        return None
    return example.primary, example.auxiliary or None


# -- the selectors -------------------------------------------------------------------------------------------------
def apply_url(runs: list[str]) -> None:
    """A shared or linked view (`/benchmarks?run=...&part=...`, e.g. from Explain's standing of a measure) chooses the
    run and the part once per URL, before their widgets are drawn."""
    view = {k: st.query_params[k] for k in ("run", "part") if k in st.query_params}
    if not view or st.session_state.get(URL_APPLIED) == view:
        return
    if view.get("run") in runs:
        st.session_state[RUN_KEY] = view["run"]
    if view.get("part") in PARTS:
        st.session_state[PART_KEY] = view["part"]
    st.session_state[URL_APPLIED] = view


def select_view(store: ResultsStore, model_id: str | None) -> View | None:
    """Draw the selectors and return the chosen view; None (with a message) when the store has no run or the chosen
    run has no rows yet."""
    from engine.faithfulness.summary import preferred_example_set

    runs = store.runs()
    apply_url(runs)
    if not runs:
        st.info(f"The results store ({md(store.root)}) has no benchmark runs yet. Produce one with "
                "`python -m engine mask-sweep --help`.")
        return None
    # open on the sidebar's model's headline run (not the first name in the list), and move to its run when the
    # sidebar's model changes
    follow(RUN_KEY, runs, choose=lambda: opening_run_of(store, model_id))
    c1, c2, c3 = st.columns(3)
    run = c1.selectbox("Run", runs, key=RUN_KEY)
    everything = run_rows(store, run)
    if everything.empty:
        st.info(f"Run {md(repr(run))} has no finished cell yet.")
        return None
    data = everything
    dataset = c2.selectbox("Dataset", sorted(data["dataset"].unique()), key="bench_dataset")
    data = data[data["dataset"] == dataset]
    splits = sorted(data["split"].unique())
    if len(splits) > 1:
        # format_func=md: radio options render markdown, and these values come from the results store
        # A sweep of another split in the same run measures other examples: one split at a time.
        data = data[data["split"] == st.radio("Split", splits, horizontal=True, key="bench_split", format_func=md)]
    split = data["split"].iloc[0]
    models = sorted(data["base_model"].dropna().unique())
    follow("bench_model", models)
    model = c3.selectbox("Model", models, key="bench_model")
    other_model_note(model, "no benchmark run here measured it (compute one in the form above, or "
                            "`python -m engine benchmark --help`).")
    data = data[data["base_model"] == model]
    methods = sorted(data["method"].unique())
    method = st.radio("Method", methods, horizontal=True, key="bench_method", help=METHOD_HELP) if len(methods) > 1 else methods[0]
    data = data[data["method"] == method]
    # A run may hold several masking schedules (ROAR by quantile and by count) or checkpoints fine-tuned
    # differently (masked, plain): their curves share no x-axis or model, so one of each is shown at a time.
    schedules = sorted(data["schedule"].unique())
    schedule = (st.radio("Masking schedule", schedules, horizontal=True, key="bench_schedule", help=SCHEDULE_HELP)
                if len(schedules) > 1 else schedules[0])
    data = data[data["schedule"] == schedule]
    data = data.assign(strategy=data["strategy"].fillna("unknown"))  # a checkpoint that did not record it
    strategies = sorted(data["strategy"].unique())
    if len(strategies) > 1:
        data = data[data["strategy"] == st.radio("Fine-tuning", strategies, horizontal=True, key="bench_strategy",
                                                 format_func=md)]
    grids = sorted(data["grid"].unique(), key=lambda g: (len(g.split(",")), g))
    if len(grids) > 1:
        # Cells of one run masked on different lists of levels (`--ratios` changed between sweeps): one at a time.
        data = data[data["grid"] == st.radio("Levels", grids, horizontal=True, key="bench_grid", format_func=md,
                                             help="The masking levels of the cells; curves on different levels are not pooled.")]
    measures = sorted(data["measure"].unique())
    if st.session_state.get("bench_measure_options") != measures:
        # Another run, dataset, model or method: start from all of its measures (a widget keeps its old choice,
        # filtered to the new options, which would silently hide most measures of the new view).
        st.session_state["bench_measure_options"] = measures
        st.session_state["bench_measures"] = measures
    chosen = st.multiselect("Measures", measures, key="bench_measures")
    data = data[data["measure"].isin(chosen)]
    if data["n_examples"].nunique() > 1:
        # A run may hold the whole split for most measures and a subset for an expensive one (beam), each with
        # its own random baseline: show one set of examples at a time (after the measure filter, whose options
        # span both, so a choice of measures survives switching).
        counts = sorted(int(n) for n in data["n_examples"].dropna().unique())
        n_examples = st.radio("Examples", counts, index=counts.index(preferred_example_set(data)), horizontal=True,
                              key="bench_examples", format_func=lambda n: f"first {n} of the {split} split",
                              help="Measures computed on a subset are compared with the random baseline on the same subset.")
        data = data[data["n_examples"] == n_examples]
    return View(data=data, run_rows=everything, run=run, dataset=dataset, split=split, model=model, method=method,
                schedule=schedule)


# -- the ranking table with the published numbers beside ours -------------------------------------------------------
def published_row(dataset: str) -> tuple[pd.DataFrame, str] | None:
    """(FMM's Table 1 rows of the task compared with `dataset`, indexed by measure; the column's label), or None when
    FMM published nothing comparable. Another task is labelled so."""
    from engine.results.published import load_published

    if dataset in SAME_TASK_FMM:
        row, label = SAME_TASK_FMM[dataset], f"FMM {SAME_TASK_FMM[dataset]} RACU % (published)"
    elif dataset in OTHER_TASK_FMM:
        row, label = OTHER_TASK_FMM[dataset], f"FMM {OTHER_TASK_FMM[dataset]} RACU % (published, another task)"
    else:
        return None
    table, _ = load_published("fmm_table1")
    return table[table["dataset"] == row].set_index("importance_measure"), label


def with_published(table: pd.DataFrame, dataset: str, method: str) -> tuple[pd.DataFrame, str | None]:
    """The area table with FMM's published RACU of the same task (and its 95% interval) in three more columns, for
    recursive masking without retraining (what FMM measured); (table unchanged, None) where nothing is comparable.
    A measure FMM did not publish gets NaN there (never another measure's number)."""
    found = published_row(dataset) if method == RECURSIVE_MASKING else None
    if found is None or table.empty:
        return table, None
    fmm, label = found
    out = table.copy()
    out[PUBLISHED] = out["measure"].map(fmm["racu_pct"]).astype(float)
    out["published_racu_low"] = out[PUBLISHED] - out["measure"].map(fmm["racu_minus"]).astype(float)
    out["published_racu_high"] = out[PUBLISHED] + out["measure"].map(fmm["racu_plus"]).astype(float)
    return out, label


NOT_PUBLISHED = "not published"
PUBLISHED_COLUMNS = (PUBLISHED, "published_racu_low", "published_racu_high")


def published_as_text(table: pd.DataFrame) -> pd.DataFrame:
    """The ranking as shown: the published columns as text with one decimal, and where the paper has no number for a
    measure, "not published" (its interval columns an em dash) instead of a blank the grid draws as "None"."""
    out = table.copy()
    for column in PUBLISHED_COLUMNS:
        if column in out:
            missing = NOT_PUBLISHED if column == PUBLISHED else "\u2014"
            out[column] = [missing if pd.isna(v) else f"{v:.1f}" for v in out[column]]
    return out


def column_order(table: pd.DataFrame) -> list[str]:
    """Results first; a grouping column is shown only where it varies (the filters above name the rest)."""
    varying = [c for c in table.columns if c not in AREA_ORDER and table[c].nunique(dropna=False) > 1]
    return [c for c in AREA_ORDER if c in table.columns] + varying


@st.cache_data(show_spinner=False, max_entries=32)
def _areas(data: pd.DataFrame) -> pd.DataFrame:
    from engine.faithfulness.summary import area_metrics_table

    return area_metrics_table(data)


def explain_model(view: View, model_id: str | None) -> str | None:
    """The model a link from the ranking opens Explain with: one of the run's own checkpoints where the catalogue
    has it (the sidebar's first, when it is one), else the sidebar's model, else None."""
    from app.shared import usable_checkpoints

    known = {m.id for m in usable_checkpoints()}
    own = [m for m in sorted(view.data["model"].dropna().unique()) if m in known] if "model" in view.data else []
    if model_id in own:
        return model_id
    return own[0] if own else model_id


def explain_links(view: View, measures: list[str], model_id: str | None, key: str = "bench") -> None:
    """One link per ranked measure into Explain, on the first input of the view's dataset and split, with that measure
    alone (Explain's shareable view: explained at once)."""
    from app.trust import measure_words

    model = explain_model(view, model_id)
    example = first_example(view.dataset, view.split)
    if model is None or example is None or not measures:
        return
    text, aux = example
    st.caption(f"Open a measure in Explain on an example (the first {md(view.split)} input of {md(view.dataset)}) with "
               f"{md(model)}:")
    for row in range(0, len(measures), 4):
        for col, (i, measure) in zip(st.columns(4), list(enumerate(measures))[row:row + 4]):
            query = {"model": model, "text": text, "measures": measure}
            if aux:
                query["aux"] = aux
            col.page_link(EXPLAIN, label=f"{i + 1}. {measure_words(measure)}", icon=":material/search:",
                          query_params=query)


@st.cache_data(show_spinner=False, max_entries=32)
def _compared(data: pd.DataFrame, a: str, b: str) -> dict:
    """engine.faithfulness.summary.compare_measures of one view's rows, once per rows and pair (its per-seed areas and
    bootstrap were recomputed on every rerun, collapsed expander or not)."""
    from engine.faithfulness.summary import compare_measures

    return compare_measures(data, a, b)


def paired_comparison(data: pd.DataFrame, measures: list[str]) -> None:
    """Is one measure more faithful than another on these seeds? RACU of a - b per seed, paired."""
    if len(measures) < 2:
        return
    with st.expander("Paired comparison of two measures"):
        c1, c2 = st.columns(2)
        a = c1.selectbox("Measure A", measures, index=0, key="bench_pair_a")
        b = c2.selectbox("Measure B", measures, index=1, key="bench_pair_b")
        if a == b:
            st.info("Pick two different measures.")
            return
        try:
            res = _compared(data, a, b)
        except ValueError as err:
            st.info(f"No paired comparison: {md(err)}")
            return
        if res["n"] == 0:
            st.info(f"{md(a)} and {md(b)} have no seed with a RACU for both (a flat random curve leaves RACU undefined).")
            return
        m1, m2, m3 = st.columns(3)
        m1.metric(f"RACU of {md(a)} - {md(b)}", f"{res['mean_difference']:+.1f} points")
        m2.metric("95% BCa CI", "none" if pd.isna(res["ci_low"]) else f"{res['ci_low']:+.1f} to {res['ci_high']:+.1f}")
        m3.metric("sign-flip p-value", "none" if pd.isna(res["p_value"]) else f"{res['p_value']:.3f}")
        st.caption(f"Paired over the {res['n']} seeds both measures have ({', '.join(map(str, res['seeds']))}): each seed's "
                   f"fine-tuned model is explained by both. The exact sign-flip test cannot go below "
                   f"{res['smallest_p_possible']:.3g} with {res['n']} seeds, however large the difference: more seeds, "
                   "not a larger effect, make it significant.")


def render_summary(view: View | None, model_id: str | None) -> None:
    """The ranking of the view's measures with the published numbers beside them, the links into Explain, the paired
    comparison, and the published tables (drawn with nothing else computed)."""
    from app.figure_export import csv_button
    from app.figure_export import table as table_view

    if view is not None:
        st.subheader(f"Ranking: {md(METHOD_TITLE.get(view.method, view.method))} of {md(view.model)} on "
                     f"{md(view.dataset)}")
        try:
            table = _areas(view.data)
        except ValueError as err:  # e.g. two checkpoints for one seed in one run: no pairing is meaningful
            st.error(f"ACU/RACU cannot be computed for this view: {md(err)}")
        else:
            if table.empty:
                st.info("ACU/RACU need the `random` baseline in the same run.")
            else:
                table, published = with_published(table, view.dataset, view.method)
                ranked = [m for m in table["measure"] if m != "random"]
                best = table[table["measure"] != "random"].head(1)
                if not best.empty:
                    r = best.iloc[0]
                    interval = ("" if pd.isna(r["racu_low"]) else
                                f" (95% CI {r['racu_low']:.1f} to {r['racu_high']:.1f})")
                    st.markdown(f"**{md(r['measure'])}** ranks first here: RACU {r['racu_pct']:.1f}%{interval}, "
                                f"higher: more faithful; {len(ranked)} measures against the random baseline.")
                st.caption("Higher ACU and RACU: the measure's curve falls further below random masking, i.e. more "
                           "faithful. RACU is unclipped (signed measures can exceed 100%); the clipped column is "
                           "R-ROAR's variant, clipped to [-100, 100]. Mean over seeds with 95% bootstrap CIs (the CI "
                           "method column: BCa, or what stood in for it; one seed has none). Each measure is paired "
                           "with the random curve of the same seed."
                           + (" Count schedule: ACU is taken over k / k_max." if view.counted else "")
                           + (f" Beside ours: {md(published)}, RoBERTa-base with masked fine-tuning, 5 seeds (Madsen "
                              "et al. 2024, Table 1): another model, so compare the order, not the values."
                              if published else ""))
                overrides = {}
                if published:
                    overrides = {PUBLISHED: (published, "Madsen et al. 2024, Table 1"),
                                 "published_racu_low": ("published 95% CI low", None),
                                 "published_racu_high": ("published 95% CI high", None)}
                shown = published_as_text(table)
                table_view(shown, f"ranking-{view.run}-{view.dataset}-{view.model}", key="bench_ranking", export=table,
                           hide_index=True, column_config=column_config(shown, overrides),
                           column_order=column_order(table))
                explain_links(view, ranked, model_id)
                paired_comparison(view.data, ranked)
        csv_button(view.data, f"{view.run}-{view.dataset}-{view.model}", key="bench_rows_csv",
                   label="Download these rows (CSV)")
    with st.expander("Published numbers"):
        from engine.results.published import load_published

        published, citation = load_published("fmm_table1")
        st.caption(f"Published, not measured here: {citation}")
        table_view(published, "fmm-table1-published", key="bench_fmm", hide_index=True,
                   column_config=column_config(published))
        roar, roar_citation = load_published("recursive_roar_table2")
        st.caption("Recursive ROAR (published): " + roar_citation)
        table_view(roar, "recursive-roar-table2-published", key="bench_rroar", hide_index=True,
                   column_config=column_config(roar))
