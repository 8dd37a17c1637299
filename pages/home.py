"""Home: what the tool answers, the sidebar's model's card, which measure to trust for it (the evidence the results
stores hold, app/trust.py), each measure one click from an example on Explain, and the three ways on."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from app import trust
from app.availability import may, require
from app.column_labels import column_config
from app.compute_cells import run_name, sweep_with_progress
from app.figure_export import table as table_view
from app.shared import MODEL_KEY, get_classifier, usable_checkpoints
from app.text import md

PAGES = Path(__file__).resolve().parent
EXPLAIN, MASKING, BENCHMARKS = (str(PAGES / name) for name in ("explain.py", "masking.py", "benchmarks.py"))

# A view shared before this page was the default (`/?model=...&text=...`) is an Explain view: open it there.
if st.query_params.get("text"):
    st.switch_page(EXPLAIN, query_params={k: st.query_params[k] for k in st.query_params})

st.title("Which explanation of this prediction can I trust?")
st.markdown(
    "An importance measure (gradients, integrated gradients, leave one out, ...) says which tokens a classifier's "
    "prediction rests on; this tool measures whether that is **true to the model**. A measure is *faithful* here when "
    "removing the tokens it calls important changes the model's prediction more than removing as many random tokens "
    "does (RACU: the area between the two curves, relative to random's). MaSF tests each masked input for whether it is "
    "still in the model's distribution, so a falling curve measures the explanation rather than an input the model "
    "never saw.")

meta = next((m for m in usable_checkpoints() if m.id == st.session_state.get(MODEL_KEY)), None)
if meta is None:
    st.info("No model yet: build one on the **Models** page (about 2 minutes for the default), or choose one in the "
            "sidebar.")
else:
    st.subheader(f"The model: {md(meta['id'])}")
    card = trust.model_card(meta)
    st.dataframe(pd.DataFrame({"": list(card), "this model": list(card.values())}), hide_index=True,
                 key="home_card", width="stretch")

    st.subheader("Which measure to trust for this model")
    planted = bool(meta.get("planted"))
    benchmark = trust.benchmark_for(meta)
    cards = trust.cards_for(meta)
    # a report card reads about a million rows (seconds): drawn at once only where it is the model's own, or the only
    # evidence there is
    with_cards = bool(cards) and st.toggle(
        "Also the report card (planted mechanisms: does the measure find the reason that is known?)",
        value=planted or benchmark is None, key="home_cards",
        help="Reads the card's rows once per state of the store: a few seconds the first time.")
    evidence = [benchmark] + ([trust.card_for(meta, run, whose) for run, whose in cards] if with_cards else [])
    found = trust.Trust(meta["id"], tuple(e for e in evidence if e is not None))
    st.markdown(md(found.sentence()))

    example = None
    if meta.get("dataset"):
        from engine.data import get_dataset
        from engine.errors import DataFileError, UnknownDatasetError

        try:
            example = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")[0]
        except (DataFileError, UnknownDatasetError, IndexError):  # a planted model's data is not registered
            example = None

    for k, item in enumerate(found.evidence):
        st.markdown(f"**{md(item.kind[0].upper() + item.kind[1:])}, {md(item.whose)}** · {md(item.metric)}, "
                    f"{md(item.better)}")
        st.caption(f"From {md(item.source)}.")
        table = pd.DataFrame([{"rank": i + 1, "measure": trust.measure_words(s.measure), "id": s.measure,
                               "value": s.value, "low": s.low, "high": s.high}
                              for i, s in enumerate(item.standings)])
        table_view(table, f"ranking-{meta['id']}-{k}", key=f"home_ranking_{k}", hide_index=True, column_config=column_config(
            table, {"value": (f"{item.metric} ({item.better})", None), "low": ("95% CI low", None),
                    "high": ("95% CI high", None), "id": ("measure id", None)}))
        if example is not None:
            st.caption("Open a measure on an example (the first test input of " + md(meta["dataset"]) + ") in Explain:")
            for row in range(0, len(item.standings), 4):  # in rank order, four to a row
                for col, (i, s) in zip(st.columns(4), list(enumerate(item.standings))[row:row + 4]):
                    view = {"model": meta["id"], "text": example.primary, "measures": s.measure}
                    if example.auxiliary:
                        view["aux"] = example.auxiliary
                    col.page_link(EXPLAIN, label=f"{i + 1}. {trust.measure_words(s.measure)}",
                                  icon=":material/search:", query_params=view)

    if found.none or benchmark is None:
        run = run_name(meta["id"])
        command = trust.first_ranking_command(meta["id"], meta.get("dataset"), run)
        if may("first-ranking") and meta.get("dataset"):
            st.caption(f"A first ranking: recursive masking of {', '.join(trust.FIRST_RANKING_MEASURES)} on the first "
                       f"{trust.FIRST_RANKING_INPUTS} test inputs, one seed (about a minute on 2 cores for a small "
                       f"model), into the run {md(repr(run))}; the same as `{md(command)}`.")
            if st.button("Compute a first ranking", key="home_first_ranking", type="primary",
                         icon=":material/play_arrow:"):
                require("first-ranking")
                from engine import EngineError, measure_availability
                from engine.faithfulness.benchmark import Cell

                classifier = get_classifier(meta["id"])
                offered = {m for m, why in measure_availability(classifier).items() if not why}
                cells = [Cell(model=meta["id"], dataset=meta["dataset"], measure=m, seed=0,
                              limit=trust.FIRST_RANKING_INPUTS)
                         for m in trust.FIRST_RANKING_MEASURES if m in offered]
                try:
                    report, _ = sweep_with_progress(cells, run, "inputs",
                                                    f"dashboard home page: a first ranking of {meta['id']}")
                except EngineError as err:
                    st.error(f"The ranking could not be computed: {md(err)}")
                else:
                    for key, error in report.failed:
                        st.error(f"{md(key['measure'])}: {md(error)}")
                    if not report.failed:
                        st.rerun()
        elif may("first-ranking"):
            st.caption("This model records no dataset: compute its cells on a dataset of your choice on the "
                       "**Benchmarks** page (Compute cells).")
        else:
            st.caption("Computing a ranking writes to the server's results: the admin can run it from this page.")

st.subheader("Where to go from here")
c1, c2, c3 = st.columns(3)
c1.page_link(EXPLAIN, label="Explain a text", icon=":material/search:",
             help="Type or pick an input: each measure's heatmap of its tokens, and how much the measures agree.")
c2.page_link(MASKING, label="Mask it step by step", icon=":material/layers_clear:",
             help="Remove the most important tokens one level at a time and watch the prediction and MaSF's p-values.")
c3.page_link(BENCHMARKS, label="Browse the benchmarks", icon=":material/monitoring:",
             help="Every stored run: faithfulness curves, RACU with intervals, MaSF shares, the published numbers.")
