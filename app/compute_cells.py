"""The Benchmarks page's form for computing recursive-masking cells of the sidebar's model (a checkpoint
trained here or a registered one) on any packaged or registered dataset, with progress, into the results store.
The work is the engine's `run_sweep`; this module only draws the form and reports."""
from __future__ import annotations

import re

import streamlit as st

from app.availability import may, require
from app.progress import ThrottledProgress
from app.text import md
from engine.errors import EngineError

RUN_KEY = "bench_run"  # the Benchmarks page's run selector: set to the new run so it opens there


def run_name(model_id: str) -> str:
    """The results-store run that holds the cells computed on the page for one model."""
    return "page-" + re.sub(r"[^A-Za-z0-9._-]", "-", model_id)[:100]


def sweep_with_progress(cells: list, run: str, unit: str, command: str):
    """(report, bar): the engine's `run_sweep` of `cells` into `run` (one worker), drawn as one progress bar over all
    cells whose text names the cell's measure and its `unit` ('examples', 'inputs') done; `command` is what the run
    records. Raises what run_sweep raises (EngineError). The Benchmarks form and Home's first ranking both use it."""
    from engine.faithfulness.benchmark import run_sweep  # torch: only once a sweep runs

    bar = ThrottledProgress(0.0, text="starting ...")
    done = {"cells": 0}

    def cell_progress(cell, examples_done, total):
        fraction = (done["cells"] + examples_done / max(total, 1)) / len(cells)
        bar.update(fraction, f"{cell.measure}: {examples_done}/{total} {unit}")

    def after_cell(i, total, key):
        done["cells"] += 1

    return run_sweep(cells, run=run, workers=1, progress=after_cell, cell_progress=cell_progress, command=command), bar


def compute_cells_form(model_id: str | None, load_classifier) -> None:
    """An expander with the form; on submit, computes `random` plus the chosen measures on the first N test
    examples (one seed) and opens the page on the run that holds them.

    load_classifier(): the model (app.shared.get_classifier), called only once the expander is opened: the form
    lists the measures the model supports, and loading it (a second or more) must not slow the page's opening."""
    if model_id is None or not may("compute-cells"):  # it writes to the results store (app/availability.py)
        return
    box = st.expander(f"Compute cells for {md(model_id)} (your model, your data)", key="bench_compute_open",
                      on_change="rerun")
    if not box.open:
        return
    # the engine's measures and sweep (torch) only once the form is opened: the home page imports run_name
    from engine import dataset_names, measure_availability
    from engine.faithfulness.benchmark import Cell

    with box:
        classifier = load_classifier()
        names = dataset_names()
        own = classifier.meta.dataset
        available = [m for m, why in measure_availability(classifier).items() if not why and m != "random"]
        with st.form("bench_compute"):
            c1, c2 = st.columns(2)
            dataset = c1.selectbox("Dataset", names, index=names.index(own) if own in names else 0, key="compute_dataset",
                                   help="Packaged datasets and the ones registered on the Data page or with "
                                        "`python -m engine datasets add`.")
            measures = c2.multiselect("Measures (random is always computed: ACU/RACU compare against it)", available,
                                      default=[m for m in ("loo-sign",) if m in available], key="compute_measures")
            c3, c4 = st.columns(2)
            limit = c3.number_input("Examples: the first N of the test split", 1, 100_000, 20, key="compute_limit",
                                    help="A cell runs recursive masking on each example at 11 masking levels.")
            seed = c4.number_input("Seed", 0, 1_000_000, 0, key="compute_seed")
            submitted = st.form_submit_button("Compute", type="primary")
        if not submitted:
            return
        require("compute-cells")
        run = run_name(model_id)
        cells = [Cell(model=model_id, dataset=dataset, measure=m, seed=int(seed), limit=int(limit))
                 for m in ["random", *measures]]
        try:
            report, bar = sweep_with_progress(cells, run, "examples",
                                              f"dashboard Benchmarks page: {len(cells)} cells of {model_id} on {dataset}")
        except EngineError as err:
            st.error(f"The cells could not be computed: {md(err)}")
            return
        bar.update(1.0, "done")
        for key, error in report.failed:
            st.error(f"{md(key['measure'])}: {md(error)}")
        if not report.failed:
            st.session_state[RUN_KEY] = run
            st.success(f"{len(report.done)} cells computed, {len(report.skipped)} already there: run {md(repr(run))} below.")
