"""MaSF's false alarms on fresh masked fine-tunings, with every source of variance (scripts/experiments/masf_calibration.py
writes a run; the `masf-false-alarms` table in docs/masf.md reads it through here).

A run folder `masf-calibration/<run>/` holds one JSON per checkpoint (one training seed). Each holds a grid of
cells, `draws` masking draws x `divisions` calibration divisions: draw m masks the calibration inputs (the validation
split) and the test inputs afresh, division d cuts the calibration inputs into folds afresh, and every cell records
which test inputs got p < alpha, `after` (the `FOLDS`-fold cross-fit, fit version 4, what the tool fits) and its
share `before` (one split into three parts, fit version 3). The test inputs are masked like training, so each
p < alpha is a false alarm.

The three sources are nested: every seed used by a cell is a function of (training seed, draw, division)
(`cell_seeds`), so no two checkpoints share a masking draw or a division, and the spread of the checkpoints' means
contains all three. The texts are not resampled by any of them: every checkpoint reads the same test split (and
the same validation split), so the test inputs are crossed with the seeds; `false_alarm_interval` adds their
term (a two-way decomposition over checkpoints x test inputs) and the hierarchical bootstrap resamples them.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from engine.errors import InvalidInputError

ALPHA = 0.05
DIVISIONS = 10
FOLDS = 5
FOLDER = "masf-calibration"
CONFIDENCE = 0.95


def cell_seeds(training_seed: int, draw: int, division: int) -> dict[str, int]:
    """The seeds of one cell, distinct for every (training seed, draw, division) with draw, division < 100: the
    calibration inputs' masking, the test inputs' masking (both per draw) and the folds' permutation (per division
    of a draw). A run that reused one seed for every checkpoint (one test masking, one division for all) would share
    that draw between them, and the spread over checkpoints would not contain it."""
    if not (0 <= draw < 100 and 0 <= division < 100):
        raise InvalidInputError(f"draw and division must be in 0..99, got {draw}, {division}")
    base = 10_000 * int(training_seed) + 100 * draw
    return {"calibration_mask_seed": 1_000_000_000 + base, "test_mask_seed": 2_000_000_000 + base,
            "fold_seed": base + division}


def run_folder(run: str, root: str | Path | None = None) -> Path:
    from engine.settings import results_dir

    return Path(root if root is not None else results_dir()) / FOLDER / run


def load_run(run: str, root: str | Path | None = None) -> list[dict]:
    """The run's records, one per checkpoint, sorted by training seed."""
    folder = run_folder(run, root)
    files = sorted(folder.glob("*.json"))
    if not files:
        raise InvalidInputError(f"no MaSF calibration run {run!r} in {folder.parent} (written by scripts/experiments/masf_calibration.py)")
    records = [json.loads(f.read_text(encoding="utf-8")) for f in files]
    return sorted(records, key=lambda r: (r["training_seed"], r["model"]))


def shares(records: list[dict], key: str = "after") -> np.ndarray:
    """y [S, M, D]: share of test inputs with p < alpha per checkpoint, masking draw and division."""
    grids = []
    for r in records:
        m, d = r["draws"], r["divisions"]
        grid = np.full((m, d), np.nan)
        for cell in r["cells"]:
            grid[cell["draw"], cell["division"]] = cell[key]["share"]
        if np.isnan(grid).any():
            raise InvalidInputError(f"{r['model']}: the grid of {m} draws x {d} divisions is incomplete")
        grids.append(grid)
    if len({g.shape for g in grids}) != 1:
        raise InvalidInputError("the checkpoints of a run must have the same draws x divisions")
    return np.stack(grids)


def flags(records: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(F [S*M*D, n] 1.0 where a cell put a test input below alpha (after), cell index [S*M*D, 3] of (s, m, d))."""
    n = records[0]["n_test"]
    rows, index = [], []
    for s, r in enumerate(records):
        if r["n_test"] != n:
            raise InvalidInputError("the checkpoints of a run must be measured on the same test inputs")
        for cell in sorted(r["cells"], key=lambda c: (c["draw"], c["division"])):
            row = np.zeros(n)
            row[np.asarray(cell["after"]["flagged"], dtype=int)] = 1.0
            rows.append(row)
            index.append((s, cell["draw"], cell["division"]))
    return np.stack(rows), np.asarray(index)


def variance_components(y: np.ndarray) -> dict[str, float]:
    """Nested random-effects decomposition of y [S, M, D] (division within draw within checkpoint; method of
    moments of the balanced nested ANOVA, negative estimates set to 0): the variance of one cell's share that
    comes from the training seed, the masking draw and the calibration division; `mean_variance` is the variance
    of the grand mean, MS_seed / (S M D), unbiased whatever the components."""
    y = np.asarray(y, dtype=float)
    s, m, d = y.shape
    if min(s, m, d) < 2:
        raise InvalidInputError(f"a decomposition needs at least 2 seeds, draws and divisions, got {s} x {m} x {d}")
    sm, s_mean, grand = y.mean(2), y.mean((1, 2)), y.mean()
    ms_seed = m * d * np.sum((s_mean - grand) ** 2) / (s - 1)
    ms_draw = d * np.sum((sm - s_mean[:, None]) ** 2) / (s * (m - 1))
    ms_div = np.sum((y - sm[:, :, None]) ** 2) / (s * m * (d - 1))
    return {"seed": max(0.0, (ms_seed - ms_draw) / (m * d)), "draw": max(0.0, (ms_draw - ms_div) / d),
            "division": float(ms_div), "mean_variance": float(ms_seed / (s * m * d))}


def test_input_variance(f: np.ndarray, seed_of_row: np.ndarray) -> float:
    """The variance the fixed test texts add to the grand mean: every checkpoint reads the same test inputs, so an
    input that is unlike the calibration inputs whatever the model pulls every checkpoint's share the same way,
    which no spread over checkpoints shows. From r [S, n] (each checkpoint's rate per input, over its cells), a
    two-way decomposition without replication: sigma_B^2 = var(input means) - MS_residual / S, divided by n."""
    seeds = np.unique(seed_of_row)
    r = np.stack([f[seed_of_row == s].mean(0) for s in seeds])
    s, n = r.shape
    if s < 2 or n < 2:
        return 0.0
    resid = r - r.mean(1, keepdims=True) - r.mean(0, keepdims=True) + r.mean()
    ms_resid = np.sum(resid ** 2) / ((s - 1) * (n - 1))
    return max(0.0, float(np.var(r.mean(0), ddof=1) - ms_resid / s)) / n


def hierarchical_bootstrap(f: np.ndarray, index: np.ndarray, n_resamples: int = 2000, seed: int = 0,
                           resample_inputs: bool = True) -> np.ndarray:
    """Bootstrap replicates of the grand mean share: checkpoints resampled with replacement, within each its draws,
    within each draw its divisions (nested), and the test inputs resampled once per replicate (crossed: the same
    inputs for every cell; `resample_inputs=False` keeps them). f, index from `flags`; returns [n_resamples] shares."""
    rng = np.random.default_rng(seed)
    s_n, m_n, d_n = (int(index[:, k].max()) + 1 for k in range(3))
    cell = {tuple(ix): c for c, ix in enumerate(index.tolist())}
    n = f.shape[1]
    out = np.empty(n_resamples)
    for b in range(n_resamples):
        weights = np.zeros(len(index))
        for s in rng.integers(0, s_n, s_n):
            for m in rng.integers(0, m_n, m_n):
                for d in rng.integers(0, d_n, d_n):
                    weights[cell[(s, m, d)]] += 1
        inputs = np.bincount(rng.integers(0, n, n), minlength=n) if resample_inputs else np.ones(n)
        out[b] = weights @ (f @ inputs) / (weights.sum() * n)
    return out


def false_alarm_interval(records: list[dict], confidence: float = CONFIDENCE, n_resamples: int = 2000,
                         seed: int = 0) -> dict:
    """The false-alarm rate (share of like-training test inputs with p < alpha, after) over every cell of every
    checkpoint, and its interval with all sources of variance.

    `interval` (the one the docs state): mean +- t_{S-1} sqrt(MS_seed / (S M D) + var_test_inputs), a t-interval
    over the S checkpoints' means (their spread contains seed, draw and division, nested in each) plus the term of
    the test texts every checkpoint shares (`test_input_variance`); S - 1 degrees of freedom for both terms, which
    is conservative for the second. `bootstrap`: the percentile interval of `hierarchical_bootstrap` (0 resamples:
    none), a check. `components`: `variance_components` of the cells' shares, and the test inputs' term."""
    from scipy.stats import t as student

    y = shares(records)
    comp = variance_components(y)
    f, index = flags(records)
    if not np.allclose(f.mean(1), y.reshape(-1)):
        raise InvalidInputError("the flagged test inputs of a cell do not give its share")
    comp["test_inputs"] = test_input_variance(f, index[:, 0])
    s = y.shape[0]
    half = student.ppf(0.5 + confidence / 2, s - 1) * np.sqrt(comp["mean_variance"] + comp["test_inputs"])
    mean = float(y.mean())
    result = {"mean": mean, "interval": (mean - half, mean + half), "components": comp, "shape": y.shape,
              "confidence": confidence, "bootstrap": None}
    if n_resamples:
        reps = hierarchical_bootstrap(f, index, n_resamples, seed)
        tail = (1 - confidence) / 2
        result["bootstrap"] = (float(np.quantile(reps, tail)), float(np.quantile(reps, 1 - tail)))
    return result


def claim(mean: float, low: float, high: float, alpha: float) -> str:
    """The claim an interval supports about a false-alarm rate and its target alpha, in words."""
    if high <= alpha:
        return f"at most alpha: {mean:.1%}, and the interval lies below {alpha:.0%} (at most {high:.1%})"
    if low > alpha:
        return (f"above alpha: {mean:.1%}, the interval [{low:.1%}, {high:.1%}] lies above {alpha:.0%}: at most "
                f"{high:.1%}")
    return (f"about alpha: {mean:.1%} [{low:.1%}, {high:.1%}], which contains {alpha:.0%}; within "
            f"{max(alpha - low, high - alpha):.1%} of alpha either way, so neither \"at most alpha\" nor \"above alpha\" "
            "is shown")


def _sd(x) -> str:
    return f"{np.sqrt(x):.2%}"


def report_table(run: str):
    """Per checkpoint: false alarms over its draws x divisions (after; before beside), the flagged share of the
    completely masked test inputs, the folds' disagreement; then the rate over all cells with its interval, the
    variance components, the claim they support and what one masking draw shared by every checkpoint would leave out."""

    def build(root: Path) -> str:
        records = load_run(run, root)
        alpha = records[0]["alpha"]
        m, d = records[0]["draws"], records[0]["divisions"]
        lines = [f"| model | training seed | cells (draws x divisions) | after: p < {alpha:g}, mean [min, max] | after: sd over draws / "
                 f"divisions | before: p < {alpha:g}, mean [min, max] | all masked flagged, after (mean, n per draw) | folds disagree (after) |",
                 "|---|---|---|---|---|---|---|---|"]
        y_after, y_before = shares(records, "after"), shares(records, "before")
        for r, a, b in zip(records, y_after, y_before):
            cells = r["cells"]
            masked = [c["after"]["share_all_masked"] for c in cells if c["n_all_masked"]]
            n_masked = [c["n_all_masked"] for c in cells]
            flagged = f"{np.mean(masked):.0%}" if masked else "none"
            lines.append(f"| {r['model']} | {r['training_seed']} | {m} x {d} | {a.mean():.1%} [{a.min():.1%}, {a.max():.1%}] | "
                         f"{a.mean(1).std(ddof=1):.2%} / {a.std(1, ddof=1).mean():.2%} | {b.mean():.1%} [{b.min():.1%}, {b.max():.1%}] | "
                         f"{flagged} (n={min(n_masked)}-{max(n_masked)}) | "
                         f"{np.mean([c['after']['folds_disagree'] for c in cells]):.1%} |")
        s = len(records)
        if s < 2:  # the smoke run: one checkpoint has no spread over checkpoints to make an interval of
            lines += ["", f"- one checkpoint ({records[0]['model']}): an interval over checkpoints needs at least two"]
            return "\n".join(lines)
        result = false_alarm_interval(records)
        low, high = result["interval"]
        comp = result["components"]
        before = variance_components(y_before)
        lines += ["", f"- false alarms (p < {alpha:g} on test inputs masked like training, {records[0]['folds']}-fold cross-fit): "
                  f"**{result['mean']:.2%} [{low:.2%}, {high:.2%}]** over {s} checkpoints x {m} masking draws x {d} calibration "
                  f"divisions ({s * m * d} fits; {result['confidence']:.0%} t-interval over the checkpoints' means, {s - 1} degrees of "
                  f"freedom, with the shared test inputs' term); hierarchical bootstrap (checkpoints, draws within, divisions "
                  f"within; test inputs crossed): [{result['bootstrap'][0]:.2%}, {result['bootstrap'][1]:.2%}]",
                  f"- claim: {claim(result['mean'], low, high, alpha)}",
                  f"- standard deviation of one fit's share from each source, after: training seed {_sd(comp['seed'])}, masking "
                  f"draw {_sd(comp['draw'])}, calibration division {_sd(comp['division'])}; of the mean from the shared test "
                  f"inputs {_sd(comp['test_inputs'])}. Before (one split, fit v3): seed {_sd(before['seed'])}, draw "
                  f"{_sd(before['draw'])}, division {_sd(before['division'])}; mean {y_before.mean():.2%}"]
        lines.append(f"- a masking draw shared by every checkpoint (one fixed masking seed for all, as the run before this "
                     f"one masked its test inputs) moves the mean by a standard deviation of {_sd(comp['draw'])} / sqrt(draws) "
                     f"that no spread over checkpoints contains: {_sd(comp['draw'] / m) if m else 'n/a'} with {m} draws, "
                     f"{_sd(comp['draw'])} with one")
        versions = sorted({r["provenance"]["code_version"] for r in records})
        trained = sorted({r["provenance"].get("checkpoint_code_version", "?") for r in records})
        lines += ["", f"`{FOLDER}/{run}`: code {', '.join(versions)} (checkpoints trained by {', '.join(trained)}); "
                  f"{records[0]['n_calibration']} calibration inputs ({records[0]['cells'][0]['after']['n_level3']} rank "
                  f"the final statistic), {records[0]['n_test']} test inputs; training seeds "
                  f"{', '.join(str(r['training_seed']) for r in records)}."]
        return "\n".join(lines)

    return build
