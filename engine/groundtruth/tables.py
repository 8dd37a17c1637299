"""The report card's tables, from the rows of a card run (`card_store().load(run)`): the truth (flip rates), the
measures' recovery of the planted words, the metrics as judges (a: preference for the true explanation over hard
wrong ones; b: Spearman of the metric's ranking of the measures with the ground-truth ranking), the operators'
effect on the verdicts, plain-words verdicts, and the self-explanation rows of prompted LMs. Each function returns a DataFrame (the Report card view and
engine/reports/groundtruth_tables.py format them); every rate has its 95% CI and every column its direction.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from engine.faithfulness.registry import judges
from engine.groundtruth.card_cells import CARD, INTERACTION_CARD, TRUTH
from engine.groundtruth.explanations import JUDGE_PAIRS, PREFIX
from engine.groundtruth.interactions import INTERACTION_BEST
from engine.groundtruth.recovery import SEPARATION_BEST
from engine.groundtruth.selfexplain_card import RULES, SELF_CARD, SELF_KINDS
from engine.stats import benjamini_hochberg, bootstrap_ci, paired_effect_size, preference_p_value, wilson_ci

#: the judge metric whose per-input comparison stands for RACU (same random baseline: ACU orders as RACU does)
RACU_PER_INPUT = "acu"
BOOTSTRAP_RESAMPLES = 2000


def judge_order() -> tuple[str, ...]:
    """The judge metrics in table order (RACU first): the registry's judges (engine/faithfulness/registry.py), read
    at each call, so a metric registered there gets its row in every judge table."""
    return tuple(judges())


def __getattr__(name: str):
    # JUDGE_ORDER: the registry's judges at the time it is asked for (engine/reports imports it by that name)
    if name == "JUDGE_ORDER":
        return judge_order()
    raise AttributeError(f"module 'engine.groundtruth.tables' has no attribute {name!r}")


def judge_label(metric: str) -> str:
    """A judge metric's name in tables, from the registry ('acu' is shown as RACU: it orders explanations as RACU
    does)."""
    return judges().get(metric, (metric,))[0]


def in_order(order, column: pd.Series) -> list[str]:
    """The names of `order` that occur in `column`, in `order`'s order (the column's set built once: rebuilding it
    per name, over a few hundred thousand string rows, cost seconds per table)."""
    present = set(column.unique())
    return [name for name in order if name in present]


def truth_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per planted model: mechanism, words, q, strategy and every rate with its Wilson CI (columns
    '<rate>', '<rate>_low', '<rate>_high', '<rate>_n'), n_deciding, learned."""
    part = df[df["method"] == TRUTH] if "method" in df.columns else df.iloc[0:0]
    if part.empty:  # a run not computed yet (no columns at all): no rows, not a KeyError
        return pd.DataFrame()
    rows = []
    for model, g in part.groupby("model", sort=False):
        first = g.iloc[0]
        row = {"model": model, "mechanism": first["mechanism"], "words": first.get("words"), "q": first.get("q"),
               "rate": first.get("rate"), "strategy": first["strategy"], "base_model": first["base_model"]}
        for r in g.itertuples():
            if r.metric == "n-deciding":
                row["n_deciding"] = int(r.value)
                row["n_inputs"] = int(r.n)
            elif r.metric == "learned":
                row["learned"] = bool(r.value)
            elif r.metric == "order-check":  # graded-set: the learned order is the recipe's (flips, or P rises)
                row["order_check"] = bool(r.value)
            else:
                row.update({r.metric: r.value, f"{r.metric}_low": r.ci_low, f"{r.metric}_high": r.ci_high,
                            f"{r.metric}_n": int(r.n)})
        rows.append(row)
    return pd.DataFrame(rows)


CARD_COLUMNS = ("model", "mechanism", "operator", "measure", "kind", "uid", "metric", "value", "better",
                "n_perturbed", "n_ood", "p_value")


def _card(df: pd.DataFrame, kind: str | None = None, explanations: bool | None = None) -> pd.DataFrame:
    """The report-card rows of a run's rows, only the card's columns (CARD_COLUMNS, those present; an empty frame with
    all of them when there are no card rows). kind: only the rows of that kind ("metric", "recovery");
    explanations: True, only the rows of the hand-made explanations (measure PREFIX...), False, only the others.

    One selection, of only those columns: a card run holds hundreds of thousands of rows and thirty-odd columns, mostly
    strings, and every row selection copies each column kept (selecting the card rows, then their kind, copied them
    twice; the other twenty columns were a second of each table)."""
    if "method" not in df.columns:
        return pd.DataFrame(columns=list(CARD_COLUMNS))
    keep = df["method"] == CARD
    if not keep.any():
        return pd.DataFrame(columns=list(CARD_COLUMNS))
    if kind is not None:
        keep &= df["kind"] == kind
    if explanations is not None:
        explanation = df["measure"].str.startswith(PREFIX, na=False)
        keep &= explanation if explanations else ~explanation
    return df[[c for c in CARD_COLUMNS if c in df.columns]][keep]


def recovery_table(df: pd.DataFrame, cis: bool = True) -> pd.DataFrame:
    """Per (model, measure): how often the measure recovers the planted word(s) on the deciding inputs.

    Columns: model, mechanism, measure, n, top_hit (share, Wilson CI top_hit_low/high; higher better), mrr (mean
    reciprocal rank, bootstrap CI; higher better), mass_share (bootstrap CI; higher better), mean_rank (lower
    better), and where present decoy_top1 / inert_top1 (share ranking the decoy / inert word first; lower better),
    decoy_mass_share / inert_mass_share (lower better). cis=False: mrr and mass_share without their bootstrap CIs
    (NaN bounds), for a reader that shows their means only (`report`)."""
    part = _card(df, kind="recovery")
    if part.empty:
        return pd.DataFrame()
    rows = []
    for (model, measure), g in part.groupby(["model", "measure"], sort=False):
        g = g[g["operator"] == g["operator"].iloc[0]]  # recovery does not depend on the operator
        # NaN: an input whose planted word was not found among its tokens (engine.groundtruth.recovery.recovery)
        v = {m: gg["value"].dropna().to_numpy(float) for m, gg in g.groupby("metric")}
        row = {"model": model, "mechanism": g["mechanism"].iloc[0], "measure": measure}
        if "top-hit" in v:
            k, n = int(v["top-hit"].sum()), len(v["top-hit"])
            low, high = wilson_ci(k, n)
            mrr, mlow, mhigh = bootstrap_ci(v["reciprocal-rank"], n_resamples=BOOTSTRAP_RESAMPLES, interval=cis)
            mass, slow, shigh = bootstrap_ci(v["mass-share"], n_resamples=BOOTSTRAP_RESAMPLES, interval=cis)
            row.update({"n": n, "top_hit": k / n, "top_hit_low": low, "top_hit_high": high, "mrr": mrr,
                        "mrr_low": mlow, "mrr_high": mhigh, "mass_share": mass, "mass_share_low": slow,
                        "mass_share_high": shigh, "mean_rank": float(np.mean(v["planted-rank"]))})
        for name in ("decoy", "inert"):
            if f"{name}-top1" in v:
                k, n = int(v[f"{name}-top1"].sum()), len(v[f"{name}-top1"])
                low, high = wilson_ci(k, n)
                row.update({"n": n, f"{name}_top1": k / n, f"{name}_top1_low": low, f"{name}_top1_high": high,
                            f"{name}_mass_share": float(np.mean(v[f"{name}-mass-share"])),
                            f"{name}_mean_rank": float(np.mean(v[f"{name}-rank"]))})
        for name in ("rank-first", "rank-second"):
            if name in v:
                row[f"mean_{name.replace('-', '_')}"] = float(np.mean(v[name]))
        rows.append(row)
    table = pd.DataFrame(rows)
    if "mrr" in table:  # best recovery first (mean over the models), so the table reads top-down
        order = table.groupby("measure")["mrr"].mean().sort_values(ascending=False).index
        table = table.set_index("measure").loc[order].reset_index()
    return table


def _oriented(values: np.ndarray, direction: str) -> np.ndarray:
    return values if direction == "higher" else -values


def _values_by_measure(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """measure -> the metric's value per uid (a Series named 'value', indexed by 'uid', in the rows' order), of the rows
    of one metric: what `{name: s.set_index("uid")["value"] for name, s in rows.groupby("measure", sort=False)}` gives,
    built from positions (a frame per measure and its set_index were half of judge_table's and operator_table's
    time)."""
    uids, values = rows["uid"].array, rows["value"].to_numpy()
    return {name: pd.Series(values[at], index=pd.Index(uids.take(at), name="uid"), name="value")
            for name, at in rows.groupby("measure", sort=False).indices.items()}


def _oriented_pairs(values: dict[str, pd.Series], direction: str, true: str, wrong: str) -> tuple[np.ndarray, np.ndarray]:
    """(true, wrong) values [n] on the inputs both have, oriented so that higher is better (for d_z)."""
    t, w = values.get(PREFIX + true), values.get(PREFIX + wrong)
    if t is None or w is None:
        return np.empty(0), np.empty(0)
    common = t.index.intersection(w.index)
    t = t[~t.index.duplicated()]
    w = w[~w.index.duplicated()]
    return (_oriented(t.loc[common].to_numpy(float), direction), _oriented(w.loc[common].to_numpy(float), direction))


def _preferences(values: dict[str, pd.Series], direction: str, true: str, wrong: str) -> pd.Series:
    """Per input: 1 when the metric prefers the true explanation over `wrong`, 0 when it prefers `wrong`, 0.5 on a
    tie; NaN when either value is undefined. `values`: measure -> the metric's value per uid."""
    t, w = values.get(PREFIX + true), values.get(PREFIX + wrong)
    if t is None or w is None:
        return pd.Series(dtype=float)
    if t.index.is_unique and w.index.is_unique:
        # the inputs both have, in t's order (as t.index.intersection(w.index) orders them), matched by position: one
        # lookup instead of the intersection and two .loc selections
        in_w = w.index.get_indexer(t.index)
        found = in_w >= 0
        common = t.index[found]
        t_values, w_values = t.to_numpy(float)[found], w.to_numpy(float)[in_w[found]]
    else:
        common = t.index.intersection(w.index)
        t_values, w_values = t.loc[common].to_numpy(float), w.loc[common].to_numpy(float)
    if not len(common):
        return pd.Series(dtype=float)
    a, b = _oriented(t_values, direction), _oriented(w_values, direction)
    pref = np.where(np.isnan(a) | np.isnan(b), np.nan, (a > b) + 0.5 * (np.isclose(a, b, rtol=0, atol=1e-12)))
    pref = np.where(np.isclose(a, b, rtol=0, atol=1e-12) & ~np.isnan(a) & ~np.isnan(b), 0.5, pref)
    return pd.Series(pref, index=common)


def judge_table(df: pd.DataFrame, wrong_cis: bool = True) -> pd.DataFrame:
    """(a) Per (model, operator, metric, wrong explanation, and 'all' pooled): the share of deciding inputs on which
    the metric prefers the true explanation (ties half), with a bootstrap CI over inputs (higher = the metric
    recognises the truth; 0.5 = chance); its effect size `d_z` (Cohen's paired d of the metric's value of the true
    explanation over the wrong one's, oriented so that positive favours the truth); `p_sign`, the sign test of the
    win rate against chance, and `q_bh`, its Benjamini-Hochberg adjustment over every row of the table (the card's
    many comparisons: a win rate is called different from chance at a 5% false discovery rate when q_bh < 0.05);
    the MaSF share (p < 0.05) of the perturbed inputs behind the metric's
    value of the true explanation; for the randomisation test also the share of inputs whose true explanation
    passes it (p < 0.05). wrong_cis=False: the rows of one wrong explanation without their CI (NaN low / high; the
    pooled 'all' rows keep theirs), for a reader that shows only the pooled CIs (`report`)."""
    part = _card(df, kind="metric", explanations=True)
    rows = []
    for (model, operator), g in part.groupby(["model", "operator"], sort=False):
        mechanism = g["mechanism"].iloc[0]
        true, wrongs = JUDGE_PAIRS[mechanism]
        measures = set(g["measure"].unique())
        # split once per group, keeping only the columns the rows are made of (boolean masks per metric and measure,
        # and copies of the other string columns, were most of the time)
        used = g[["metric", "measure", "uid", "value", "better", "n_perturbed", "n_ood", "p_value"]]
        by_metric = dict(tuple(used.groupby("metric", sort=False)))
        for metric in in_order(judge_order(), g["metric"]):
            m = by_metric[metric]
            values = _values_by_measure(m)
            direction = m["better"].iloc[0]
            pooled = []
            mt = m[["n_perturbed", "n_ood", "p_value"]][(m["measure"] == PREFIX + true).to_numpy()]
            n_pert = mt["n_perturbed"].sum()
            masf = float(mt["n_ood"].sum() / n_pert) if n_pert and mt["n_ood"].notna().any() else float("nan")
            passed = (float((mt["p_value"] < 0.05).mean()) if metric == "randomisation-win-rate" else float("nan"))
            pairs_t, pairs_w = [], []
            for wrong in [w for w in wrongs if PREFIX + w in measures]:
                pref = _preferences(values, direction, true, wrong).dropna()
                if pref.empty:
                    continue
                pooled.append(pref.to_numpy())
                a, b = _oriented_pairs(values, direction, true, wrong)
                pairs_t.append(a)
                pairs_w.append(b)
                mean, low, high = bootstrap_ci(pref.to_numpy(), n_resamples=BOOTSTRAP_RESAMPLES, interval=wrong_cis)
                rows.append({"model": model, "mechanism": mechanism, "operator": operator, "metric": metric,
                             "label": judge_label(metric), "true": true, "wrong": wrong, "n": len(pref),
                             "prefers_true": mean, "low": low, "high": high, "d_z": paired_effect_size(a, b),
                             "p_sign": preference_p_value(pref.to_numpy()), "masf_share": masf,
                             "true_passes_randomisation": passed})
            if pooled:
                allv = np.concatenate(pooled)
                mean, low, high = bootstrap_ci(allv, n_resamples=BOOTSTRAP_RESAMPLES)
                rows.append({"model": model, "mechanism": mechanism, "operator": operator, "metric": metric,
                             "label": judge_label(metric), "true": true, "wrong": "all", "n": len(allv),
                             "prefers_true": mean, "low": low, "high": high,
                             "d_z": paired_effect_size(np.concatenate(pairs_t), np.concatenate(pairs_w)),
                             "p_sign": preference_p_value(allv), "masf_share": masf,
                             "true_passes_randomisation": passed})
    out = pd.DataFrame(rows)
    if not out.empty:
        out["q_bh"] = benjamini_hochberg(out["p_sign"].to_numpy(float))
    return out


def _truth_score(mechanism: str) -> tuple[str, str]:
    """(recovery metric, direction) that ranks the measures by the truth: the reciprocal rank of the decisive
    word(s); for the control `none`, the inert word's mass share (lower = better); for a set mechanism its main
    separation statistic (SEPARATION_MAIN: graded-set order-spearman, redundant / threshold set-top-share,
    cancellation signs-both; higher better), which a measure can score well on only by giving every planted word
    its due, where the reciprocal rank of one dominant word cannot tell the measures apart."""
    if mechanism in SEPARATION_MAIN:
        return SEPARATION_MAIN[mechanism], "higher"
    return ("inert-mass-share", "lower") if mechanism == "none" else ("reciprocal-rank", "higher")


def column_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each column of `x` with the same column of `y`, both [n, R] -> [R], all columns at once
    (the bootstrap's R resamples of n measures; one scipy.stats.spearmanr call per column was most of the report's
    time). As spearmanr with its defaults: average ranks for ties, Pearson of the ranks clipped to [-1, 1], NaN for a
    column holding a NaN on either side or a constant one (fewer than 2 rows: all NaN)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.shape[0]
    if n < 2:
        return np.full(x.shape[1:], np.nan)
    undefined = (np.isnan(x).any(0) | np.isnan(y).any(0) | (x == x[:1]).all(0) | (y == y[:1]).all(0))
    rx = stats.rankdata(np.where(undefined, 0.0, x), axis=0)  # undefined columns ranked as zeros, then dropped
    ry = stats.rankdata(np.where(undefined, 0.0, y), axis=0)
    rx -= rx.mean(0)
    ry -= ry.mean(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(0) / (np.sqrt((rx * rx).sum(0)) * np.sqrt((ry * ry).sum(0)))
    rho = np.clip(rho, -1.0, 1.0)
    rho[undefined] = np.nan
    return rho


def resampled_mean(values: np.ndarray, draws: np.ndarray, skip_nan: bool = True) -> np.ndarray:
    """`np.nanmean(values[:, idx], -1)` (skip_nan=False: `.mean(-1)`) to the last bit, a row at a time: values [rows,
    inputs]; draws = `idx.T` in C order, [inputs, resamples] (idx [resamples, inputs]: the inputs each bootstrap
    resample draws) -> [rows, resamples].

    The one-shot form materialises [rows, resamples, inputs] (tens of MB per metric: most of spearman_table's time).
    numpy lays that array out with the rows innermost, so its reduction over the inputs adds them one at a time in
    their order; indexing one row with the transposed indices ([inputs, resamples], C order) and reducing over axis 0
    adds in that same order (a reduction over a contiguous last axis would sum pairwise and differ in the last bits,
    which can reorder near-tied measures). A row without NaN takes the plain mean either way: the same sum and
    division as nanmean's. With one row or one resample numpy lays the one-shot array out otherwise; it is small
    then, and computed as it was."""
    if values.shape[0] < 2 or draws.shape[1] < 2:
        drawn = values[:, np.ascontiguousarray(draws.T)]  # [rows, resamples, inputs], indexed as idx (C order) does
        return np.nanmean(drawn, -1) if skip_nan else drawn.mean(-1)
    out = np.empty((values.shape[0], draws.shape[1]))
    for i, row in enumerate(values):
        drawn = row[draws]  # [inputs, resamples]
        out[i] = np.nanmean(drawn, axis=0) if skip_nan and np.isnan(row).any() else drawn.mean(axis=0)
    return out


def spearman_table(df: pd.DataFrame, resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """(b) Per (model, operator, metric): Spearman's rho between the metric's ranking of the measures (mean over
    the deciding inputs, oriented so larger = judged more faithful; RACU as mean ACU / mean random area) and the
    ground-truth ranking (mean reciprocal rank of the planted word(s); control: the inert word's mass share,
    lower better; a set mechanism: its main separation statistic, `_truth_score`), with a percentile bootstrap CI over inputs (the same resampled inputs for both). Higher = the
    metric ranks the measures as the truth does."""
    part = _card(df, explanations=False)
    rows = []
    rng = np.random.default_rng(seed)
    for (model, operator), g in part.groupby(["model", "operator"], sort=False):
        mechanism = g["mechanism"].iloc[0]
        truth_metric, truth_dir = _truth_score(mechanism)
        rec = g[(g["kind"] == "recovery") & (g["metric"] == truth_metric)].pivot_table(
            index="measure", columns="uid", values="value")
        if rec.shape[0] < 3:
            continue
        uids = rec.columns
        idx = rng.integers(0, len(uids), size=(resamples, len(uids)))
        draws = np.ascontiguousarray(idx.T)  # [inputs, resamples], as resampled_mean takes them
        T = _oriented(rec.to_numpy(float), truth_dir)
        truth_full = T.mean(1)
        truth_boot = resampled_mean(T, draws, skip_nan=False)  # [measures, resamples]
        metrics = in_order(judge_order(), g["metric"])
        # every metric's [measure, input] values in one pivot per group (a pivot per metric, each after a boolean
        # selection over string columns, was most of the report's ground-truth time)
        scored = g[g["kind"] == "metric"]
        wide = scored.pivot_table(index=["metric", "measure"], columns="uid", values="value")
        directions = scored.groupby("metric", sort=False)["better"].first()

        def values(name: str) -> np.ndarray:  # [measures in rec's order, inputs in uids' order]
            part = wide.loc[name] if name in wide.index.get_level_values(0) else pd.DataFrame()
            return part.reindex(index=rec.index, columns=uids).to_numpy(float)

        for metric in metrics:
            if metric == RACU_PER_INPUT:
                N, D = values("acu"), values("racu-norm")
                full = np.nanmean(N, 1) / np.nanmean(D, 1)
                boot = resampled_mean(N, draws) / resampled_mean(D, draws)
            else:
                M = _oriented(values(metric), directions[metric])
                full = np.nanmean(M, 1)
                boot = resampled_mean(M, draws)
            ok = np.isfinite(full)
            if ok.sum() < 3:
                continue
            rho = float(stats.spearmanr(full[ok], truth_full[ok]).statistic)
            rb = column_spearman(boot[ok], truth_boot[ok])
            rb = rb[np.isfinite(rb)]
            low, high = (np.percentile(rb, [2.5, 97.5]) if rb.size else (np.nan, np.nan))
            rows.append({"model": model, "mechanism": mechanism, "operator": operator, "metric": metric,
                         "label": judge_label(metric),
                         "spearman": rho, "low": float(low), "high": float(high), "n_measures": int(ok.sum()),
                         "n_inputs": len(uids), "truth": truth_metric})
    return pd.DataFrame(rows)


def operator_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (model, metric): over (input, wrong explanation) pairs judged under every operator of the run, the share
    whose verdict (true preferred, wrong preferred or tie) changes with the operator, with a Wilson CI (lower =
    the metric's verdict does not hinge on how tokens are removed)."""
    part = _card(df, kind="metric", explanations=True)
    rows = []
    for model, g in part.groupby("model", sort=False):
        mechanism = g["mechanism"].iloc[0]
        true, wrongs = JUDGE_PAIRS[mechanism]
        operators = list(g["operator"].unique())  # in the order they first appear
        if len(operators) < 2:
            continue
        # split once, keeping only the columns the verdicts are made of (the other string columns' copies cost)
        used = g[["operator", "metric", "measure", "uid", "value", "better"]]
        by_op_metric = dict(tuple(used.groupby(["operator", "metric"], sort=False)))
        for metric in in_order(judge_order(), g["metric"]):
            verdicts = {}
            for op in operators:
                m = by_op_metric.get((op, metric))
                if m is None:
                    continue
                values = _values_by_measure(m)
                for wrong in wrongs:
                    pref = _preferences(values, m["better"].iloc[0], true, wrong).dropna()
                    for uid, v in pref.items():
                        verdicts.setdefault((uid, wrong), {})[op] = v
            covered = [v for v in verdicts.values() if len(v) == len(operators)]
            used = operators
            if not covered:  # a metric not defined for an operator (NAOPC, F-Fidelity with delete): the others
                used = sorted({op for v in verdicts.values() for op in v})
                covered = [v for v in verdicts.values() if len(v) == len(used)]
            if not covered or len(used) < 2:
                continue
            changed = sum(len(set(v.values())) > 1 for v in covered)
            low, high = wilson_ci(changed, len(covered))
            rows.append({"model": model, "mechanism": mechanism, "metric": metric, "label": judge_label(metric),
                         "operators": " / ".join(used), "n_pairs": len(covered), "changed": changed / len(covered),
                         "low": low, "high": high})
    return pd.DataFrame(rows)


def verdicts(judges: pd.DataFrame, operator: str = "mask") -> list[str]:
    """Plain-words verdict per (model, metric) from `judge_table`'s pooled rows under `operator`:
    "NAOPC preferred the true explanation on 94% (91-96) of 600 comparisons (gt-tiny-rt-or, [MASK])"."""
    out = []
    part = judges[(judges["wrong"] == "all") & (judges["operator"] == operator)] if not judges.empty else judges
    for r in part.itertuples():
        out.append(f"{r.label} preferred the true explanation on {r.prefers_true:.0%} ({r.low:.0%}-{r.high:.0%}) of "
                   f"{r.n} comparisons ({r.model}, {operator})")
    return out


def _share(values: np.ndarray) -> dict:
    """k, n (the finite values), share and its Wilson 95% interval of a 0/1 array with NaN for 'no value'."""
    finite = values[np.isfinite(values)]
    k, n = int(finite.sum()), len(finite)
    low, high = wilson_ci(k, n)
    return {"k": k, "n": n, "share": k / n if n else float("nan"), "low": low, "high": high}


def self_explanation_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (model, self-explanation kind) of a card run (engine.groundtruth.selfexplain_card), over its inputs:

    Columns: model, mechanism, self_explanation, n (inputs); names_metric ('names-planted', or 'names-inert' where no
    word decides: the control) with names_better, names (share among the parsable explanations; its k names_k, n
    names_n, Wilson CI names_low / names_high); inert, inert_n (decoy: the share naming the decoy, lower better; NaN
    elsewhere); per rule R in ('published', 'class_changed'): R_faithful, R_unfaithful, R_not_parsable (shares of
    the n inputs, adding to 1) and agrees_R (share of the judged inputs whose verdict agrees with the truth, with
    agrees_R_k, agrees_R_n and Wilson CI agrees_R_low / agrees_R_high; NaN where nothing decides: none)."""
    part = df[df["method"] == SELF_CARD] if "method" in df.columns else df.iloc[0:0]
    if part.empty:
        return pd.DataFrame()
    rows = []
    for (model, kind), g in part.groupby(["model", "measure"], sort=False):
        kind = kind.split(":", 1)[-1]
        by = {m: gg for m, gg in g.groupby("metric", sort=False)}
        names_metric = "names-planted" if "names-planted" in by else "names-inert"
        names = _share(by[names_metric]["value"].to_numpy(float)) if names_metric in by else _share(np.array([]))
        row = {"model": model, "mechanism": g["mechanism"].iloc[0], "self_explanation": kind,
               "n": int(g["uid"].nunique()), "names_metric": names_metric,
               "names_better": "higher" if names_metric == "names-planted" else "lower",
               "names": names["share"], "names_k": names["k"], "names_n": names["n"], "names_low": names["low"],
               "names_high": names["high"], "inert": np.nan, "inert_n": 0}
        if names_metric == "names-planted" and "names-inert" in by:
            inert = _share(by["names-inert"]["value"].to_numpy(float))
            row.update({"inert": inert["share"], "inert_n": inert["n"]})
        for rule in RULES:
            name = rule.replace("-", "_")
            v = by.get("verdict", g.iloc[0:0])
            words = v[v["rule"] == rule]["verdict"]
            total = max(len(words), 1)
            row.update({f"{name}_faithful": float((words == "faithful").sum()) / total,
                        f"{name}_unfaithful": float((words == "unfaithful").sum()) / total,
                        f"{name}_not_parsable": float((~words.isin(["faithful", "unfaithful"])).sum()) / total})
            a = by.get("truth-agrees", g.iloc[0:0])
            agree = _share(a[a["rule"] == rule]["value"].to_numpy(float))
            row.update({f"agrees_{name}": agree["share"], f"agrees_{name}_k": agree["k"],
                        f"agrees_{name}_n": agree["n"], f"agrees_{name}_low": agree["low"],
                        f"agrees_{name}_high": agree["high"]})
        rows.append(row)
    # models in the run's order, each model's kinds in SELF_KINDS' order
    models = list(dict.fromkeys(part["model"]))
    rows.sort(key=lambda r: (models.index(r["model"]), SELF_KINDS.index(r["self_explanation"])
                             if r["self_explanation"] in SELF_KINDS else len(SELF_KINDS)))
    return pd.DataFrame(rows)


#: the separation statistic each set mechanism's summary ranks the measures by
SEPARATION_MAIN = {"graded-set": "order-spearman", "redundant": "set-top-share", "threshold": "set-top-share",
                   "cancellation": "signs-both"}


def separation_table(df: pd.DataFrame, cis: bool = True) -> pd.DataFrame:
    """Per (model, measure, statistic) of the set mechanisms (engine.groundtruth.recovery.set_recovery): the mean over
    the deciding inputs (each carrying every planted word) with its bootstrap 95% CI, n, and the statistic's best
    possible value (`best`: 1 for each, so a value reads against its ceiling, not against another statistic's).

    Columns: model, mechanism, measure, statistic, n, value, low, high, best. Rows in the order of SEPARATION_BEST,
    measures best first by the mechanism's main statistic (SEPARATION_MAIN)."""
    part = _card(df, kind="recovery")
    part = part[part["metric"].isin(list(SEPARATION_BEST))] if not part.empty else part
    if part.empty:
        return pd.DataFrame(columns=["model", "mechanism", "measure", "statistic", "n", "value", "low", "high", "best"])
    rows = []
    for (model, measure), g in part.groupby(["model", "measure"], sort=False):
        g = g[g["operator"] == g["operator"].iloc[0]]  # recovery does not depend on the operator
        for statistic in in_order(tuple(SEPARATION_BEST), g["metric"]):
            v = g.loc[g["metric"] == statistic, "value"].dropna().to_numpy(float)
            if not len(v):
                continue
            mean, low, high = bootstrap_ci(v, n_resamples=BOOTSTRAP_RESAMPLES, interval=cis)
            rows.append({"model": model, "mechanism": g["mechanism"].iloc[0], "measure": measure,
                         "statistic": statistic, "n": len(v), "value": mean, "low": low, "high": high,
                         "best": SEPARATION_BEST[statistic]})
    table = pd.DataFrame(rows)
    main = table[table["statistic"] == table["mechanism"].map(SEPARATION_MAIN)]
    order = main.groupby("measure")["value"].mean().sort_values(ascending=False).index.tolist()
    order += [m for m in table["measure"].unique() if m not in order]
    table["_m"] = table["measure"].map({m: i for i, m in enumerate(order)})
    table["_s"] = table["statistic"].map({s: i for i, s in enumerate(SEPARATION_BEST)})
    return table.sort_values(["model", "_m", "_s"], kind="stable").drop(columns=["_m", "_s"]).reset_index(drop=True)


def separation_summary(df: pd.DataFrame, exclude: tuple[str, ...] = ("random",)) -> pd.DataFrame:
    """Per model of a set mechanism: whether its card separates the measures on the mechanism's main statistic
    (SEPARATION_MAIN): the best and the worst measure (the `exclude`d ones, the random baseline, left out), their
    values and CIs, the span between them and whether their CIs are apart (best's low above worst's high).

    Columns: model, mechanism, statistic, best_value (the statistic's ceiling), best_measure, best, best_low,
    best_high, worst_measure, worst, worst_low, worst_high, span, apart, n_measures."""
    table = separation_table(df)
    rows = []
    for model, g in table.groupby("model", sort=False):
        mechanism = g["mechanism"].iloc[0]
        statistic = SEPARATION_MAIN[mechanism]
        m = g[(g["statistic"] == statistic) & ~g["measure"].isin(exclude)]
        if m.empty:
            continue
        hi, lo = m.loc[m["value"].idxmax()], m.loc[m["value"].idxmin()]
        rows.append({"model": model, "mechanism": mechanism, "statistic": statistic,
                     "best_value": SEPARATION_BEST[statistic], "best_measure": hi["measure"], "best": hi["value"],
                     "best_low": hi["low"], "best_high": hi["high"], "worst_measure": lo["measure"],
                     "worst": lo["value"], "worst_low": lo["low"], "worst_high": lo["high"],
                     "span": float(hi["value"] - lo["value"]), "apart": bool(hi["low"] > lo["high"]),
                     "n_measures": len(m)})
    return pd.DataFrame(rows)


#: the sign theory gives a planted pair's interaction, by the pair-value's `better` (engine.groundtruth.interactions)
EXPECTED_SIGN = {"higher": "+", "lower": "-", "zero": "0"}


def interaction_table(df: pd.DataFrame, cis: bool = True) -> pd.DataFrame:
    """Per planted AND / OR / threshold model (InteractionCell rows): how often shapley-interactions' top pair is the
    planted pair and its interaction has the sign theory gives (Wilson 95% CIs), the pair's mean interaction in logits
    and its mean rank (bootstrap 95% CI), each beside its best possible value.

    Columns: model, mechanism, words, expected ('+', '-', or '0': threshold with m < k, where theory gives 0 and no
    sign is judged), n, top_pair (share; top_pair_low / _high), top_pair_best (1), sign (share; sign_low / _high; NaN
    where expected is '0'), sign_best (1), value (mean; value_low / _high), rank (mean; rank_low / _high), rank_best
    (1)."""
    columns = ["model", "mechanism", "words", "expected", "n", "top_pair", "top_pair_low", "top_pair_high",
               "top_pair_best", "sign", "sign_low", "sign_high", "sign_best", "value", "value_low", "value_high",
               "rank", "rank_low", "rank_high", "rank_best"]
    if "method" not in df.columns:
        return pd.DataFrame(columns=columns)
    part = df[df["method"] == INTERACTION_CARD]
    if part.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for model, g in part.groupby("model", sort=False):
        v = {m: gg["value"].to_numpy(float) for m, gg in g.groupby("metric")}
        found = ~np.isnan(v.get("pair-top", np.empty(0)))
        direction = g.loc[g["metric"] == "pair-value", "better"].iloc[0] if (g["metric"] == "pair-value").any() else "zero"
        row = {"model": model, "mechanism": g["mechanism"].iloc[0], "words": g["words"].iloc[0] if "words" in g else "",
               "expected": EXPECTED_SIGN.get(direction, "0"), "n": int(found.sum()),
               "top_pair_best": INTERACTION_BEST["pair-top"], "sign_best": INTERACTION_BEST["pair-sign"],
               "rank_best": INTERACTION_BEST["pair-rank"]}
        top = v["pair-top"][found]
        k = int(top.sum())
        low, high = wilson_ci(k, len(top))
        row.update({"top_pair": k / len(top) if len(top) else np.nan, "top_pair_low": low, "top_pair_high": high})
        sign = v.get("pair-sign", np.empty(0))
        sign = sign[~np.isnan(sign)]
        if len(sign) and np.isin(sign, (0.0, 1.0)).all():  # one pair per input: a share of inputs, Wilson
            low, high = wilson_ci(int(sign.sum()), len(sign))
            row.update({"sign": float(sign.mean()), "sign_low": low, "sign_high": high})
        elif len(sign):  # threshold with m = k: each input's share of the set's pairs, bootstrap over inputs
            mean, low, high = bootstrap_ci(sign, n_resamples=BOOTSTRAP_RESAMPLES, interval=cis)
            row.update({"sign": mean, "sign_low": low, "sign_high": high})
        else:
            row.update({"sign": np.nan, "sign_low": np.nan, "sign_high": np.nan})
        for name, key in (("pair-value", "value"), ("pair-rank", "rank")):
            x = v.get(name, np.empty(0))
            x = x[~np.isnan(x)]
            mean, low, high = bootstrap_ci(x, n_resamples=BOOTSTRAP_RESAMPLES, interval=cis) if len(x) else (np.nan,) * 3
            row.update({key: mean, f"{key}_low": low, f"{key}_high": high})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)
