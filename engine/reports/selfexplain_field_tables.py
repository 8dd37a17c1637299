"""The docs table of the self-explanation tests beyond Madsen et al. (engine.selfexplain.field), printed from the
self-explanation store results/selfexplain/<run>/ (docs/llm.md "Self-explanation tests beyond Madsen et al.")."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


def field_tests_table(runs: Sequence[str], models: Sequence[tuple[str, str]]) -> Callable[[Path], str]:
    """One row per (test, model, metric): value with its 95% interval, the direction of better, the inputs."""

    def build(root: Path) -> str:
        import pandas as pd

        from engine.results.store import ResultsStore
        from engine.selfexplain.field import FIELD_TESTS

        store = ResultsStore(root / "selfexplain")
        data = pd.concat([store.load(run) for run in runs], ignore_index=True)
        lines = ["| test | model | metric | value (95% CI) | better | inputs | source |", "|---|---|---|---|---|---|---|"]
        for kind, test in FIELD_TESTS.items():
            for label, model in models:
                part = data[(data["model"] == model) & (data["measure"] == f"self-explanation {kind}")]
                if part.empty:
                    lines.append(f"| {kind} | {label} | not run | | | | {test.source} |")
                    continue
                for m in test.metrics:
                    row = part[part["metric"] == m.name]
                    if row.empty:
                        continue
                    r = row.iloc[0]
                    v, lo, hi = float(r["value"]), float(r["ci_low"]), float(r["ci_high"])
                    shown = "n/a" if not np.isfinite(v) else (f"{v:.0f}" if m.key == "not_parsable" else f"{v:.2f}")
                    if np.isfinite(lo) and np.isfinite(hi) and m.key != "not_parsable":
                        shown += f" ({lo:.2f} to {hi:.2f})"
                    lines.append(f"| {kind} | {label} | {m.name} | {shown} | {m.better} | {int(r['n_examples'])} | "
                                 f"{test.source} |")
        return "\n".join(lines)

    return build
