"""The docs tables of IG's completeness check on prompted LMs (docs/llm.md "IG converges by default"), printed from
the JSON lines of scripts/experiments/llm_ig_completeness.py under results/llm/ig-completeness/: the gap before (20 midpoint
steps) and after the check, and where the same sentences ran on two devices, how far apart they came out."""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path


def read_rows(path: str | Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def device_name(row: dict) -> str:
    """The device a row was computed on; rows written before it was recorded ran on the CPU."""
    runtime = row.get("runtime") or {}
    return runtime.get("gpu") or runtime.get("device") or row.get("device") or "cpu"


def convergence_markdown(rows: list[dict]) -> str:
    """Sentences within the tolerance, median absolute and relative gap and the largest gap, before and after the
    check; then the steps used, the time per sentence and the device. Lower gaps are better; the tolerance is
    max(5% of |f(x) - f(b)|, 0.01 logits)."""
    if not rows:
        return "no rows"

    def within(key):
        return sum(abs(r[key]) <= r["allowed_gap"] for r in rows)

    def median_abs(key):
        return statistics.median(abs(r[key]) for r in rows)

    def median_rel(key):
        return statistics.median(abs(r[key]) / max(abs(r["difference"]), 1e-12) for r in rows)

    def worst(key):
        return max(abs(r[key]) for r in rows)

    steps: dict[int, int] = {}
    for r in rows:
        steps[r["steps_used"]] = steps.get(r["steps_used"], 0) + 1
    n = len(rows)
    lines = ["| IG | sentences | within tolerance (more is better) | median abs gap (lower is better) | "
             "median relative gap | largest abs gap |",
             "|---|---|---|---|---|---|",
             f"| before: 20 midpoint steps | {n} | {within('initial_gap')}/{n} | {median_abs('initial_gap'):.3f} | "
             f"{median_rel('initial_gap'):.1%} | {worst('initial_gap'):.3f} |",
             f"| after: the check (budget {rows[0]['options'].get('max_steps')} steps) | {n} | {within('final_gap')}/{n} | "
             f"{median_abs('final_gap'):.3f} | {median_rel('final_gap'):.1%} | {worst('final_gap'):.3f} |",
             "",
             "steps used: " + ", ".join(f"{k}: {v}" for k, v in sorted(steps.items()))
             + f"; CPU seconds per sentence: median {statistics.median(r['cpu_seconds'] for r in rows):.0f}, "
               f"total {sum(r['cpu_seconds'] for r in rows):.0f}"
             + f"; wall seconds per sentence: median {statistics.median(r['wall_seconds'] for r in rows):.1f}"
             + "; device: " + ", ".join(sorted({device_name(r) for r in rows}))]
    return "\n".join(lines)


def device_agreement_markdown(first: list[dict], second: list[dict]) -> str:
    """The sentences both files hold: the largest difference of f(x), f(b) and both gaps between them, and how many
    ended with the same steps and the same verdict (complete or not)."""
    a = {r["index"]: r for r in first}
    b = {r["index"]: r for r in second}
    both = sorted(set(a) & set(b))
    if not both:
        return "no sentence in both"

    def largest(key):
        return max(abs(a[i][key] - b[i][key]) for i in both)

    devices = f"{', '.join(sorted({device_name(a[i]) for i in both}))} against " \
              f"{', '.join(sorted({device_name(b[i]) for i in both}))}"
    return (f"The {len(both)} sentences computed on both ({devices}): largest difference of f(x) "
            f"{largest('f_input'):.1e}, of f(b) {largest('f_baseline'):.1e}, of the gap before {largest('initial_gap'):.1e} "
            f"and after {largest('final_gap'):.1e} logits; the same steps on {sum(a[i]['steps_used'] == b[i]['steps_used'] for i in both)}"
            f"/{len(both)}, the same verdict on {sum(a[i]['complete'] == b[i]['complete'] for i in both)}/{len(both)}.")


def ig_convergence_table(file: str, compare_with: str | None = None) -> Callable[[Path], str]:
    """The report's table of one JSON-lines file under results/llm/ig-completeness/, with the agreement against
    another file of the same sentences when given."""

    def build(root: Path) -> str:
        folder = root / "llm" / "ig-completeness"
        rows = read_rows(folder / file)
        text = convergence_markdown(rows)
        if compare_with is not None:
            text += "\n\n" + device_agreement_markdown(read_rows(folder / compare_with), rows)
        return text

    return build
