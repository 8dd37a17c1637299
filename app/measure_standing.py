"""How a measure fared on the sidebar's model, in one line beside its heatmap on Explain: its RACU rank among the
measures of the model's (or its family's) benchmark run, with the 95% interval; its report-card recovery where the
model has a card of its own (a planted model); "no evidence yet" otherwise; and a link to its curve on Benchmarks.

The evidence is app/trust.py's, the home page's: the same numbers on both pages. A family's report card (a million
rows, seconds to read) is not read here: the home page reads it on request.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app import trust
from app.text import md

BENCHMARKS = str(Path(__file__).resolve().parent.parent / "pages" / "benchmarks.py")


@dataclass(frozen=True)
class Standing:
    """One measure's standing: `lines` in words (plain text: escaped where drawn), and the benchmark run holding its curve (None
    without one)."""

    lines: tuple[str, ...]
    run: str | None


def evidence_for(meta: dict | None) -> tuple[trust.Evidence, ...]:
    """The sidebar entry's benchmark evidence (its runs, else its family's) and its own report cards, most direct
    first; () for no model or no evidence."""
    if meta is None:
        return ()
    found = [trust.benchmark_for(meta)]
    found += [trust.card_for(meta, run, whose) for run, whose in trust.cards_for(meta) if whose == "this model"]
    return tuple(e for e in found if e is not None)


def _percent(standing: trust.Standing) -> str:
    """'289.6% (95% CI 280.1 to 298.0)', or '... (no interval: one seed)'."""
    import math

    if not (math.isfinite(standing.low) and math.isfinite(standing.high)):
        return f"{standing.value:.1f}% (no interval: one seed)"
    return f"{standing.value:.1f}% (95% CI {standing.low:.1f} to {standing.high:.1f})"


def standing_of(measure: str, evidence: tuple[trust.Evidence, ...]) -> Standing:
    """`measure`'s place in each piece of evidence: 'RACU rank 2 of 8: 289.6 (95% CI ...), this model,
    results/tiny-rt-3seeds'; a piece that does not score the measure says so; no evidence at all: 'no evidence yet'."""
    lines, run = [], None
    for item in evidence:
        order = item.order
        whose = "this model" if item.whose == "this model" else "its family (other seeds of its recipe)"
        if measure not in order:
            lines.append(f"{item.kind[0].upper() + item.kind[1:]}: not scored in {item.run}")
            continue
        rank = order.index(measure)
        standing = item.standings[rank]
        if item.kind == "recursive masking":
            run = item.run
            lines.append(f"RACU rank {rank + 1} of {len(order)}: {_percent(standing)}, higher: more faithful "
                         f"({whose}, results/{item.run})")
        else:
            lines.append(f"Report card: planted word ranked first on {_percent(standing)} of deciding inputs, "
                         f"rank {rank + 1} of {len(order)} ({item.run})")
    if not lines:
        lines.append("No evidence yet: no stored run or report card ranks the measures of this model")
    return Standing(tuple(lines), run)


def render_standing(col, measure: str, evidence: tuple[trust.Evidence, ...]) -> None:
    """The standing under a heatmap in column `col`, with a link to the measure's curve on Benchmarks (or, without
    a run, to Benchmarks where cells are computed)."""
    standing = standing_of(measure, evidence)
    col.caption("**Standing on this model.** " + " · ".join(md(line) for line in standing.lines))
    if standing.run is not None:
        col.page_link(BENCHMARKS, label=f"{trust.measure_words(measure)}: its curve in Benchmarks",
                      icon=":material/monitoring:", query_params={"run": standing.run, "part": "curves"})
    elif not evidence:
        col.page_link(BENCHMARKS, label="Compute a ranking in Benchmarks", icon=":material/monitoring:")
