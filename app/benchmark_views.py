"""Three sections of the Benchmarks page (drawn by pages/benchmarks.py; the logic is in app.budget_view,
app.own_scores and app.faith_plausibility): faithfulness against forward passes with the Pareto front, an upload of
one's own explanation scores evaluated beside the built-in measures, and faithfulness against plausibility."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from app.column_labels import column_config
from app.figure_export import chart
from app.figure_export import table as table_view
from app.text import md
from engine.csv_safe import frame_to_csv
from engine.results.store import RECURSIVE_MASKING


def opening_run(data: pd.DataFrame, model_id: str | None = None) -> str:
    """The run the Benchmarks page opens on: the headline results (the README summary's runs, in its order) of the
    sidebar's model where it has cells there, else the first headline run stored, else the first run of recursive
    masking, else the first run. Never a ROAR run first: its BiLSTM curves are a side experiment, not the headline."""
    from engine.reports.masking_tables import RACU_RUNS

    runs = sorted(data["run"].unique())
    headline = [run for *_, run, _n in RACU_RUNS if run in runs]
    if model_id is not None:
        mine = set(data.loc[data["model"] == model_id, "run"])
        for run in headline + runs:
            if run in mine:
                return run
    if headline:
        return headline[0]
    masking = sorted(data.loc[data["method"] == RECURSIVE_MASKING, "run"].unique())
    return (masking or runs)[0]


def render_pareto() -> None:
    """The budget runs of the results store: RACU or NAOPC against forward passes, one trace per method."""
    from app.budget_view import budget_runs, pareto_figure, summary_for_display
    from app.results_cache import budget_run, file_stamp
    from engine.results.budget_pareto import POINTS, PROVENANCE, anytime_against_beam
    from engine.settings import results_dir

    st.subheader("Faithfulness against forward passes")
    root = results_dir()
    runs = budget_runs(root)
    if not runs:
        st.info("No budget run in the results store yet: `python scripts/experiments/budget_pareto.py --help` makes one.")
        return
    c1, c2 = st.columns(2)
    run = c1.selectbox("Budget run", runs, key="pareto_run", format_func=md)
    metric = c2.radio("Faithfulness", ["racu", "naopc", "aopc"], horizontal=True, key="pareto_metric",
                      format_func={"racu": "RACU", "naopc": "NAOPC", "aopc": "AOPC"}.get)
    try:
        folder = Path(root) / run  # read and summarised once per state of its two files, not once a rerun
        table, provenance, summary = budget_run(str(root), run, (file_stamp(folder / POINTS), file_stamp(folder / PROVENANCE)))
    except (ValueError, KeyError) as err:
        st.error(f"Budget run {md(run)} cannot be read: {md(err)}")
        return
    st.caption("Each point: a method's mean over the run's inputs, with its 95% CI (RACU: bootstrap over inputs; "
               "NAOPC: BCa over inputs). LOO, greedy LOO and each beam width cost what they cost (one point); the "
               "anytime search is run at several budgets, in multiples of G = N(N+1)/2 + 1 passes (greedy LOO's "
               "cost), and drawn as one line. Dotted: beam's curve; dark steps: the Pareto front (no point is both "
               "cheaper and more faithful).")
    chart(pareto_figure(summary, metric), f"pareto-{run}-{metric}", key="pareto_chart")
    versus = anytime_against_beam(summary, metric)
    if not versus.empty:
        above = int(versus["above"].sum())
        st.caption(f"Anytime at or above beam's curve (the best of LOO, greedy and the beams a budget affords) at "
                   f"{above} of {len(versus)} budgets up to beam-20's cost.")
    shown = summary_for_display(summary)
    table_view(shown, f"pareto-{run}-summary", key="pareto_table", hide_index=True, column_config=column_config(shown))
    config = provenance.get("config", {})
    st.caption(f"Model {md(provenance.get('checkpoint', '?'))} (weights sha256 "
               f"{md(str(provenance.get('checkpoint_sha256', '?'))[:12])}), {int(table['input'].nunique())} "
               f"{md(config.get('dataset', '?'))} {md(config.get('split', '?'))} inputs of at most "
               f"{md(config.get('max_tokens', '?'))} tokens; code {md(provenance.get('code_version', '?'))}; "
               f"{md(provenance.get('machine', '?'))}. Command: {md(provenance.get('command', '?'))}")
    st.download_button("Download the per-input points (CSV)", frame_to_csv(table).encode(), file_name=f"{run}-points.csv",
                       mime="text/csv", key="pareto_download")


def render_upload(classifier) -> None:
    """Upload a scores file (docs/own-explanations.md) and see it beside built-in measures."""
    from app.availability import may, require
    from app.own_scores import MAX_INPUTS, SUFFIXES, aggregate_rows, evaluate_upload
    from engine.data import get_dataset
    from engine.importance import measure_availability

    st.subheader("Evaluate your own explanations")
    if not may("upload-scores"):  # an upload is kept on the server and evaluated there (app/availability.py)
        st.caption("Evaluating an uploaded scores file runs on the server: sign in as the admin, or run "
                   "`python -m engine metrics --scores FILE` on your own machine (docs/own-explanations.md).")
        return
    st.caption("A scores file as `python -m engine metrics --scores FILE` reads it: CSV (id or text, start, end, "
               "score), JSON / JSONL records with offsets, or the outputs of inseq, captum and ferret "
               "(docs/own-explanations.md). Every row is checked before any work, and the gold label is explained.")
    if classifier is None:
        st.info("Choose a model in the sidebar first: the scores are aligned to its tokens.")
        return
    dataset_name = classifier.metadata.get("dataset")
    if not dataset_name:
        st.info(f"Model {md(classifier.id)} records no dataset: the file's rows are matched to a dataset's examples.")
        return
    available = [m for m, why in measure_availability(classifier).items() if not why]
    c1, c2, c3 = st.columns(3)
    split = c1.selectbox("Split", ["test", "validation"], key="upload_split")
    limit = c2.number_input("Inputs (at most)", 1, MAX_INPUTS, 20, key="upload_limit")
    naopc = c3.checkbox("NAOPC too", value=True, key="upload_naopc",
                        help="Its bounds cost 2^N - 1 passes per input of N <= 12 tokens, about 5 N² beyond")
    builtin = st.multiselect("Built-in measures beside it", available,
                             default=[m for m in ("loo-sign", "random") if m in available], key="upload_builtin")
    upload = st.file_uploader("Scores file", type=[s.lstrip(".") for s in SUFFIXES], key="upload_file")
    if upload is None:
        return
    if not st.button("Evaluate", key="upload_go"):
        return
    require("upload-scores")  # checked where it runs, not only where it is offered
    bar = st.progress(0.0, text="evaluating")
    try:
        dataset = classifier.check_dataset(get_dataset(dataset_name, classifier.metadata.get("split_seed", 0)))
        result = evaluate_upload(upload.getvalue(), upload.name, classifier, dataset, split=split,
                                 builtin=tuple(builtin), limit=int(limit), naopc=naopc,
                                 progress=lambda d, t: bar.progress(d / t, text=f"{d}/{t} measures"))
    except (ValueError, OSError) as err:  # InvalidInputError (a bad row, named) is a ValueError
        bar.empty()
        st.error(f"The file cannot be evaluated: {md(err)}")
        return
    bar.empty()
    st.success(f"{len(result.measures)} imported measure(s) ({md(', '.join(result.measures))}) on {result.n_inputs} "
               f"inputs of the {md(split)} split, beside {md(', '.join(builtin) or 'no built-in measure')}.")
    table_view(aggregate_rows(result.table), "own-explanations-summary", key="upload_summary", hide_index=True)
    with st.expander("Every metric and level"):
        st.dataframe(result.table, hide_index=True)
    st.download_button("Download (CSV)", frame_to_csv(result.table).encode(), file_name="own-explanations.csv",
                       mime="text/csv", key="upload_download")


def render_faith_plausibility(view: pd.DataFrame, model_id: str | None, classifier=None) -> None:
    """Per measure: faithfulness (RACU of the page's current view, or NAOPC from the evaluation store) against
    plausibility (AUPRC against bAbI's supporting facts from the stored rationale runs; the annotation store's
    ratings and AUPRC against annotated rationales). Where the current view has no gold-rationale run, the
    shipped bAbI-1 pairing is shown, labelled."""
    from app.faith_plausibility import (
        FAITHFULNESS,
        PLAUSIBILITY,
        SHIPPED_RACU_RUN,
        SHIPPED_RATIONALE_RUN,
        figure,
        joined,
        naopc_by_measure,
        plausibility_by_measure,
        racu_by_measure,
        spearman,
    )
    from app.results_cache import gold_auprc_of, rows_of, shipped_pairing_of, state_of
    from engine.annotation import AnnotationStore, AnnotationStoreError
    from engine.plausibility.rationale_runs import rationale_store
    from engine.results import ResultsStore, default_results_dir

    st.subheader("Faithfulness against plausibility")
    c1, c2 = st.columns(2)
    faith_kind = c1.radio("Faithfulness", list(FAITHFULNESS), horizontal=True, key="fp_faith",
                          format_func=FAITHFULNESS.get)
    plaus_kind = c2.radio("Plausibility", list(PLAUSIBILITY), horizontal=True, key="fp_plaus",
                          index=list(PLAUSIBILITY).index("auprc-gold"), format_func=PLAUSIBILITY.get)
    plaus = None
    if plaus_kind == "auprc-gold":
        # each read and bootstrapped once per state of the stores (app/results_cache.py), not once a rerun
        results, rationales = ResultsStore(default_results_dir()), rationale_store(default_results_dir() / "rationales")
        models = tuple(sorted(set(view["model"]))) if not view.empty and "model" in view else ()
        plaus = gold_auprc_of(str(rationales.root), state_of(rationales), models)
        if plaus.empty:
            shipped_rows, shipped_plaus = shipped_pairing_of(str(results.root), (state_of(results), state_of(rationales)))
            if not shipped_plaus.empty:
                st.caption(f"The current view's checkpoints have no run against the supporting facts: showing the "
                           f"shipped bAbI-1 pairing (RACU from run `{SHIPPED_RACU_RUN}`, AUPRC from "
                           f"`rationales/{SHIPPED_RATIONALE_RUN}`; `python -m engine rationales` adds a run).")
                view, plaus = shipped_rows, shipped_plaus
    try:
        if faith_kind == "racu":
            faith = racu_by_measure(view)
        else:
            from engine.faithfulness.evaluation import evaluation_store

            ev = rows_of(evaluation_store())
            if not ev.empty and not view.empty:
                ev = ev[(ev["dataset"] == view["dataset"].iloc[0]) & (ev["base_model"] == view["base_model"].iloc[0])]
            faith = naopc_by_measure(ev)
    except ValueError as err:
        st.info(f"No faithfulness numbers for this view: {md(err)}")
        return
    if plaus is None or plaus.empty:
        try:
            store = AnnotationStore(read_only=True)
            models = store.model_ids()
        except (AnnotationStoreError, OSError) as err:
            st.info(f"The annotation store cannot be read: {md(err)}")
            return
        if not models:
            st.info("No plausibility numbers: the annotation store holds no tasks yet (make some on the Annotate "
                    "page), and no rationale run (`python -m engine rationales`) scored these checkpoints.")
            return
        index = models.index(model_id) if model_id in models else 0
        chosen = st.selectbox("Annotated model", models, index=index, key="fp_model", format_func=md)
        plaus = plausibility_by_measure(store, chosen)[plaus_kind]
    both = joined(faith, plaus)
    if both.empty:
        st.info(f"No measure has both numbers: faithfulness for {md(', '.join(faith['measure']) or 'none')}, "
                f"{md(PLAUSIBILITY[plaus_kind])} for {md(', '.join(plaus['measure']) or 'none')}.")
        return
    chart(figure(both, FAITHFULNESS[faith_kind], PLAUSIBILITY[plaus_kind]), f"faithfulness-{faith_kind}-{plaus_kind}",
          key="fp_chart")
    rho = spearman(both)
    st.caption("Error bars: 95% intervals (RACU and NAOPC over seeds; AUPRC over inputs; the rating mu +- 1.96 "
               "sigma). " + (f"Spearman over the {len(both)} measures: {rho:.2f}." if rho == rho else
                             "Spearman needs 3 measures or more."))
    # short headers (a long one widens its column past the table's edge), the full names as their help
    faith_short = {"racu": "RACU %", "naopc": "NAOPC"}[faith_kind]
    plaus_short = {"rating": "rating (mu)", "auprc-human": "AUPRC", "auprc-gold": "AUPRC"}[plaus_kind]
    table_view(both, f"faithfulness-{faith_kind}-{plaus_kind}", key="fp_table", hide_index=True,
          column_config=column_config(both, {
        "faith": (faith_short, f"{FAITHFULNESS[faith_kind]}, mean over seeds; higher: more faithful"),
        "faith_low": (f"{faith_short} 95% low", None), "faith_high": (f"{faith_short} 95% high", None),
        "plaus": (plaus_short, f"{PLAUSIBILITY[plaus_kind]}; higher: more plausible"),
        "plaus_low": (f"{plaus_short} 95% low", None), "plaus_high": (f"{plaus_short} 95% high", None)}))
