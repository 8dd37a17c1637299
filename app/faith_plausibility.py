"""Faithfulness against plausibility, per measure (the Benchmarks page's view): one axis a faithfulness number
(RACU from a recursive-masking run, NAOPC from an evaluation run with `--naopc`), the other a plausibility number:
AUPRC against bAbI's supporting facts from the stored rationale runs (`python -m engine rationales`,
engine.plausibility.rationale_runs), or from the annotation store (TrueSkill rating of the annotators' rankings;
AUPRC against the annotators' rationales or the tasks' supporting facts), each with its 95% interval.

Intervals: RACU and NAOPC over seeds (BCa, as the results tables); AUPRC over inputs (BCa bootstrap of the
per-input average precisions); the rating as TrueSkill's mu +- 1.96 sigma (a posterior spread, not a bootstrap).
No Streamlit here: the page draws what these functions return."""
from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

FAITHFULNESS = {"racu": "RACU % (recursive masking)", "naopc": "NAOPC (erasure, comprehensiveness)"}
PLAUSIBILITY = {"rating": "annotators' rating (TrueSkill mu)", "auprc-human": "AUPRC against annotated rationales",
                "auprc-gold": "AUPRC against bAbI supporting facts"}
COLUMNS = ["measure", "value", "low", "high", "n"]


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=COLUMNS)


def racu_by_measure(results: pd.DataFrame) -> pd.DataFrame:
    """Per measure: RACU % with its 95% CI over seeds, from recursive-masking rows of ONE group (one run, dataset,
    model, schedule, examples: the Benchmarks page's filtered view); n = seeds."""
    from engine.plausibility.rationale_runs import racu_by_measure as racu

    return _frame(racu(results).to_dict("records"))


def naopc_by_measure(evaluation: pd.DataFrame) -> pd.DataFrame:
    """Per measure: mean NAOPC (comprehensiveness) over seeds with its 95% CI, from evaluation-store rows of one
    dataset and model family (`evaluate --naopc`); n = seeds. Empty when no cell computed NAOPC."""
    from engine.faithfulness.evaluation import evaluation_table

    if evaluation.empty or "metric" not in evaluation or not (evaluation["metric"] == "naopc-comprehensiveness").any():
        return _frame([])
    table = evaluation_table(evaluation[evaluation["metric"] == "naopc-comprehensiveness"])
    return _frame([{"measure": r.measure, "value": r.value, "low": r.ci_low, "high": r.ci_high, "n": len(r.seeds)}
                   for r in table.itertuples()])


def _ap_rows(per_measure: dict[str, list[float]]) -> pd.DataFrame:
    from engine.stats import bootstrap_ci

    rows = []
    for measure, aps in sorted(per_measure.items()):
        aps = [a for a in aps if not math.isnan(a)]
        if not aps:
            continue
        mean, low, high = bootstrap_ci(aps, n_resamples=2000)
        rows.append({"measure": measure, "value": mean, "low": low, "high": high, "n": len(aps)})
    return _frame(rows)


def auprc_by_measure(tasks, rationales: dict | None = None) -> pd.DataFrame:
    """Per measure: mean AUPRC of its scores against rationales with a 95% BCa CI over inputs; n = inputs.
    rationales: task id -> [token indices per annotator] (each annotator's rationale one input), or None for the
    tasks' gold rationales (bAbI supporting facts)."""
    from engine.plausibility.rationales import average_precision

    per_measure: dict[str, list[float]] = {}
    for task in tasks:
        refs = ([task.gold_rationale] if task.gold_rationale is not None else []) if rationales is None \
            else list(rationales.get(task.id, []))
        for e in task.explanations:
            for ref in refs:
                per_measure.setdefault(e.measure, []).append(average_precision(e.scores, ref))
    return _ap_rows(per_measure)


def rating_by_measure(store, model_id: str | None) -> pd.DataFrame:
    """Per measure: TrueSkill mu of the annotators' rankings with mu +- 1.96 sigma; n = rankings it was in."""
    from engine.plausibility.ranking import measure_rankings, trueskill_ratings

    tasks = {t.id: t for t in store.tasks(model_id)}
    ranked = measure_rankings(store.rankings(model_id), tasks)
    return _frame([{"measure": r["measure"], "value": r["mu"], "low": r["mu"] - 1.96 * r["sigma"],
                    "high": r["mu"] + 1.96 * r["sigma"], "n": r["matches"]} for r in trueskill_ratings(ranked)])


def plausibility_by_measure(store, model_id: str | None) -> dict[str, pd.DataFrame]:
    """{plausibility kind: per-measure frame} from the annotation store for one model (None: every model)."""
    tasks = store.tasks(model_id)
    marks: dict[str, list] = {}
    for r in store.rationales(model_id):
        marks.setdefault(r.task_id, []).append(r.tokens)
    return {"rating": rating_by_measure(store, model_id), "auprc-human": auprc_by_measure(tasks, marks),
            "auprc-gold": auprc_by_measure(tasks)}


def joined(faithfulness: pd.DataFrame, plausibility: pd.DataFrame) -> pd.DataFrame:
    """Measures present on both sides: measure, faith, faith_low, faith_high, faith_n, plaus, plaus_low,
    plaus_high, plaus_n; sorted by measure."""
    from engine.plausibility.rationale_runs import paired

    return paired(faithfulness, plausibility)[0]


def spearman(both: pd.DataFrame) -> float:
    """Spearman's rho between the two axes over the measures (NaN with fewer than 3)."""
    from scipy.stats import spearmanr

    if len(both) < 3:
        return float("nan")
    return float(spearmanr(both["faith"], both["plaus"]).statistic)


def gold_auprc_by_measure(models, dataset: str | None = None, results_dir=None) -> pd.DataFrame:
    """Per measure: AUPRC against bAbI's supporting facts from the stored rationale runs
    (`python -m engine rationales`) of exactly these checkpoints, mean over inputs with a 95% BCa CI over inputs
    (each input averaged over the checkpoints first); n = inputs. Empty when no run scored them."""
    from engine.plausibility.rationale_runs import by_measure, load_rationales

    rows = load_rationales(results_dir=results_dir)
    if rows.empty:
        return _frame([])
    rows = rows[rows["model"].isin(set(models))]
    if dataset is not None:
        rows = rows[rows["dataset"] == dataset]
    return _frame(by_measure(rows, "auprc").drop(columns="seeds").to_dict("records"))


# The shipped pairing the view falls back to when the page's current view has no rationale run of its own:
# RACU of `tiny` masked-fine-tuned on a 2000-story subset of bAbI-1 (3 seeds) and the same checkpoints' AUPRC.
SHIPPED_RACU_RUN = "tiny-babi1-small-3seeds"
SHIPPED_RATIONALE_RUN = "tiny-babi1-small-rationales"


def shipped_pairing(results_dir=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(RACU rows of the shipped bAbI-1 run, its per-measure gold AUPRC); both empty when not shipped."""
    from engine.results import ResultsStore

    store = ResultsStore(results_dir)
    if SHIPPED_RACU_RUN not in store.runs():
        return pd.DataFrame(), _frame([])
    rows = store.load(SHIPPED_RACU_RUN)
    models = set(rows["model"])
    root = store.root / "rationales"
    return rows, gold_auprc_by_measure(models, results_dir=root)


def _bars(values: pd.Series, low: pd.Series, high: pd.Series) -> dict | None:
    if not (np.isfinite(low).any() and np.isfinite(high).any()):
        return None
    return {"type": "data", "symmetric": False, "array": (high - values).fillna(0).to_numpy(),
            "arrayminus": (values - low).fillna(0).to_numpy(), "thickness": 1}


def figure(both: pd.DataFrame, faith_label: str, plaus_label: str, height: int = 460) -> go.Figure:
    """One point per measure: plausibility on x, faithfulness on y, each with its interval as error bars, and its
    name beside it where it overlaps no other name (app.point_labels: coinciding measures share one label). The
    measure names come from stores a user may have filled: plotly reads <a>, <b>, <br> in text, so they are
    HTML-escaped (plotly shows the entities as the characters)."""
    from app.point_labels import point_labels

    texts, positions = point_labels(both["plaus"], both["faith"], [str(m) for m in both["measure"]],
                                    height=height - 100)
    fig = go.Figure()
    for k, r in enumerate(both.itertuples()):
        one = both[both["measure"] == r.measure]
        fig.add_trace(go.Scatter(
            x=one["plaus"], y=one["faith"], mode="markers+text", name=html.escape(str(r.measure)),
            text=[html.escape(texts[k])], textposition=positions[k], marker={"size": 11},
            hovertemplate="%{x:.3g}, %{y:.3g}<extra>" + html.escape(str(r.measure)) + "</extra>",
            error_x=_bars(one["plaus"], one["plaus_low"], one["plaus_high"]),
            error_y=_bars(one["faith"], one["faith_low"], one["faith_high"])))
    fig.update_layout(xaxis_title=plaus_label, yaxis_title=faith_label, height=height, showlegend=False)
    return fig
