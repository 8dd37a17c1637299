"""The column names a reader sees in every table of the Benchmarks page: one mapping from the stores' column names
(`faith_low`, `plaus_n`, `racu_pct`, ...) to a label with its unit and, where it matters, which direction is better,
and a help text. Tables keep their data's names (so a CSV download is unchanged); `column_config` gives
`st.dataframe` the labels. A column named by a metric id ('aopc-comprehensiveness', 'soft-nc@0.1') gets the
metric registry's label and definition (engine/faithfulness/registry.py), so a metric registered there is labelled
here without an entry of its own."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from engine.faithfulness import registry

BETTER = "higher: more faithful"
INTERVAL = "end of the 95% interval"

COLUMN_LABELS: dict[str, tuple[str, str | None]] = {
    # grouping columns of the results stores
    "run": ("run", None), "dataset": ("dataset", None), "split": ("split", None), "base_model": ("model", None),
    "model": ("model", None), "strategy": ("fine-tuning", None), "method": ("method", None),
    "schedule": ("masking schedule", None), "n_examples": ("examples", "inputs averaged per curve"),
    "grid": ("masking levels", None), "measure": ("measure", None), "importance_measure": ("measure", None),
    "seed": ("seed", "the fine-tuning seed of the checkpoint"), "seeds": ("seeds", "fine-tuned models (seeds) averaged"),
    # areas between the curves (recursive masking, ROAR)
    "acu_pct": (f"ACU % ({BETTER})", "Area of the random curve above the measure's curve (metric x masked share, "
                "in %); mean over seeds"),
    "acu_low": ("ACU 95% CI low", None), "acu_high": ("ACU 95% CI high", None), "acu_ci": ("ACU CI method", None),
    "racu_pct": (f"RACU % ({BETTER})", "ACU over the random curve's area above its fully-masked value "
                 "(100%: the measure's curve drops there at once; unclipped, signed measures can exceed it); mean over "
                 "seeds"),
    "racu_low": ("RACU 95% CI low", None), "racu_high": ("RACU 95% CI high", None), "racu_ci": ("RACU CI method", None),
    "racu_clipped_pct": (f"RACU clipped to ±100 % ({BETTER})", "R-ROAR's variant, clipped to [-100, 100]"),
    "racu_clipped_low": ("clipped RACU CI low", None), "racu_clipped_high": ("clipped RACU CI high", None),
    # published tables (their +/- are the papers' CI offsets)
    "acu_plus": ("ACU CI +", "upper offset of the 95% CI"), "acu_minus": ("ACU CI −", "lower offset of the 95% CI"),
    "racu_plus": ("RACU CI +", "upper offset of the 95% CI"), "racu_minus": ("RACU CI −", "lower offset of the 95% CI"),
    "ci_plus": ("RACU CI +", "upper offset of the 95% CI"), "ci_minus": ("RACU CI −", "lower offset of the 95% CI"),
    # faithfulness against plausibility (app.faith_plausibility.joined)
    "faith": (f"faithfulness ({BETTER})", "RACU % or NAOPC, as chosen above; mean over seeds"),
    "faith_low": ("faithfulness 95% low", f"lower {INTERVAL} (over seeds)"),
    "faith_high": ("faithfulness 95% high", f"upper {INTERVAL} (over seeds)"),
    "faith_n": ("seeds", "fine-tuned models (seeds) the faithfulness number averages"),
    "plaus": ("plausibility (higher: more plausible)", "AUPRC against rationales, or the annotators' TrueSkill rating, "
              "as chosen above"),
    "plaus_low": ("plausibility 95% low", f"lower {INTERVAL} (AUPRC: over inputs; rating: mu - 1.96 sigma)"),
    "plaus_high": ("plausibility 95% high", f"upper {INTERVAL} (AUPRC: over inputs; rating: mu + 1.96 sigma)"),
    "plaus_n": ("plausibility n", "inputs (AUPRC) or rankings (rating) behind the plausibility number"),
    # faithfulness against forward passes (app.budget_view)
    "multiple": ("budget (x G)", "the anytime search's budget in multiples of greedy LOO's cost G"),
    "inputs": ("inputs", None), "forwards": ("passes per input", "forward passes, mean over inputs"),
    "forwards_per_g": ("passes / G", None), "aopc": ("AOPC", "higher: more faithful"),
    "naopc": ("NAOPC", "1 = the best attainable AOPC; higher: more faithful"), "naopc_low": ("NAOPC 95% low", None),
    "naopc_high": ("NAOPC 95% high", None), "racu": ("RACU %", BETTER),
    "complete": ("share complete", "inputs whose search finished within the budget"),
    "front_racu": ("Pareto (RACU)", "on the Pareto front by RACU"), "front_naopc": ("Pareto (NAOPC)", "on the Pareto front by NAOPC"),
    # the evaluation suite
    "measure_a": ("measure A", None), "measure_b": ("measure B", None),
    "feature_agreement": ("feature agreement", "share of the top 20% tokens both measures pick (1 = all)"),
    "rank_agreement": ("rank agreement", "share of the top tokens at the same rank"),
    "sign_agreement": ("sign agreement", "share of the top tokens both pick with the same sign"),
    "signed_rank_agreement": ("signed rank agreement", "same rank and the same sign"),
    "rank_correlation": ("rank correlation (Spearman)", "over all tokens"),
    "pairwise_rank_agreement": ("pairwise rank agreement", "share of token pairs ordered alike"),
    "value": ("value", None), "ci_low": ("95% CI low", None), "ci_high": ("95% CI high", None),
    "passes": ("passes", "upper end of the 95% CI after full randomisation below 0.5"),
}

RAW_NAME = r"^[a-z0-9]+(_[a-z0-9]+)+$"  # what a column name from a store looks like, never what a reader should see


def metric_label(metric: str) -> str:
    """A metric's name for a reader, from the registry: its label with the direction that is better
    ('AOPC comprehensiveness (higher: more faithful)'); an unknown name is shown as it is."""
    return registry.metric_label(metric)


def metric_help(metric: str) -> str | None:
    """A metric's one-line definition from the registry (None for a name it does not know)."""
    known = registry.METRICS.get(metric.split("@")[0])
    return None if known is None else known.definition


def _labels(column: str) -> tuple[str, str | None]:
    if column in COLUMN_LABELS:
        return COLUMN_LABELS[column]
    if column.split("@")[0] in registry.METRICS:
        return metric_label(column), metric_help(column)
    return column, None


def label(column: str) -> str:
    """The reader's name of `column` (a metric id: the registry's label; the column itself when it is already a
    label, e.g. 'RACU %')."""
    return _labels(column)[0]


def column_config(table: pd.DataFrame, overrides: dict[str, tuple[str, str | None]] | None = None) -> dict:
    """`st.dataframe`'s column_config for `table`: every column's label and help from `overrides`, else COLUMN_LABELS,
    else the metric registry, whole numbers for counts, one decimal for other floats (the data keep their names and values)."""
    overrides = overrides or {}
    config = {}
    for column in table.columns:
        text, help_text = overrides[column] if column in overrides else _labels(column)
        if column in ("n_examples", "seeds", "faith_n", "plaus_n", "inputs", "seed"):
            config[column] = st.column_config.NumberColumn(text, help=help_text, format="%d")
        elif pd.api.types.is_float_dtype(table[column]):
            small = table[column].abs().max() < 10 if table[column].notna().any() else False
            config[column] = st.column_config.NumberColumn(text, help=help_text, format="%.3f" if small else "%.1f")
        else:
            config[column] = st.column_config.Column(text, help=help_text)
    return config
