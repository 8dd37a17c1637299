"""The Report card view (docs/ground-truth.md): on models whose reasons are known (planted mechanisms),
per model family and mechanism, how often each importance measure recovers the planted word(s), how often each
faithfulness metric prefers the true explanation over hard wrong ones (with CIs and a plain-words verdict), the
metrics' rank agreement with the truth, and whether the masking operator changes their verdicts. A run form
computes a card (`engine.groundtruth.run_report_card`, the same cells as `python -m engine report-card`).

The view is shareable: run, family, mechanism and operator live in the URL (`?run=...&family=...&mechanism=...&operator=...`).
Colours: blue = better, orange = worse, each column's header states which direction is better; a verdict is
"better than chance" when its 95% CI lies above 50%, "worse than chance" when below, else "cannot tell"."""
from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from app.admin import AdminRequired, ensure_admin, is_admin
from app.figure_export import table as table_view
from app.follow_sidebar import follow, other_model_note, preferred
from app.progress import ThrottledProgress
from app.results_cache import state_of
from app.share import current_view, publish
from app.shared import MODEL_KEY
from app.text import md
from engine.csv_safe import frame_to_csv
from engine.errors import EngineError
from engine.groundtruth.truth import MIN_DECIDING

PAGE = "report_card"
KEY = "card_"
#: URL parameter -> the session-state key of its widget
URL_FIELDS = {"run": KEY + "run", "family": KEY + "family", "mechanism": KEY + "mechanism", "operator": KEY + "operator"}
BETTER_RGB, WORSE_RGB = (33, 102, 172), (230, 97, 1)  # ColorBrewer RdBu blue / PuOr orange: apart for colour-blind readers
CHANCE = 0.5  # a judge that picks at random prefers the true explanation half the time
OPERATOR_NAMES = {"mask": "[MASK]", "delete": "delete", "unk": "[UNK]", "pad": "[PAD]", "redacted": "[REDACTED]"}
TRUTH_RATES = {
    "insertion_flip": "inserting the planted word(s) flips to the target (higher: learned)",
    "removal_flip": "removing them from carriers changes the prediction",
    "accuracy_carriers": "accuracy on carriers (planted labels)",
    "accuracy_clean": "accuracy on clean inputs",
    "single_removal_flip_first": "removing the first word alone flips",
    "single_removal_flip_second": "removing the second word alone flips",
    "outside_gate_flip": "the word outside its gate flips (lower: gate learned)",
    "decoy_removal_flip": "removing the decoy flips (lower: ignored)",
    "inert_insertion_flip": "inserting the inert word flips (lower: ignored)",
}


# -- pure helpers (tested without a browser) --------------------------------------------------------------------
def verdict_word(low: float, high: float) -> str:
    """'better than chance' when the CI lies above 50%, 'worse than chance' below, else 'cannot tell from chance'."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no verdict"
    if low > CHANCE:
        return "better than chance"
    if high < CHANCE:
        return "worse than chance"
    return "cannot tell from chance"


def percent_range(value: float, low: float, high: float) -> str:
    """'94% (91-96)': a share and its 95% CI in whole percent."""
    return f"{value:.0%} ({low * 100:.0f}-{high * 100:.0f})"


def verdicts(judges: pd.DataFrame, operator: str) -> pd.DataFrame:
    """One plain-words verdict per (model, metric) under `operator`, from `judge_table`'s pooled rows ('all' wrong
    explanations), best first: columns model, metric, label, prefers_true, low, high, n, verdict, text.

    text: "NAOPC preferred the true explanation on 94% (91-96) of 400 comparisons (200 inputs): better than chance"."""
    columns = ["model", "metric", "label", "prefers_true", "low", "high", "n", "verdict", "text"]
    if judges.empty:
        return pd.DataFrame(columns=columns)
    pooled = judges[(judges["wrong"] == "all") & (judges["operator"] == operator)].copy()
    per_wrong = judges[(judges["wrong"] != "all") & (judges["operator"] == operator)]
    inputs = per_wrong.groupby(["model", "metric"])["n"].max()
    rows = []
    for r in pooled.itertuples():
        word = verdict_word(r.low, r.high)
        n_inputs = inputs.get((r.model, r.metric))
        on = f"{r.n} comparisons" + (f" ({int(n_inputs)} inputs)" if n_inputs is not None else "")
        rows.append({"model": r.model, "metric": r.metric, "label": r.label, "prefers_true": r.prefers_true,
                     "low": r.low, "high": r.high, "n": r.n, "verdict": word,
                     "text": f"{r.label} preferred the true explanation on {percent_range(r.prefers_true, r.low, r.high)} "
                             f"of {on}: {word}"})
    out = pd.DataFrame(rows, columns=columns)
    return out.sort_values(["model", "prefers_true"], ascending=[True, False], kind="stable").reset_index(drop=True)


def shade(value, better: str, low: float = 0.0, high: float = 1.0) -> str:
    """CSS of a cell whose value lies in [low, high]: white at the worse end blended towards blue at the better end
    (`better` 'higher' or 'lower'); '' for a missing value. Text stays dark enough to read on both ends."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(v) or high <= low:
        return ""
    t = min(max((v - low) / (high - low), 0.0), 1.0)
    t = t if better == "higher" else 1.0 - t
    r, g, b = (round(255 + (c - 255) * t * 0.6) for c in BETTER_RGB)
    return f"background-color: rgb({r}, {g}, {b})"


def verdict_css(word: str) -> str:
    """CSS of a verdict cell: blue better than chance, orange worse, none when undecided."""
    rgb = BETTER_RGB if word == "better than chance" else WORSE_RGB if word == "worse than chance" else None
    if rgb is None:
        return ""
    r, g, b = (round(255 + (c - 255) * 0.45) for c in rgb)
    return f"background-color: rgb({r}, {g}, {b})"


def families_and_mechanisms(truth: pd.DataFrame) -> dict[str, list[str]]:
    """Model family (the model the mechanism was planted into) -> its mechanisms, in the order of the run."""
    out: dict[str, list[str]] = {}
    for r in truth.itertuples():
        out.setdefault(str(r.base_model), [])
        if r.mechanism not in out[str(r.base_model)]:
            out[str(r.base_model)].append(r.mechanism)
    return out


def model_caption(row) -> str:
    """How one planted model differs from its neighbours in a view: words, q (graded), rate, strategy (what the run
    records of them: a model whose truth cell is not in the run has only its strategy)."""
    parts = []
    if pd.notna(row.get("words")):
        parts.append(str(row["words"]))
    if row.get("mechanism") == "graded" and pd.notna(row.get("q")):
        parts.append(f"q = {row['q']:g}")
    if pd.notna(row.get("rate")):
        parts.append(f"rate {row['rate']:g}")
    if pd.notna(row.get("strategy")):
        parts.append(f"{row['strategy']} fine-tuning")
    return ", ".join(parts)


def planted_models_of(data: pd.DataFrame) -> pd.DataFrame:
    """One row per planted model of a run: its truth table row (engine.groundtruth.truth_table), and for a model
    with card rows but no truth cell in this run (its truth stored in another run) what its card rows record
    (model, mechanism, base_model, strategy; learned unknown)."""
    from engine.groundtruth import truth_table

    truth = truth_table(data)
    known = set(truth["model"]) if not truth.empty else set()
    card = data[(data.get("method") == "report-card") & ~data["model"].isin(known)] if "method" in data else data.iloc[0:0]
    extra = (card.groupby("model", sort=False)[["mechanism", "base_model", "strategy"]].first().reset_index()
             if not card.empty else pd.DataFrame())
    return pd.concat([truth, extra], ignore_index=True) if not extra.empty else truth


# -- data, cached per state of the store --------------------------------------------------------------------------
def _store_at(root: str):
    from engine.results import ResultsStore

    return ResultsStore(root)


def _rows(root: str, run: str, state: str) -> pd.DataFrame:
    """Every row of one run: engine.results.ResultsStore.load, which memoises a run per process under its cell files'
    fingerprint and hands each caller a shallow copy (pandas' copy-on-write keeps it apart). Not st.cache_data: that
    pickles the frame into the cache and unpickles a copy on every hit, about a second a page run for the 870k rows of
    tiny-rt-card. Only the derived tables below are cached; `state` keeps the signature of the functions that call it."""
    return _store_at(root).load(run)


@st.cache_data(show_spinner="Reading the report cards ...", max_entries=8)
def _planted(root: str, run: str, state: str) -> pd.DataFrame:
    """planted_models_of the run's rows (one row per planted model), once per state of the store."""
    return planted_models_of(_rows(root, run, state))


def _model_rows(root: str, run: str, state: str, models: tuple[str, ...]) -> pd.DataFrame:
    """The run's rows of `models`: what the view's CSV holds (made when its button is pressed)."""
    data = _rows(root, run, state)
    return data[data["model"].isin(models)]


@st.cache_data(show_spinner="Ranking the measures by each metric (bootstrap CIs) ...", max_entries=8)
def _spearman(root: str, run: str, state: str, models: tuple[str, ...]) -> pd.DataFrame:
    """engine.groundtruth.spearman_table for `models` of `run` (a bootstrap of Spearman's rho: slow, so computed
    only when the reader asks)."""
    from engine.groundtruth import spearman_table

    try:
        return spearman_table(_model_rows(root, run, state, models))
    except KeyError:
        return pd.DataFrame()


@st.cache_data(show_spinner="Scoring the judges (bootstrap CIs) ...", max_entries=8)
def _tables(root: str, run: str, state: str, models: tuple[str, ...]) -> dict:
    """The card's tables for `models` of `run` (engine.groundtruth.tables), each empty when the run has none, and
    "operators_seen": the masking operators of their rows, in the order they appear (the rows themselves stay out of
    the cache: it copies what it holds on every hit)."""
    from engine.groundtruth import judge_table, operator_table, recovery_table, truth_table

    data = _model_rows(root, run, state, models)
    out = {}
    for name, make in (("truth", truth_table), ("recovery", recovery_table), ("judges", judge_table),
                       ("operators", operator_table)):
        try:
            out[name] = make(data)
        except KeyError:  # a run that holds only its truth so far (no card cell finished): no such rows yet
            out[name] = pd.DataFrame()
    out["operators_seen"] = list(dict.fromkeys(data["operator"].dropna())) if "operator" in data else []
    return out


# -- the URL ---------------------------------------------------------------------------------------------------
def apply_url_view() -> None:
    """Write a shared URL's run / family / mechanism / operator into the widgets' state once per URL (before they
    are drawn), as app/share.py does for the pages whose view holds a text."""
    view = current_view()
    if not view.get("run") or st.session_state.get(f"{PAGE}_url_applied") == view:
        return
    for name, key in URL_FIELDS.items():
        if view.get(name):
            st.session_state[key] = view[name]
    st.session_state[f"{PAGE}_url_applied"] = view


def _select(label: str, options: list[str], key: str, prefer: str | None = None, **kwargs):
    """A selectbox whose stored value (from a URL, or the previous run's choice) is replaced by `prefer` (when it is
    an option) or the first option when it is not among `options`.

    Replaced by assignment, not dropped: a dropped key leaves the browser's box showing the old value (its widget,
    keyed alike, is the same widget to the frontend) while the script goes on with the first option, so the box and
    the numbers under it disagree; a value written to the state before the widget is drawn is sent to the browser."""
    if st.session_state.get(key) not in options:
        st.session_state[key] = prefer if prefer in options else options[0]
    return st.selectbox(label, options, key=key, **kwargs)


# -- the run form ---------------------------------------------------------------------------------------------------
def planted_models() -> list[str]:
    """Checkpoints that carry a planted mechanism (metadata `planted`), by id."""
    from engine.models import list_checkpoints

    return [m["id"] for m in list_checkpoints() if "error" not in m and m.get("planted")]


#: the form's first choice: a card of a few minutes on a small CPU (the command's default scores every family of measure)
QUICK_MEASURES = ("random", "loo-sign", "x-grad-sign", "ig-sign")
QUICK_OPERATORS = ("mask",)


def run_form(expanded: bool) -> None:
    """Compute a report card for one planted model into the store (admin only when served to a network)."""
    from engine.faithfulness.registry import card_families, default_card_families
    from engine.groundtruth import OPERATORS
    from engine.importance import builtin_measures

    models = planted_models()
    with st.expander("Run a report card", expanded=expanded or not models):
        if not models:
            st.info("No planted model yet: plant a mechanism on the **Models** page (Plant a known mechanism), or "
                    "`python -m engine plant --help`.")
            return
        if not is_admin():
            st.info("Computing a report card writes to the server's results: sign in as the admin (sidebar).")
            return
        st.caption("Scores the chosen measures and metrics on the planted model's test inputs where its mechanism "
                   "decides the prediction (the truth is established first, by inserting and removing the planted "
                   "words; a model that did not learn its mechanism is refused). Resumable: cells already computed are "
                   "kept, and a cancelled run continues where it stopped.")
        with st.form(KEY + "form"):
            c1, c2, c3 = st.columns([2, 1, 1])
            chosen = st.session_state.get(MODEL_KEY)  # the sidebar's model first, when it is a planted one
            model = c1.selectbox("Planted model", models, key=KEY + "form_model",
                                 index=models.index(chosen) if chosen in models else 0)
            run = c2.text_input("Run name", "dashboard", key=KEY + "form_run")
            limit = c3.number_input("Inputs (deciding)", 5, 2000, 50, key=KEY + "form_limit")
            measures = st.multiselect("Measures", builtin_measures(), default=list(QUICK_MEASURES), key=KEY + "form_measures",
                                      help="Start with a few: each measure adds its cells for every operator "
                                           "(python -m engine report-card scores every family by default).")
            d1, d2 = st.columns(2)
            metrics = d1.multiselect("Metric families", card_families(), default=default_card_families(),
                                     key=KEY + "form_metrics")
            operators = d2.multiselect("Masking operators", list(OPERATORS), default=list(QUICK_OPERATORS),
                                       key=KEY + "form_operators", format_func=lambda o: OPERATOR_NAMES.get(o, o))
            e1, e2 = st.columns([1, 2])
            min_deciding = e1.number_input(
                "Fewest deciding inputs", 1, 2000, MIN_DECIDING, key=KEY + "form_min_deciding",
                help=f"A mechanism counts as learned only when at least this many test inputs are decided by it "
                     f"(default {MIN_DECIDING}). Lower it for a model trained on small data (a toy split of 40 "
                     f"inputs); the card says how many inputs it scored.")
            truth_only = e2.checkbox("Only the truth (flip rates; nothing scored, no refusal)", key=KEY + "form_truth",
                                     help="Establish whether the model follows its mechanism before paying for a card.")
            submitted = st.form_submit_button("Run the report card", type="primary")
        if not submitted:
            return
        _run(model, run.strip() or "dashboard", measures, metrics, operators, int(limit), truth_only,
             int(min_deciding))


def card_command(model: str, run: str, measures, metrics, operators, limit: int, truth_only: bool = False,
                 min_deciding: int = MIN_DECIDING) -> str:
    """The `python -m engine report-card` command that computes the same cells (--min-deciding only when not the
    default, as the cells' keys do)."""
    import shlex

    extra = [] if min_deciding == MIN_DECIDING else ["--min-deciding", str(min_deciding)]
    if truth_only:
        return shlex.join(["python", "-m", "engine", "report-card", "--model", model, "--run", run, "--truth-only",
                           *extra])
    return shlex.join(["python", "-m", "engine", "report-card", "--model", model, "--run", run, "--measures", *measures,
                       "--metrics", *metrics, "--operator", *operators, "--limit", str(limit), *extra])


def _run(model: str, run: str, measures, metrics, operators, limit: int, truth_only: bool = False,
         min_deciding: int = MIN_DECIDING) -> None:
    from engine.groundtruth import CardConfig, run_report_card

    try:
        ensure_admin("computing a report card")
    except AdminRequired as err:
        st.error(md(err))
        return
    if not measures or not metrics or not operators:
        st.error("Choose at least one measure, one metric family and one masking operator.")
        return
    command = card_command(model, run, measures, metrics, operators, limit, truth_only, min_deciding)
    st.code(command, language="bash")
    st.button("Cancel", key=KEY + "cancel", help="Stops after the cell in progress; finished cells are kept.")
    bar = ThrottledProgress(0.0, text="establishing the truth by intervention ...")

    def report(done: int, total: int, cell: dict) -> None:
        what = cell.get("explanation") or cell.get("kind", "")
        bar.update(done / max(total, 1), f"cell {done}/{total} · {what} · {cell.get('operator', '')}")

    with st.status(f"Report card of {md(model)} ...", expanded=True) as status:
        try:
            config = CardConfig(measures=tuple(measures), metrics=tuple(metrics), operators=tuple(operators),
                                limit=limit, truth_only=truth_only, min_deciding=min_deciding)
            report_ = run_report_card(model, config, run=run, command=command, progress=report)
        except EngineError as err:  # e.g. MechanismNotLearned, an operator the model lacks
            status.update(label="No report card", state="error")
            st.error(md(err))
            return
        failed = len(report_.failed)
        status.update(label=f"Report card of {md(model)}: {len(report_.done)} cells computed, "
                            f"{len(report_.skipped)} already there" + (f", {failed} failed" if failed else ""),
                      state="error" if failed else "complete")
        if failed:
            st.error("Failed cells: " + md("; ".join(str(f[1])[:300] for f in report_.failed[:3])))
    # show what was just computed: the view below is drawn after this form, in the same run of the script
    from engine.models import list_checkpoints

    meta = next((m for m in list_checkpoints() if m["id"] == model), {})
    st.session_state[URL_FIELDS["run"]] = run
    st.session_state[URL_FIELDS["family"]] = str(meta.get("base_model"))
    st.session_state[URL_FIELDS["mechanism"]] = meta.get("planted", {}).get("mechanism")


# -- the view ---------------------------------------------------------------------------------------------------------
def _truth_section(truth: pd.DataFrame) -> None:
    st.subheader("The truth, by intervention")
    st.caption("Established on each planted model's own predictions, not assumed from the data recipe: share of "
               "clean test inputs flipped by inserting the planted word(s), and so on, with Wilson 95% CIs. Only "
               "*deciding* inputs (the planted words flip the prediction to the target) are scored below.")
    rows = []
    for _, r in truth.iterrows():
        row = {"model": r["model"], "planted": model_caption(r), "deciding inputs": f"{int(r.get('n_deciding', 0))} of "
               f"{int(r.get('n_inputs', 0))}", "learned": "yes" if r.get("learned") else "no"}
        for rate, words in TRUTH_RATES.items():
            if rate in r and pd.notna(r[rate]):
                row[words] = f"{percent_range(r[rate], r[f'{rate}_low'], r[f'{rate}_high'])} of {int(r[f'{rate}_n'])}"
        rows.append(row)
    table_view(pd.DataFrame(rows), "report-card-truth", key="card_truth_table", hide_index=True)


def _verdict_section(judges: pd.DataFrame, operator: str, truth: pd.DataFrame) -> None:
    st.subheader("Verdicts: which metric recognises the true explanation?")
    st.caption("Each metric judges, on every deciding input, the true explanation (planted word(s) first) against "
               "hard wrong ones (the strongest other token first; the planted word ranked second; the decoy first): "
               "the share of comparisons it gets right, higher is better, 50% is chance; 95% bootstrap CI over "
               f"inputs. Operator: {md(OPERATOR_NAMES.get(operator, operator))}. "
               ":blue-background[blue]: better than chance · :orange-background[orange]: worse than chance.")
    table = verdicts(judges, operator)
    if table.empty:
        st.info("No judge rows for this operator yet.")
        return
    captions = {r["model"]: model_caption(r) for _, r in truth.iterrows()}
    for model, part in table.groupby("model", sort=False):
        if table["model"].nunique() > 1:
            st.markdown(f"**{md(model)}** · {md(captions.get(model, ''))}")
        lines = []
        for r in part.itertuples():
            colour = {"better than chance": "blue", "worse than chance": "orange"}.get(r.verdict, "gray")
            lines.append(f"- :{colour}-background[{md(r.text)}]")
        st.markdown("\n".join(lines))


def _judge_table(judges: pd.DataFrame, operator: str) -> None:
    part = judges[judges["operator"] == operator]
    if part.empty:
        return
    show = pd.DataFrame({
        "model": part["model"], "metric": part["label"], "wrong explanation": part["wrong"],
        "prefers true (higher better)": part["prefers_true"], "CI low": part["low"], "CI high": part["high"],
        "comparisons": part["n"], "verdict": [verdict_word(lo, hi) for lo, hi in zip(part["low"], part["high"], strict=True)],
        "MaSF share of its perturbed inputs (lower: more in distribution)": part["masf_share"],
    })
    styled = (show.style.map(lambda v: shade(v, "higher"), subset=["prefers true (higher better)"])
              .map(verdict_css, subset=["verdict"])
              .format({"prefers true (higher better)": "{:.0%}", "CI low": "{:.0%}", "CI high": "{:.0%}",
                       "MaSF share of its perturbed inputs (lower: more in distribution)": "{:.0%}"}, na_rep="–"))
    if show["model"].nunique() == 1:
        styled = styled.hide(["model"], axis="columns")
    with st.expander("Judge table: every metric against every wrong explanation"):
        table_view(styled, f"report-card-judges-{operator}", key="card_judge_table", hide_index=True)


def _recovery_section(recovery: pd.DataFrame, truth: pd.DataFrame) -> None:
    st.subheader("Measures: do they find the planted word(s)?")
    st.caption("On the deciding inputs: top-1 hit = the planted word(s) take the top rank(s) (Wilson CI); MRR = mean "
               "reciprocal rank of the planted word(s) (bootstrap CI); mass share = their share of the absolute "
               "attribution. Higher is better for these; lower for mean rank and for any decoy / inert column (an "
               "explanation pointing at a word the model ignores is unfaithful). Darker blue: better.")
    if recovery.empty:
        st.info("No measure rows in this run yet.")
        return
    if recovery["model"].nunique() > 1:
        # the graded regime: where does each measure stop recovering the truth as the mechanism weakens?
        captions = {r["model"]: model_caption(r) for _, r in truth.iterrows()}
        pivot = recovery.pivot_table(index="measure", columns="model", values="top_hit")
        pivot.columns = [f"{m} · {captions.get(m, '')}" for m in pivot.columns]
        st.markdown("Top-1 hit rate per model (higher better):")
        table_view(pivot.style.map(lambda v: shade(v, "higher")).format("{:.0%}", na_rep="–"), "report-card-top-hits",
              key="card_top_hits")
    columns = {"measure": "measure", "model": "model", "n": "inputs", "top_hit": "top-1 hit (higher better)",
               "top_hit_low": "hit CI low", "top_hit_high": "hit CI high", "mrr": "MRR (higher better)",
               "mrr_low": "MRR CI low", "mrr_high": "MRR CI high", "mass_share": "mass share (higher better)",
               "mean_rank": "mean rank (lower better)", "decoy_top1": "decoy ranked first (lower better)",
               "decoy_mass_share": "decoy mass share (lower better)", "inert_top1": "inert word first (lower better)",
               "inert_mass_share": "inert mass share (lower better)"}
    show = recovery[[c for c in columns if c in recovery.columns]].rename(columns=columns)
    if "MRR (higher better)" in show:
        show = show.sort_values(["model", "MRR (higher better)"], ascending=[True, False], kind="stable")
    if show["model"].nunique() == 1:
        show = show.drop(columns="model")  # the view's one model is named in the truth table above
    higher = [c for c in show.columns if "(higher better)" in c]
    lower = [c for c in show.columns if "(lower better)" in c and "rank" not in c]
    shares = [c for c in show.columns if c not in ("measure", "model", "inputs", "mean rank (lower better)",
                                                   "MRR (higher better)", "MRR CI low", "MRR CI high")]
    styled = (show.style.map(lambda v: shade(v, "higher"), subset=higher)
              .map(lambda v: shade(v, "lower"), subset=lower)
              .format({c: "{:.0%}" for c in shares} | {"MRR (higher better)": "{:.2f}", "MRR CI low": "{:.2f}",
                      "MRR CI high": "{:.2f}", "mean rank (lower better)": "{:.1f}"}, na_rep="–"))
    table_view(styled, "report-card-measures", key="card_measures_table", hide_index=True)
    measure_links(recovery)


def measure_links(recovery: pd.DataFrame) -> None:
    """Each measure of the recovery table one link from Explain on an example with that measure alone, in the table's
    order (best MRR first): with the card's planted model where the models cache has it (the view's first model),
    else the sidebar's, on the first test input of that model's dataset."""
    from app.benchmark_summary import EXPLAIN, first_example
    from app.shared import usable_checkpoints
    from app.trust import measure_words

    catalogue = {m.id: m for m in usable_checkpoints()}
    planted = [m for m in dict.fromkeys(recovery["model"]) if m in catalogue]
    model = planted[0] if planted else st.session_state.get(MODEL_KEY)
    meta = catalogue[model].meta if model in catalogue else None
    example = first_example(meta.dataset, "test", meta.split_seed) if meta and meta.dataset else None
    if example is None:
        return
    order = (recovery.groupby("measure")["mrr"].mean().sort_values(ascending=False).index
             if "mrr" in recovery.columns else recovery["measure"].unique())
    measures = [m for m in order if m != "random"]
    st.caption(f"Open a measure in Explain on an example (the first test input of {md(meta.dataset)}) with "
               f"{md(model)}:")
    text, aux = example
    for row in range(0, len(measures), 4):
        for col, (i, measure) in zip(st.columns(4), list(enumerate(measures))[row:row + 4]):
            query = {"model": model, "text": text, "measures": measure, **({"aux": aux} if aux else {})}
            col.page_link(EXPLAIN, label=f"{i + 1}. {measure_words(measure)}", icon=":material/search:",
                          query_params=query)


def _agreement_sections(spearman, operators: pd.DataFrame, operator: str) -> None:
    """spearman: a function returning the Spearman table (called only when the reader turns it on)."""
    if st.toggle("Do the metrics rank the measures as the truth does? (Spearman, bootstrap: takes a while)",
                 key=KEY + "spearman"):
        table = spearman()
        part = table[table["operator"] == operator] if not table.empty else table
        if part.empty:
            st.info("Needs at least three measures scored on this operator.")
        else:
            st.caption("Spearman's rho between a metric's ranking of the measures (mean over the deciding inputs) and "
                       "the ground-truth ranking (mean reciprocal rank of the planted word(s)), 95% bootstrap CI over "
                       "inputs. 1: the metric orders the measures exactly as the truth; 0: unrelated.")
            show = part[["model", "label", "spearman", "low", "high", "n_measures", "n_inputs"]].rename(columns={
                "label": "metric", "spearman": "Spearman (higher better)", "low": "CI low", "high": "CI high",
                "n_measures": "measures", "n_inputs": "inputs"})
            table_view(show.style.map(lambda v: shade(v, "higher", -1.0, 1.0), subset=["Spearman (higher better)"])
                  .format({"Spearman (higher better)": "{:.2f}", "CI low": "{:.2f}", "CI high": "{:.2f}"},
                          na_rep="–"), f"report-card-spearman-{operator}", key="card_spearman_table", hide_index=True)
    if not operators.empty:
        with st.expander("Does the masking operator change the verdict? (lower better)"):
            st.caption("Share of (input, wrong explanation) pairs whose verdict (true preferred, wrong preferred, tie) "
                       "differs between the operators of the run; Wilson 95% CI. Lower: the metric's verdict does not "
                       "hinge on how tokens are removed.")
            show = operators[["model", "label", "operators", "n_pairs", "changed", "low", "high"]].rename(columns={
                "label": "metric", "n_pairs": "pairs", "changed": "verdict changes (lower better)", "low": "CI low",
                "high": "CI high"})
            table_view(show.style.map(lambda v: shade(v, "lower"), subset=["verdict changes (lower better)"])
                  .format({"verdict changes (lower better)": "{:.0%}", "CI low": "{:.0%}", "CI high": "{:.0%}"}),
                  "report-card-operators", key="card_operators_table", hide_index=True)


def render_report_card() -> None:
    """The whole view, drawn where it is called (pages/report_card.py)."""
    from engine.groundtruth import card_store

    apply_url_view()
    store = card_store()
    run_form(expanded=not store.runs())
    runs = store.runs()
    if not runs:
        # the store's folder is a path on the server: only its admin is told where it is
        where = f" in {md(store.root)}" if is_admin() else ""
        st.info(f"No report card{where} yet: run one above, or `python -m engine report-card --help`.")
        return
    root = str(store.root)
    state = state_of(store)  # a digest: the card store's file list has thousands of cells to hash a call
    c1, c2, c3, c4 = st.columns(4)
    with c1:  # first the run named after the sidebar's model (tiny-rt-card for a tiny model), when there is one
        follow(URL_FIELDS["run"], runs)  # again when the sidebar's model changes
        run = _select("Run", runs, URL_FIELDS["run"], prefer=preferred(runs))
    truth = _planted(root, run, state)
    if truth.empty:
        st.info("This run holds no rows of a planted model yet.")
        return
    families = families_and_mechanisms(truth)
    with c2:
        follow(URL_FIELDS["family"], list(families))
        family = _select("Model family (planted into)", list(families), URL_FIELDS["family"],
                         prefer=preferred(list(families)))
    with c3:
        mechanism = _select("Mechanism", families[family], URL_FIELDS["mechanism"])
    models = tuple(truth[(truth["base_model"].astype(str) == family) & (truth["mechanism"] == mechanism)]["model"])
    tables = _tables(root, run, state, models)
    ops = tables["operators_seen"]
    with c4:
        operator = _select("Masking operator", ops or ["mask"], URL_FIELDS["operator"],
                           format_func=lambda o: OPERATOR_NAMES.get(o, o))
    publish(PAGE, {"run": run, "family": family, "mechanism": mechanism, "operator": operator})
    other_model_note(family, "a report card exists only for a model with a planted mechanism (its reasons are "
                             "known); this is the card of its family in this run, or plant one on the Models page.")
    if tables["truth"].empty:
        st.info("The truth cells (flip rates) of these models are not in this run: `python -m engine report-card "
                "--model ID --truth-only --run " + md(run) + "` adds them.")
    else:
        _truth_section(tables["truth"])
    if not tables["truth"].empty and not tables["truth"].get("learned", pd.Series([True])).all():
        st.warning("A model here did not learn its mechanism: its card, if any, rests on a truth it does not follow.")
    judges = tables["judges"]
    described = truth[truth["model"].isin(models)]  # each model's words, q, rate, strategy for the captions
    _verdict_section(judges, operator, described)
    if not judges.empty:
        _judge_table(judges, operator)
    _recovery_section(tables["recovery"], described)
    _agreement_sections(lambda: _spearman(root, run, state, models), tables["operators"], operator)
    # the CSV is made on the click (Streamlit calls the function then): made on every run, it cost seconds a rerun
    st.download_button("Download this view's rows (CSV)", lambda: frame_to_csv(_model_rows(root, run, state, models)).encode(),
                       file_name=f"report-card-{run}-{family}-{mechanism}.csv", mime="text/csv")
