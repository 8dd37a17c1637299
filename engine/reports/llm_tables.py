"""The LLM tables of docs/llm.md (`python -m engine docs-tables`): recursive masking of a prompted LM before and after
masked LoRA fine-tuning, and the self-explanation verdicts of both models beside the published findings.

The importance measures are deterministic given one checkpoint, so each is computed once (seed 0) and compared with
the random baseline of every seed (RACU against each random curve of the same inputs): the spread over the random
seeds is the baseline's variability only; there is one fine-tuning run, so nothing here varies the model.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from engine.errors import InvalidInputError


def racu_against_random_seeds(data: pd.DataFrame) -> pd.DataFrame:
    """One row per (measure, random seed): ACU and RACU of the measure's seed-0 curve against that seed's random
    curve on the same inputs. `data`: one run's tidy rows on one set of examples."""
    from engine.faithfulness.summary import area_metrics_per_seed

    measures = data[(data["measure"] != "random") & (data["seed"] == 0)]
    random = data[data["measure"] == "random"]
    parts = []
    for seed in sorted(random["seed"].unique()):
        both = pd.concat([measures.assign(seed=seed), random[random["seed"] == seed]])
        parts.append(area_metrics_per_seed(both))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out[out["measure"] != "random"] if not out.empty else out


def _fmt(values: np.ndarray) -> str:
    return f"{values.mean() * 100:.1f} ({values.min() * 100:.1f} to {values.max() * 100:.1f})"


def llm_racu(runs: Sequence[tuple[str, str]], n_examples: int) -> Callable[[Path], str]:
    """RACU per model (label, run) and measure, against each random seed; the MaSF share of p < 0.05 at the
    deepest masked step where the run has p-values."""

    def build(root: Path) -> str:
        from engine.results.store import ResultsStore

        lines = ["| model | measure | ACU % (min to max over random seeds) | RACU % (min to max over random seeds) | "
                 "RACU per random seed | random seeds | inputs |", "|---|---|---|---|---|---|---|"]
        for label, run in runs:
            data = ResultsStore(root).load(run)
            data = data[data["n_examples"] == n_examples]
            if data.empty:
                raise InvalidInputError(f"run {run!r} in {root} has no cells on {n_examples} examples")
            per = racu_against_random_seeds(data)
            if per.empty:
                lines.append(f"| {label} | (no measure yet) | | | | {data['seed'].nunique()} | {n_examples} |")
                continue
            order = per.groupby("measure")["racu"].mean().sort_values(ascending=False).index
            for measure in order:
                part = per[per["measure"] == measure].sort_values("seed")
                lines.append(f"| {label} | {measure} | {_fmt(part['acu'].to_numpy())} | {_fmt(part['racu'].to_numpy())} | "
                             + " / ".join(f"{v * 100:.0f}" for v in part["racu"]) + f" | {len(part)} | {n_examples} |")
        lines.append("")
        lines.append("Each measure's curve (one checkpoint: deterministic) against the random curve of each seed on the "
                     "same inputs; rows by mean RACU, most faithful first. The spread is the random baseline's only.")
        return "\n".join(lines)

    return build


def _share(row: pd.Series) -> str:
    return f"{row['value'] * 100:.1f}% ({row['ci_low'] * 100:.1f}-{row['ci_high'] * 100:.1f})"


def selfexplain_table(run: str, models: Sequence[tuple[str, str]]) -> Callable[[Path], str]:
    """Verdict shares with 95% Wilson intervals per kind and model (label, model id) from the self-explanation store
    results/selfexplain/<run>/, beside the kind Madsen et al. (2024) found most faithful per model (published)."""

    def build(root: Path) -> str:
        from engine.results.published import load_published
        from engine.results.store import ResultsStore

        data = ResultsStore(root / "selfexplain").load(run)
        published, _ = load_published("madsen2024_selfexplain")
        lines = ["| kind | model | accuracy (inputs) | explained | faithful | unfaithful | not parsable | "
                 "faithful among parsable | Madsen et al. 2024, IMDB: most faithful kind for (published) |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for kind in ("counterfactual", "attribution", "redaction"):
            paper = published[published["most_faithful_kind"] == kind]["model"].tolist()
            for label, model in models:
                part = data[(data["model"] == model) & (data["measure"] == f"self-explanation {kind}")]
                if part.empty:
                    lines.append(f"| {kind} | {label} | not run | | | | | | {', '.join(paper) or '—'} |")
                    continue
                m = part.set_index("metric")
                n = int(m.loc["faithful", "n_examples"])
                parsable = "—" if not np.isfinite(m.loc["faithfulness", "value"]) else _share(m.loc["faithfulness"])
                lines.append(f"| {kind} | {label} | {_share(m.loc['accuracy'])} ({int(m.loc['accuracy', 'n_examples'])}) | "
                             f"{n} | {_share(m.loc['faithful'])} | {_share(m.loc['unfaithful'])} | "
                             f"{_share(m.loc['not parsable'])} | {parsable} | {', '.join(paper) or '—'} |")
        return "\n".join(lines)

    return build


def llm_curves(runs: Sequence[tuple[str, str]], n_examples: int) -> Callable[[Path], str]:
    """The curves themselves: accuracy (%) at each masking ratio per model and measure (random: the mean of its
    seeds), and the mean MaSF share of p < 0.05 per ratio where the run has p-values."""

    def build(root: Path) -> str:
        from engine.results.store import ResultsStore

        frames = []
        for label, run in runs:
            data = ResultsStore(root).load(run)
            data = data[data["n_examples"] == n_examples].assign(model_label=label)
            frames.append(data)
        data = pd.concat(frames)
        ratios = sorted(data["ratio"].unique())
        lines = ["| model | measure | " + " | ".join(f"{r:.0%}" for r in ratios) + " |", "|---" * (len(ratios) + 2) + "|"]
        for label, _ in runs:
            part = data[data["model_label"] == label]
            curves = part.groupby(["measure", "ratio"])["value"].mean().unstack()
            for measure in ["random", *sorted(m for m in curves.index if m != "random")]:
                if measure in curves.index:
                    name = f"random (mean of {part[part['measure'] == 'random']['seed'].nunique()} seeds)" \
                        if measure == "random" else measure
                    lines.append(f"| {label} | {name} | " + " | ".join(f"{v * 100:.0f}" for v in curves.loc[measure]) + " |")
            shares = part.groupby("ratio")["p_below_005"].mean()
            if shares.notna().any():
                lines.append(f"| {label} | MaSF: share of p < 0.05 (all measures) | " +
                             " | ".join(f"{v * 100:.0f}" for v in shares) + " |")
        lines.append("")
        lines.append(f"Accuracy % on the first {n_examples} rt test sentences after masking each ratio of the input "
                     "slot's tokens, most important first.")
        return "\n".join(lines)

    return build


def _accuracy_row(record: dict) -> dict:
    """Test accuracy, its 95% Wilson interval, n, the predicted-positive share and the 100%-masked accuracy of one
    result file: either `scripts/experiments/llm_zero_shot.py`'s output or a masked-LoRA run's metadata (`test`)."""
    if "test" in record:  # a LoRA training run
        t = record["test"]
        return {"accuracy": t["unmasked_accuracy"], "ci": t["unmasked_accuracy_ci95_wilson"], "n": t["n"],
                "k": t["unmasked_n_correct"], "positive": t["unmasked_predicted_share"][-1],
                "masked": (t["masked_100_accuracy"], t["masked_100_accuracy_ci95_wilson"]),
                "code": record.get("code_version"), "seconds": record.get("train_seconds")}
    return {"accuracy": record["accuracy"], "ci": record["ci95_wilson"], "n": record["n"], "k": record["n_correct"],
            "positive": record["predicted_share"].get("positive"), "masked": None,
            "code": record.get("code_version"), "seconds": record.get("seconds_predict")}


def llm_accuracy(rows: Sequence[tuple[str, str, str]]) -> Callable[[Path], str]:
    """Test accuracy of the prompted LMs of both families, zero-/few-shot and masked LoRA: one row per (family,
    model, results/llm file), 95% Wilson intervals, higher is better; each file carries its command and code
    version (provenance), shown in the last column."""

    def build(root: Path) -> str:
        import json

        lines = ["| family | model | test sentences | accuracy % (95% CI) | predicted positive % | "
                 "100%-masked accuracy % | wall seconds | code version | file |", "|---|---|---|---|---|---|---|---|---|"]
        for family, model, name in rows:
            path = root / "llm" / name
            if not path.is_file():
                raise InvalidInputError(f"no result file {path}: run the command in docs/llm.md that writes it")
            r = _accuracy_row(json.loads(path.read_text(encoding="utf-8")))
            masked = "—" if r["masked"] is None else f"{r['masked'][0] * 100:.1f} ({r['masked'][1][0] * 100:.1f}-{r['masked'][1][1] * 100:.1f})"
            lines.append(f"| {family} | `{model}` | {r['n']} | {r['accuracy'] * 100:.1f} ({r['ci'][0] * 100:.1f}-"
                         f"{r['ci'][1] * 100:.1f}), {r['k']}/{r['n']} | {r['positive'] * 100:.1f} | {masked} | "
                         f"{r['seconds'] if r['seconds'] is not None else '—'} | {r['code'] or '—'} | `results/llm/{name}` |")
        lines.append("")
        lines.append("Accuracy on a seeded sample of rt test sentences (seed 0; the same sentences within a family); "
                     "higher is better. 100%-masked: every slot token masked (with [REDACTED], one prompt for all inputs). "
                     "wall seconds: prediction (zero-/few-shot) or the whole training run (LoRA), one thread of the "
                     "shared 2-core machine (about a tenth of a core in the 2026-11-27 runs; CPU seconds in the text).")
        return "\n".join(lines)

    return build


def prompt_selection(files: Sequence[tuple[str, str]], chosen: str) -> Callable[[Path], str]:
    """Validation accuracy of the prompt variants (label, results/llm file), the chosen one marked."""

    def build(root: Path) -> str:
        import json

        lines = ["| variant | validation sentences | accuracy % (95% CI) | predicted positive % | "
                 "label words' share of the next-token probability % | chosen |", "|---|---|---|---|---|---|"]
        for label, name in files:
            r = json.loads((root / "llm" / name).read_text(encoding="utf-8"))
            lines.append(f"| {label} | {r['n']} | {r['accuracy'] * 100:.1f} ({r['ci95_wilson'][0] * 100:.1f}-"
                         f"{r['ci95_wilson'][1] * 100:.1f}) | {r['predicted_share']['positive'] * 100:.1f} | "
                         f"{r['label_word_coverage_first64'] * 100:.0f} | {'**yes**' if name == chosen else ''} |")
        lines.append("")
        lines.append("Higher accuracy is better; the label words' share (mean over the sentences) says how much of the "
                     "LM's next-token probability the verbalizer covers before it is renormalised over the classes.")
        return "\n".join(lines)

    return build
