"""The docs' tables of the erasure evaluation runs (`engine.faithfulness.evaluation`): the metrics with their CIs and
rankings, the removal operators side by side with their MaSF shares, metric columns of one operator, the agreement
of pairs of measures, and the sanity checks' verdicts and curves. The evaluation modules load on first use."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from engine.errors import InvalidInputError


def evaluation_tables(run: str, racu_run: str) -> Callable[[Path], str]:
    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.reports.evaluation_tables import ci_tables, metric_tables, ranking_tables

        data = evaluation_store(root / "evaluation").load(run)
        # level_cis=False: these tables show the aggregates over levels only, never a single level's CI
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        if table.empty:
            raise InvalidInputError(f"evaluation run {run!r} in {root / 'evaluation'} has no erasure cells")
        parts = [metric_tables(table), ci_tables(table), ranking_tables(table, racu_run, root)]
        return "\n".join(p for p in parts if p).strip("\n")

    return build


OPERATOR_METRICS = ("aopc-comprehensiveness", "aopc-sufficiency", "faithfulness-correlation", "infidelity")


def operator_comparison(run: str) -> Callable[[Path], str]:
    """The metrics of each measure under each removal operator of `run` ([MASK], retrieval infill, MLM infill), each
    value with the share of its perturbed inputs MaSF calls out of distribution (p < 0.05): whether infill keeps
    the perturbed inputs closer to the data than [MASK] does, which ICE assumes (one seed, means over the inputs)."""

    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.faithfulness.registry import better

        data = evaluation_store(root / "evaluation").load(run)
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        table = table[table["level"].isna()].set_index(["measure", "removal", "metric"])
        operators = [op for op in ("mask", "retrieval", "mlm") if op in table.index.get_level_values("removal")]
        measures = sorted(table.index.get_level_values("measure").unique(), key=lambda m: (m != "random", m))
        head = " | ".join(f"{m} ({better(m)} better)" for m in OPERATOR_METRICS)
        lines = [f"| measure | operator | {head} |", "|---|---|" + "---|" * len(OPERATOR_METRICS)]
        for measure in measures:
            for op in operators:
                cells = []
                for metric in OPERATOR_METRICS:
                    key = (measure, op, metric)
                    if key not in table.index:
                        cells.append("—")
                        continue
                    row = table.loc[key]
                    cells.append(f"{row['value']:.3f} ({row['p_below_005']:.1%})")
                lines.append(f"| {measure} | {op} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


def metric_columns(run: str, metrics: tuple[str, ...], operator: str = "mask") -> Callable[[Path], str]:
    """Measures x `metrics` of one evaluation run under one operator: each value (mean over the inputs and seeds)
    with the MaSF share (p < 0.05) of its perturbed inputs, each metric's direction in its header."""

    def build(root: Path) -> str:
        from engine.faithfulness.evaluation import ERASURE, evaluation_store, evaluation_table
        from engine.faithfulness.registry import better

        data = evaluation_store(root / "evaluation").load(run)
        table = evaluation_table(data[data["method"] == ERASURE], level_cis=False)
        table = table[table["level"].isna() & (table["removal"] == operator)].set_index(["measure", "metric"])
        measures = sorted(table.index.get_level_values("measure").unique(), key=lambda m: (m != "random", m))
        lines = ["| measure | " + " | ".join(f"{m} ({better(m)} better)" for m in metrics) + " |",
                 "|---|" + "---|" * len(metrics)]
        for measure in measures:
            cells = [f"{table.loc[(measure, m), 'value']:.3f} ({table.loc[(measure, m), 'p_below_005']:.1%})"
                     if (measure, m) in table.index else "—" for m in metrics]
            lines.append(f"| {measure} | " + " | ".join(cells) + " |")
        return "\n".join(lines)

    return build


AGREEMENT_PAIRS = ("grad-l1 ~ grad-l2", "ig-sign ~ loo-sign", "loo-sign ~ x-grad-sign", "grad-l2 ~ loo-sign",
                   "loo-abs ~ loo-sign", "random ~ x-grad-sign")


def agreement_pairs(root: Path) -> str:
    """Krishna et al.'s agreement for selected pairs of measures, tiny and MiniLM, masked and plain fine-tuning:
    feature / sign agreement at the top 20%, Spearman and pairwise rank agreement (mean over inputs and seeds)."""
    from engine.faithfulness.evaluation import AGREEMENT, evaluation_store

    columns = []
    for run, label in (("tiny-rt-erasure", "tiny"), ("minilm-rt-erasure", "MiniLM")):
        data = evaluation_store(root / "evaluation").load(run)
        part = data[data["method"] == AGREEMENT]
        wide = part.pivot_table(index=["strategy", "measure"], columns="metric", values="value")
        for strategy in ("masked", "plain"):
            if strategy in wide.index.get_level_values("strategy"):  # a run may hold one strategy only
                columns.append((f"{label} {strategy}", wide.loc[strategy]))
    metrics = ("feature_agreement", "sign_agreement", "rank_correlation", "pairwise_rank_agreement")
    header = [f"{columns[0][0]}: feature / sign / Spearman / pairwise", *(name for name, _ in columns[1:])]
    lines = ["| pair | " + " | ".join(header) + " |", "|---" * (len(columns) + 1) + "|"]
    for pair in AGREEMENT_PAIRS:
        cells = [" / ".join(f"{w.loc[pair, m]:.2f}" for m in metrics) for _, w in columns]
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


SANITY_ORDER = ("random", "grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs", "ig-sign", "ig-abs", "loo-sign", "loo-abs")


def sanity_verdicts(root: Path) -> str:
    """Which measures pass each sanity check (pass: the 95% BCa CI of the Spearman after full randomisation ends
    below 0.5), tiny masked and plain (model and label randomisation) and MiniLM masked (model randomisation);
    label randomisation with its final Spearman and CI."""
    from engine.faithfulness.evaluation import evaluation_store

    columns = []
    for run, model in (("tiny-rt-sanity", "tiny"), ("minilm-rt-sanity", "MiniLM")):
        data = evaluation_store(root / "evaluation").load(run)
        last = data.sort_values("step").groupby(["method", "strategy", "measure"]).tail(1)
        for strategy in ("masked", "plain"):
            part = last[last["strategy"] == strategy]
            if part.empty:
                continue
            checks = {m.split(": ")[-1]: g.set_index("measure") for m, g in part.groupby("method")}
            columns.append((f"{model} {strategy}", checks))

    def verdict(row, detail: bool) -> str:
        word = "pass" if row["passes"] else "**fail**"
        return f"{word} ({row['value']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}])" if detail else word.strip("*")

    header = []
    for name, checks in columns:
        kinds = [k for k in ("cascading model randomisation", "label randomisation") if k in checks]
        header.append(f"{name}: " + " / ".join("model" if k.startswith("cascading") else "labels" for k in kinds))
    lines = ["| measure | " + " | ".join(header) + " |", "|---" * (len(columns) + 1) + "|"]
    for measure in SANITY_ORDER:
        cells = []
        for _, checks in columns:
            parts = []
            for kind in ("cascading model randomisation", "label randomisation"):
                if kind in checks and measure in checks[kind].index:
                    parts.append(verdict(checks[kind].loc[measure], detail=kind == "label randomisation"))
            cells.append(" / ".join(parts) or "—")
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sanity_curves(run: str) -> Callable[[Path], str]:
    def build(root: Path) -> str:
        from engine.reports.evaluation_tables import sanity_tables

        return sanity_tables(run, root).strip("\n")

    return build
