"""Which measure to trust for one model: the importance measures ranked by the evidence the results stores hold
for it, each with its 95% interval and where the number comes from; and the model's card (kind, data, masked
fine-tuning, accuracy, MaSF calibration) from its metadata, without loading it.

The evidence, in the order it is looked for:

- **recursive masking** (RACU %, higher: more faithful): the model's own benchmark runs, else its family's (same
  base model, dataset and fine-tuning strategy: other seeds of the same recipe), chosen as
  engine.faithfulness.shipped_ranking.ranked_measures chooses them (the set of curves over the most inputs x seeds),
  so the ranking here is the order the Masking page opens with;
- **report card** (planted mechanisms; share of deciding inputs whose top-ranked token is a planted word, higher:
  better): a planted model's own card, else its family's shipped card (the cards of models planted into the same
  base model and dataset), pooled over the card's models that learned their mechanism.

A model with neither has no evidence (`Trust.none`): the home page says so in one sentence and offers the admin the
cells that would make a first ranking. The functions here take the stores' rows (pandas) and return plain data:
no Streamlit, so the unit tests call them on the shipped results; the cached readers at the end are what the page
calls (keyed by the state of each store, as app/results_cache.py's are).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from engine.faithfulness.shipped_ranking import BASELINE, stored_rows_for
from engine.faithfulness.summary import area_metrics_table
from engine.measure_labels import measure_words as measure_words_table
from engine.results.store import RECURSIVE_MASKING, ResultsStore
from engine.stats import wilson_ci

RACU = "RACU %"
TOP_HIT = "planted word ranked first, %"
HIGHER = "higher: more faithful"
#: the cells a first ranking computes for a model without evidence: the random baseline (RACU compares against it)
#: and the four measures Explain opens with, on the first inputs of the test split, one seed
FIRST_RANKING_MEASURES = ("random", "grad-l2", "x-grad-sign", "ig-sign", "loo-sign")
FIRST_RANKING_INPUTS = 20

def measure_words(measure: str) -> str:
    """A measure's name in words ('leave one out (signed)'): the measure's own label (engine.importance), so every
    page says the same; an unknown id is shown as it is."""
    registry = sys.modules.get("engine.importance.registry")
    if registry is not None:  # the measures are registered (torch loaded): a measure read from a file has its label
        return registry.measure_label(measure)
    return measure_words_table(measure)  # torch-free: the built-in measures' labels, what the classes read too


@dataclass(frozen=True)
class Standing:
    """One measure's number in one piece of evidence: `value` with its 95% interval [`low`, `high`] (NaN bounds:
    no interval, e.g. one seed), in the unit of the evidence's `metric`."""

    measure: str
    value: float
    low: float
    high: float

    def interval(self) -> str:
        """'41.2 (95% CI 38.0 to 44.9)', or '41.2 (no interval: one seed)' without bounds."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return f"{self.value:.1f} (no interval: one seed)"
        return f"{self.value:.1f} (95% CI {self.low:.1f} to {self.high:.1f})"


@dataclass(frozen=True)
class Evidence:
    """One ranking of the measures from one store: `standings` best first; `whose` says whether the numbers are the
    model's own or its family's; `source` names the run (and card) they come from, in words."""

    kind: str  # "recursive masking" | "report card"
    whose: str  # "this model" | "its family"
    metric: str  # RACU or TOP_HIT
    better: str
    run: str
    source: str
    standings: tuple[Standing, ...]

    @property
    def order(self) -> list[str]:
        return [s.measure for s in self.standings]


@dataclass(frozen=True)
class Trust:
    """The evidence found for one model, most direct first; none when the stores hold nothing for it."""

    model: str
    evidence: tuple[Evidence, ...]

    @property
    def none(self) -> bool:
        return not self.evidence

    def sentence(self) -> str:
        """The answer in one sentence."""
        if self.none:
            return (f"No stored run or report card measures the explanations of {self.model} or its family yet, so "
                    "nothing here says which measure to trust for it.")
        first = self.evidence[0]
        best = first.standings[0]
        return (f"On {first.kind} ({first.whose}), {measure_words(best.measure)} ranks first: {first.metric} "
                f"{best.interval()}, {first.better}.")


# -- recursive masking --------------------------------------------------------------------------------------------
def _benchmark_rows(rows: pd.DataFrame, model_id: str, base_model, dataset, strategy) -> tuple[pd.DataFrame, str]:
    """The recursive-masking ratio rows that rank measures for the model (its runs, else its family's: as
    shipped_ranking does) and whose they are."""
    if rows.empty or "model" not in rows.columns:
        return rows.iloc[0:0], ""
    rows = rows[(rows["method"] == RECURSIVE_MASKING) & (rows["schedule"] == "ratio")]
    own = rows[rows["model"] == model_id]
    if not own.empty:
        return rows[rows["run"].isin(set(own["run"]))
                    & (rows["base_model"] == own["base_model"].iloc[0]) & (rows["dataset"] == own["dataset"].iloc[0])
                    & (rows["strategy"] == own["strategy"].iloc[0])], "this model"
    if base_model is None or dataset is None:
        return rows.iloc[0:0], ""
    family = rows[(rows["base_model"] == base_model) & (rows["dataset"] == dataset)]
    if strategy is not None:
        family = family[family["strategy"] == strategy]
    return family, "its family"


def benchmark_evidence(rows: pd.DataFrame, model_id: str, base_model: str | None = None, dataset: str | None = None,
                       strategy: str | None = None) -> Evidence | None:
    """RACU % per measure (mean over seeds, 95% BCa interval over seeds) on the set of curves that ranks measures
    for the model: over the most inputs x seeds of its own runs, else its family's; None without such curves.

    rows: the results store's tidy rows (engine.faithfulness.shipped_ranking.stored_rows_for reads the few runs
    that can hold them). The order is ranked_measures' (a test checks it) with its intervals beside it."""
    part, whose = _benchmark_rows(rows, model_id, base_model, dataset, strategy)
    if part.empty:
        return None
    sizes = part.groupby(["run", "n_examples"], dropna=False).agg(seeds=("seed", "nunique"),
                                                                  measures=("measure", "nunique"))
    sizes = sizes.assign(weight=[(0 if pd.isna(n) else n) * s for (_, n), s in zip(sizes.index, sizes["seeds"])])
    for (run, n_examples), _ in sizes.sort_values(["weight", "measures"], ascending=False).iterrows():
        chosen = part[(part["run"] == run) & ((part["n_examples"] == n_examples) if pd.notna(n_examples)
                                              else part["n_examples"].isna())]
        if chosen["model"].nunique() > 1 and (chosen.groupby("seed")["model"].nunique() > 1).any():
            chosen = chosen[chosen["model"] == sorted(chosen["model"].unique())[0]]  # one checkpoint per seed
        table = area_metrics_table(chosen, baseline=BASELINE)
        if table.empty:
            continue  # no random baseline in this set: try the next
        table = table[(table["measure"] != BASELINE) & table["racu_pct"].notna()]
        if table.empty:
            continue
        table = table.sort_values("racu_pct", ascending=False, kind="stable")
        inputs = "all test inputs" if pd.isna(n_examples) else f"{int(n_examples)} test inputs"
        seeds = int(chosen["seed"].nunique())
        first = chosen.iloc[0]
        source = (f"results/{run}: recursive masking of {first['base_model']} ({first['strategy']} fine-tuning) on "
                  f"{first['dataset']}, {inputs} x {seeds} seed{'s' if seeds != 1 else ''}, against the random "
                  "baseline of each seed")
        return Evidence("recursive masking", whose, RACU, HIGHER, str(run), source,
                        tuple(Standing(r.measure, float(r.racu_pct), float(r.racu_low), float(r.racu_high))
                              for r in table.itertuples()))
    return None


# -- report cards -------------------------------------------------------------------------------------------------
def card_runs_for(store: ResultsStore, model_id: str, base_model: str | None, dataset: str | None
                  ) -> list[tuple[str, str]]:
    """(run, whose) of the report-card runs that hold the model's own card (a planted model: cells named by its id),
    else its family's (cells of models planted into the same base model and dataset: `gt-<base>-<dataset>-...`, the
    ids the shipped cards' models have). Looks at file names only."""
    own = [(run, "this model") for run in store.runs() if any((store.root / run / "cells").glob(f"{model_id}_*.json"))]
    if own or base_model is None or dataset is None:
        return own
    prefix = f"gt-{base_model}-{dataset}-"
    return [(run, "its family") for run in store.runs() if any((store.root / run / "cells").glob(f"{prefix}*.json"))]


def card_evidence(rows: pd.DataFrame, run: str, whose: str, model_id: str | None = None) -> Evidence | None:
    """Per measure, the share of deciding inputs whose top-ranked token is a planted word (Wilson 95% interval),
    pooled over the card's models that learned their mechanism (`model_id` alone for a model's own card); None
    when the run has no recovery rows for them.

    rows: one report-card run's rows (engine.groundtruth's card store)."""
    from engine.groundtruth import recovery_table, truth_table

    if rows.empty or "kind" not in rows.columns:
        return None
    if model_id is not None and whose == "this model":
        rows = rows[rows["model"] == model_id]
    truth = truth_table(rows)
    if not truth.empty and "learned" in truth.columns:
        learned = set(truth.loc[truth["learned"].astype(bool), "model"])
        rows = rows[rows["model"].isin(learned)]
    try:
        recovery = recovery_table(rows, cis=False)
    except KeyError:
        return None
    if recovery.empty or "top_hit" not in recovery.columns:
        return None
    recovery = recovery[recovery["measure"] != BASELINE].dropna(subset=["top_hit"])
    standings = []
    for measure, g in recovery.groupby("measure", sort=False):
        k, n = int(round((g["top_hit"] * g["n"]).sum())), int(g["n"].sum())
        low, high = wilson_ci(k, n)
        standings.append(Standing(str(measure), 100 * k / n, 100 * low, 100 * high))
    if not standings:
        return None
    standings.sort(key=lambda s: -s.value)
    models = sorted(set(recovery["model"]))
    source = (f"results/groundtruth/{run}: report card of {', '.join(models)}"
              f" (planted mechanisms, {sum(int(n) for n in recovery.groupby('model')['n'].max())} deciding inputs)")
    return Evidence("a report card", whose, TOP_HIT, "higher: recovers the planted reason", run, source,
                    tuple(standings))


# -- the model's card ------------------------------------------------------------------------------------------------
def masf_status(folder: str | Path | None) -> str:
    """Whether MaSF (the masked-input out-of-distribution test) is calibrated for the checkpoint in `folder`, in
    words: the data of each stored fit (the JSON beside each `masf-<digest>.safetensors`), or that it is fitted on
    the first masking run."""
    from engine.ood.files import LEGACY_MASF_FILE, MASF_FIT_VERSION, MASF_PREFIX

    if folder is None or not Path(folder).is_dir():
        return "not calibrated yet: fitted on the first masking run"
    fits = []
    for meta in sorted(Path(folder).glob(f"{MASF_PREFIX}*.json")):
        try:
            key = json.loads(meta.read_text(encoding="utf-8"))["key"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if key.get("fit_version") == MASF_FIT_VERSION:
            fits.append(f"{key.get('dataset')} {key.get('split', 'validation')} split")
    if fits:
        return "calibrated on " + "; ".join(sorted(set(fits)))
    if (Path(folder) / LEGACY_MASF_FILE).is_file() or any(Path(folder).glob(f"{MASF_PREFIX}*.json")):
        return "calibrated by an older fit: refitted on the first masking run"
    return "not calibrated yet: fitted on the first masking run"


def model_card(meta: dict) -> dict[str, str]:
    """What a reader needs to know of the sidebar's model, in words, from its sidebar entry
    (app.shared.usable_checkpoints: a checkpoint's metadata, a registered or a built-in model)."""
    from engine.models.kinds import ModelKind
    from engine.models.metadata import CheckpointMeta

    typed = CheckpointMeta.from_dict(meta)
    if meta.get("builtin"):
        kind = f"prompted language model ({meta.get('label', 'zero-shot')}), {meta.get('base_model')}"
    elif meta.get("registered"):
        kind = ("prompted language model" if typed.kind is ModelKind.PROMPTED else "classifier fine-tuned elsewhere") \
            + f", {meta.get('base_model')}"
    elif meta.get("planted"):
        kind = f"classifier with a planted mechanism ({meta['planted'].get('mechanism')}), encoder {meta.get('base_model')}"
    else:
        kind = f"sequence classifier, encoder {meta.get('base_model')}"
    test = meta.get("test") or {}
    accuracy = test.get("unmasked")
    metric = meta.get("metric") or "accuracy"
    masked = typed.masked_fine_tuned  # the one rule (declared, else from the strategy)
    return {
        "kind": kind,
        "data": meta.get("dataset") or "none recorded (fine-tuned elsewhere or prompted)",
        "masked fine-tuning": ("yes: masked inputs stay in distribution" if masked
                               else "no: masked inputs may be out of distribution for it"),
        "test " + metric: "not measured here" if accuracy is None else f"{accuracy:.3f} (higher: better)",
        "MaSF": masf_status(meta.get("path")),
    }


def first_ranking_command(model_id: str, dataset: str | None, run: str) -> str:
    """The command that computes the cells of a first ranking into `run` (what the page's button runs)."""
    import shlex

    return shlex.join(["python", "-m", "engine", "mask-sweep", "--model-template", model_id, "--datasets",
                       dataset or "NAME", "--measures", *FIRST_RANKING_MEASURES, "--limit", str(FIRST_RANKING_INPUTS),
                       "--run", run])


# -- the page's cached readers -------------------------------------------------------------------------------------
def _state(store: ResultsStore, runs: list[str]) -> tuple:
    return tuple(store.run_fingerprint(run) for run in runs)


@st.cache_data(show_spinner=False, max_entries=16)
def _benchmark_of(root: str, model_id: str, base_model, dataset, strategy, state: tuple) -> Evidence | None:
    rows = stored_rows_for(ResultsStore(root), model_id, dataset)
    return benchmark_evidence(rows, model_id, base_model, dataset, strategy)


@st.cache_data(show_spinner="Reading the report card ...", max_entries=8)
def _card_of(root: str, run: str, whose: str, model_id: str, state: tuple) -> Evidence | None:
    return card_evidence(ResultsStore(root).load(run), run, whose, model_id)


def benchmark_for(meta: dict, root: str | Path | None = None) -> Evidence | None:
    """benchmark_evidence of the sidebar entry `meta` from the results store at `root` (default the shipped one),
    read once per state of the runs that can hold it."""
    store = ResultsStore(root)
    return _benchmark_of(str(store.root), meta["id"], meta.get("base_model"), meta.get("dataset"),
                         meta.get("strategy"), _state(store, store.runs()))


def _card_store(root: str | Path | None) -> ResultsStore:
    """The report-card store (engine.groundtruth.card_store: `<results>/groundtruth`), found without importing
    engine.groundtruth (torch and the card's machinery: over a second on 2 cores, on the app's first page) until a
    card is read."""
    from engine import settings

    return ResultsStore(Path(root) if root is not None else settings.results_dir() / "groundtruth")


def cards_for(meta: dict, root: str | Path | None = None) -> list[tuple[str, str]]:
    """card_runs_for of the sidebar entry `meta` in the report-card store `root` (default the shipped one)."""
    return card_runs_for(_card_store(root), meta["id"], meta.get("base_model"), meta.get("dataset"))


def card_for(meta: dict, run: str, whose: str, root: str | Path | None = None) -> Evidence | None:
    """card_evidence of one card run, read once per state of that run."""
    store = _card_store(root)
    return _card_of(str(store.root), run, whose, meta["id"], _state(store, [run]))
