"""The Annotate page's ranking results said in words: which measure annotators found most plausible, whether its
lead is beyond the ratings' uncertainty, where the random baseline landed, whether Bradley-Terry agrees, and how
much the annotators agree (Kendall's W); and the tables' columns named in words.

Inputs are engine.plausibility.summary's rows (`trueskill`: measure, mu, sigma, conservative, rank, matches;
`bradley_terry`: measure, strength, p_beats_average, wins, comparisons, rank; `kendalls_w`: mean_W, tasks)."""
from __future__ import annotations

import math

RANDOM = "random"
#: Kendall's W in words (Schmidt 1997's reading of W: 0.1 very weak, 0.3 weak, 0.5 moderate, 0.7 strong)
AGREEMENT_WORDS = ((0.7, "strong"), (0.5, "moderate"), (0.3, "weak"), (0.0, "very weak"))
TRUESKILL_COLUMNS = {"rank": "rank", "measure": "measure", "mu": "rating (mean)", "sigma": "uncertainty (sigma)",
                     "conservative": "rating - 3 sigma (higher better)", "matches": "rankings it was in"}
BRADLEY_TERRY_COLUMNS = {"rank": "rank", "measure": "measure", "strength": "strength (higher better)",
                         "p_beats_average": "chance to be preferred over an average measure", "wins": "wins",
                         "comparisons": "comparisons"}


def agreement_word(w: float | None) -> str | None:
    """'strong', 'moderate', 'weak' or 'very weak' for Kendall's W; None when there is no W."""
    if w is None or not math.isfinite(w):
        return None
    return next(word for bound, word in AGREEMENT_WORDS if w >= bound)


def _overlap(a: dict, b: dict) -> bool:
    """mu +- 3 sigma of two TrueSkill ratings overlap: the data cannot order them yet."""
    return a["mu"] - 3 * a["sigma"] <= b["mu"] + 3 * b["sigma"] and b["mu"] - 3 * b["sigma"] <= a["mu"] + 3 * a["sigma"]


def ranking_in_words(trueskill: list[dict], bradley_terry: list[dict], kendalls_w: dict | None = None) -> list[str]:
    """Sentences (plain text, measure ids as given) that read the rankings: the order, whether the leader's lead
    is beyond the ratings' uncertainty, random's place, Bradley-Terry's agreement and the annotators' agreement."""
    if not trueskill:
        return []
    rows = sorted(trueskill, key=lambda r: r["rank"])
    order = [r["measure"] for r in rows]
    out = [f"Annotators found {order[0]} the most plausible explanation"
           + (f", then {', then '.join(order[1:])}." if len(order) > 1 else ".")]
    if len(rows) > 1:
        if _overlap(rows[0], rows[1]):
            out.append(f"{order[0]}'s lead over {order[1]} is within the ratings' uncertainty (their mean +- 3 sigma "
                       "overlap): more rankings are needed to tell them apart.")
        else:
            out.append(f"{order[0]}'s lead over {order[1]} is beyond the ratings' uncertainty.")
    if RANDOM in order and len(order) > 1:
        below = order[order.index(RANDOM) + 1:]
        if not below:
            out.append("The random baseline came last: every measure was found more plausible than random scores.")
        else:
            out.append(f"The random baseline ranked {order.index(RANDOM) + 1} of {len(order)}: annotators found "
                       f"{', '.join(below)} no more plausible than random scores.")
    if bradley_terry:
        bt = [r["measure"] for r in sorted(bradley_terry, key=lambda r: r["rank"])]
        if bt == order:
            out.append("Bradley-Terry, fitted to the same rankings as pairwise wins, orders the measures the same way.")
        elif bt[0] == order[0]:
            out.append(f"Bradley-Terry also puts {bt[0]} first but orders the rest otherwise: {', '.join(bt)}.")
        else:
            out.append(f"Bradley-Terry puts {bt[0]} first instead ({', '.join(bt)}): the two ratings disagree.")
    word = agreement_word((kendalls_w or {}).get("mean_W"))
    if word is not None:
        out.append(f"The annotators' agreement on a task's order is {word} (Kendall's W {kendalls_w['mean_W']:.2f} "
                   f"over {kendalls_w['tasks']} tasks ranked by two or more).")
    return out
