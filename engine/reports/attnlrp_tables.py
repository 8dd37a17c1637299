"""The docs table of AttnLRP's conservation on prompted LMs (docs/llm.md "AttnLRP"), printed from the JSON lines of
scripts/experiments/llm_attnlrp_conservation.py under results/llm/attnlrp/: f_c, the relevance summed over the prompt, the gap
and its two parts (network: the attention softmax rule; head: several label words per class), the rank agreement
with x-grad-sign and loo-sign, and the CPU time beside x-grad-sign's."""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path


def attnlrp_markdown(paths: Sequence[str | Path]) -> str:
    """One row per JSON-lines file of scripts/experiments/llm_attnlrp_conservation.py: medians over its sentences."""
    lines = ["| model | sentences | median f_c | median sum R | median abs gap | median abs gap / abs f_c | "
             "median abs network gap | largest abs (network gap + softmax term) | median abs head gap | "
             "median sum abs R | median rho with x-grad-sign | median rho with loo-sign | median rho of x-grad-sign with loo-sign | "
             "median CPU s attnlrp / x-grad-sign |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for path in paths:
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        if not rows:
            lines.append(f"| {path}: no rows |")
            continue

        def med(f, rows=rows):
            return statistics.median(f(r) for r in rows)

        lines.append(
            f"| {rows[0]['model']} | {len(rows)} | {med(lambda r: r['output']):+.3f} | "
            f"{med(lambda r: r['relevance_total']):+.3f} | {med(lambda r: abs(r['conservation_gap'])):.3f} | "
            f"{med(lambda r: abs(r['conservation_gap']) / max(abs(r['output']), 1e-12)):.0%} | "
            f"{med(lambda r: abs(r['network_gap'])):.3f} | "
            f"{max(abs(r['network_gap_beyond_softmax']) for r in rows):.1e} | {med(lambda r: abs(r['head_gap'])):.3f} | "
            f"{med(lambda r: r['abs_relevance']):.3f} | {med(lambda r: r['spearman_x_grad']):+.2f} | "
            f"{med(lambda r: r['spearman_loo']):+.2f} | {med(lambda r: r['spearman_x_grad_loo']):+.2f} | "
            f"{med(lambda r: r['cpu_seconds']['attnlrp']):.2f} / "
            f"{med(lambda r: r['cpu_seconds']['x-grad-sign']):.2f} |")
    return "\n".join(lines)


def attnlrp_table(files: Sequence[str]) -> Callable[[Path], str]:
    """The report's table of these files under results/llm/attnlrp/."""

    def build(root: Path) -> str:
        return attnlrp_markdown([root / "llm" / "attnlrp" / f for f in files])

    return build
