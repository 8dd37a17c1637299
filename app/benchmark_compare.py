"""Two models side by side on one benchmark (the Benchmarks page's "Two models" part): the view's dataset, split,
method and masking schedule, measured for two models, each either one checkpoint of a run (one fine-tuning seed) or a
run's whole model (its mean over seeds, with 95% intervals). One table ranks the measures of both (RACU, its rank
under each, the difference), and their curves stand side by side on one y-axis, each labelled with its model.

The options come from every run of the store that measured the view's setting (the view's own run first), so a run's
checkpoints compare with each other and a model with another run's model of the same task (tiny against MiniLM on
rt). Only this part reads the other runs, and only when it is chosen.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import palette
from app.follow_sidebar import follow
from app.text import md

MODEL_A, MODEL_B = "bench_compare_a", "bench_compare_b"
ALL_SEEDS = "*"  # an option's checkpoint field when it stands for all of a run's checkpoints of one model


@dataclass(frozen=True)
class Side:
    """One side of the comparison: a run and either one of its checkpoints (`checkpoint`) or, with ALL_SEEDS, the
    mean over the checkpoints of its model `base_model`."""

    run: str
    base_model: str
    checkpoint: str

    @property
    def key(self) -> str:
        return f"{self.run}|{self.base_model}|{self.checkpoint}"

    @classmethod
    def from_key(cls, key: str) -> Side:
        run, base_model, checkpoint = key.split("|", 2)
        return cls(run, base_model, checkpoint)

    def words(self, seeds: int | None = None) -> str:
        if self.checkpoint == ALL_SEEDS:
            return f"{self.base_model}, mean of {seeds} seeds ({self.run})" if seeds else f"{self.base_model} ({self.run})"
        return f"{self.checkpoint} ({self.run})"


def same_setting(everything: pd.DataFrame, view) -> pd.DataFrame:
    """The rows of every run that measured the view's dataset, split, method and schedule."""
    keep = ((everything["dataset"] == view.dataset) & (everything["split"] == view.split)
            & (everything["method"] == view.method) & (everything["schedule"] == view.schedule))
    return everything[keep & everything["model"].notna()]


def sides_of(rows: pd.DataFrame, view) -> list[Side]:
    """Every comparable side: per run (the view's first) and model, its mean over seeds (where it has several), then
    each checkpoint."""
    out = []
    runs = sorted(rows["run"].unique(), key=lambda r: (r != view.run, r))
    for run in runs:
        part = rows[rows["run"] == run]
        for base_model, group in part.groupby("base_model"):
            checkpoints = sorted(group["model"].unique())
            if len(checkpoints) > 1:
                out.append(Side(run, str(base_model), ALL_SEEDS))
            out.extend(Side(run, str(base_model), str(c)) for c in checkpoints)
    return out


def rows_of_side(rows: pd.DataFrame, side: Side) -> pd.DataFrame:
    """The side's rows of one set of examples and one grid (a run may hold a beam subset beside the whole split, or
    two lists of masking levels: never pooled)."""
    from engine.faithfulness.summary import preferred_example_set

    part = rows[(rows["run"] == side.run) & (rows["base_model"] == side.base_model)]
    if side.checkpoint != ALL_SEEDS:
        part = part[part["model"] == side.checkpoint]
    if part.empty:
        return part
    part = part[part["n_examples"] == preferred_example_set(part)]
    part = part.assign(strategy=part["strategy"].fillna("unknown"))
    first = part.sort_values(["strategy", "grid"]).iloc[0]
    return part[(part["strategy"] == first["strategy"]) & (part["grid"] == first["grid"])]


def ranking_of(rows: pd.DataFrame) -> pd.DataFrame:
    """measure, racu_pct, racu_low, racu_high, seeds and rank (1: most faithful; random unranked) of one side."""
    from engine.faithfulness.summary import area_metrics_table

    table = area_metrics_table(rows)
    if table.empty:
        return pd.DataFrame(columns=["measure", "racu_pct", "racu_low", "racu_high", "seeds", "rank"])
    table = table[["measure", "racu_pct", "racu_low", "racu_high", "seeds"]].sort_values("racu_pct", ascending=False)
    measures = table["measure"] != palette.RANDOM
    table.loc[measures, "rank"] = range(1, int(measures.sum()) + 1)
    return table.reset_index(drop=True)


def _racu_words(row) -> str:
    if row is None or pd.isna(row["racu_pct"]):
        return "\u2014"
    interval = "" if pd.isna(row["racu_low"]) else f" ({row['racu_low']:.1f} to {row['racu_high']:.1f})"
    return f"{row['racu_pct']:.1f}{interval}"


def side_by_side(a: pd.DataFrame, b: pd.DataFrame, a_name: str, b_name: str) -> pd.DataFrame:
    """One row per measure either side measured, in A's order (then B's others): its rank and RACU % (95% CI) under
    A and under B, and B minus A in RACU points; an em dash where a side did not measure it."""
    measures = list(dict.fromkeys([*a["measure"], *b["measure"]]))
    by_a, by_b = a.set_index("measure"), b.set_index("measure")
    rows = []
    for measure in measures:
        ra = by_a.loc[measure] if measure in by_a.index else None
        rb = by_b.loc[measure] if measure in by_b.index else None

        def rank(r):
            if r is None:
                return "\u2014"
            return "baseline" if measure == palette.RANDOM else "\u2014" if pd.isna(r["rank"]) else str(int(r["rank"]))
        both = ra is not None and rb is not None and pd.notna(ra["racu_pct"]) and pd.notna(rb["racu_pct"])
        rows.append({"measure": measure, f"rank under {a_name}": rank(ra), f"RACU % under {a_name}": _racu_words(ra),
                     f"rank under {b_name}": rank(rb), f"RACU % under {b_name}": _racu_words(rb),
                     "B - A (RACU points)": f"{rb['racu_pct'] - ra['racu_pct']:+.1f}" if both else "\u2014"})
    return pd.DataFrame(rows)


def curves_figure(rows: pd.DataFrame, title: str, k_max: float, x_title: str, x_format: str | None,
                  y_range: list[float] | None = None) -> go.Figure:
    """Each measure's mean curve over the side's seeds (random grey and dotted), in the palette's colours."""
    means = rows.groupby(["measure", "ratio"])["value"].mean().reset_index()
    colours = palette.measure_colours(sorted(means["measure"].unique()))
    fig = go.Figure()
    for measure, curve in means.groupby("measure"):
        fig.add_trace(go.Scatter(x=curve["ratio"] * k_max, y=curve["value"], name=measure, mode="lines",
                                 line=palette.line_style(measure, colours[measure], width=2)))
    metric = rows["metric"].iloc[0] if "metric" in rows and not rows.empty else "metric"
    fig.update_layout(title=title, xaxis_title=x_title, xaxis_tickformat=x_format, height=420,
                      yaxis_title=f"{metric} (lower sooner: more faithful)", yaxis_range=y_range,
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "xanchor": "left", "x": 0})
    return fig


def default_pair(sides: list[Side], view, checkpoint: str | None) -> tuple[Side, Side]:
    """A: the sidebar's checkpoint in the view's run, else the view's model over its seeds; B: another run's model
    of another family where there is one, else another side of the view's run."""
    here = [s for s in sides if s.run == view.run and s.base_model == view.model]
    a = next((s for s in here if s.checkpoint == checkpoint), None) or (here or sides)[0]
    other_family = [s for s in sides if s.base_model != a.base_model and s.checkpoint == ALL_SEEDS]
    other_family = other_family or [s for s in sides if s.base_model != a.base_model]
    b = (other_family or [s for s in sides if s != a] or [a])[0]
    return a, b


def render_comparison(everything: pd.DataFrame, view, checkpoint: str | None) -> None:
    """The part: two selectors (A, B), the table of both rankings and their curves side by side."""
    from app.figure_export import chart
    from app.figure_export import table as table_view

    st.subheader(f"Two models side by side: {md(view.method)} on {md(view.dataset)} ({md(view.split)})")
    rows = same_setting(everything, view)
    sides = sides_of(rows, view)
    if len(sides) < 2:
        st.info(f"Only one model measured this setting ({md(view.run)}): nothing to set beside it yet.")
        return
    keys = [s.key for s in sides]
    seeds = {s.key: int(rows_of_side(rows, s)["seed"].nunique()) for s in sides if s.checkpoint == ALL_SEEDS}

    def words(key: str) -> str:
        return Side.from_key(key).words(seeds.get(key))

    a0, b0 = default_pair(sides, view, checkpoint)
    # another view, or another sidebar model: its own defaults, never a stale choice
    follow(MODEL_A, keys, choose=lambda: a0.key)
    follow(MODEL_B, keys, choose=lambda: b0.key)
    c1, c2 = st.columns(2)
    a = Side.from_key(c1.selectbox("Model A", keys, key=MODEL_A, format_func=words))
    b = Side.from_key(c2.selectbox("Model B", keys, key=MODEL_B, format_func=words,
                                   help="A checkpoint of a run (one seed), or a run's model over its seeds; every run "
                                        "of this dataset, split, method and schedule is offered."))
    if a == b:
        st.info("Pick two different models.")
        return
    a_rows, b_rows = rows_of_side(rows, a), rows_of_side(rows, b)
    try:
        a_rank, b_rank = ranking_of(a_rows), ranking_of(b_rows)
    except ValueError as err:  # e.g. two checkpoints for one seed: no pairing with the random curve is meaningful
        st.error(f"RACU cannot be computed for this pair: {md(err)}")
        return
    a_name, b_name = "A", "B"
    table = side_by_side(a_rank, b_rank, a_name, b_name)
    a_words, b_words = words(a.key), words(b.key)
    top = [r["measure"].iloc[0] if not r[r["measure"] != palette.RANDOM].empty else None
           for r in (a_rank[a_rank["measure"] != palette.RANDOM], b_rank[b_rank["measure"] != palette.RANDOM])]
    if all(top):
        same = "the same measure ranks first under both" if top[0] == top[1] else "they rank different measures first"
        st.markdown(f"**A**: {md(a_words)} ranks **{md(top[0])}** first; **B**: {md(b_words)} ranks "
                    f"**{md(top[1])}** first: {same}.")
    st.caption("RACU % (higher: more faithful), mean over the side's seeds with its 95% bootstrap interval (one "
               "checkpoint has none); rank 1: most faithful; random is the baseline. A measure one side did not "
               "measure shows an em dash.")
    table_view(table, f"two-models-{a.run}-{a.checkpoint}-{b.run}-{b.checkpoint}", key="bench_compare_table",
               hide_index=True)
    both = pd.concat([a_rows, b_rows])
    low, high = float(both["value"].min()), float(both["value"].max())
    pad = 0.05 * (high - low or 1.0)
    y_range = [low - pad, high + pad]  # one y-axis for both, so the two charts read against each other
    for col, side, side_rows, name in zip(st.columns(2), (a, b), (a_rows, b_rows), (a_name, b_name)):
        with col:
            fig = curves_figure(side_rows, f"{name}: {html.escape(words(side.key))}", view.k_max, view.x_title,
                                view.x_format, y_range)
            chart(fig, f"curves-{side.run}-{side.checkpoint}", key=f"bench_compare_curves_{name}")
