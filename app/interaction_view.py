"""The top pairs of the shapley-interactions measure under its heatmap on the Explain page: a small table of the
pairs of words (or tokens) whose pairwise Shapley interaction is largest in magnitude, each coloured on the signed
scale of the heatmaps (orange: the two together add more than each alone, as an AND; purple: either suffices, as an
OR). Built only from escaped text: the words are the user's (tests/app/test_interaction_view.py, test_browser_pairs.py)."""
from __future__ import annotations

import html

from engine.colours import score_rgb, text_rgb

#: how many pairs the view shows
TOP_PAIRS = 8


def player_text(pairs, player: int, text: str, offsets: list[tuple[int, int]], tokens: list[str]) -> str:
    """A player's words as typed (its tokens' character span in `text`), or its pieces joined where the tokens have
    no span (a model without offsets)."""
    members = pairs.players[player]
    if offsets:
        start, end = offsets[members[0]][0], offsets[members[-1]][1]
        if end > start:
            return text[start:end].strip()
    return pairs.label(player, tokens)


def pairs_html(pairs, text: str, offsets: list[tuple[int, int]], tokens: list[str], k: int = TOP_PAIRS) -> str:
    """An HTML table (class `interaction-pairs`) of the top `k` pairs of one input's `PairInteractions`: the two words,
    the interaction (logits) in the heatmaps' signed colours, and how it reads. Every word passes html.escape."""
    top = pairs.top(k)
    scale = max((abs(v) for _, _, v in top), default=0.0)
    how = "exact" if pairs.exact else f"estimated from {pairs.budget} evaluations"
    rows = []
    for i, j, v in top:
        r, g, b = score_rgb(v, scale, True)
        tr, tg, tb = text_rgb((r, g, b))
        reads = "together more than apart (AND-like)" if v > 0 else "either suffices (OR-like)" if v < 0 else "no interaction"
        rows.append(f"<tr><td>{html.escape(player_text(pairs, i, text, offsets, tokens))}</td>"
                    f"<td>{html.escape(player_text(pairs, j, text, offsets, tokens))}</td>"
                    f'<td class="pair-value" style="background:rgb({r},{g},{b});color:rgb({tr},{tg},{tb})">{v:+.4f}</td>'
                    f"<td>{reads}</td></tr>")
    caption = (f"Top {len(top)} of {len(pairs.pairs)} word pairs by |{html.escape(pairs.index)}| interaction "
               f"({html.escape(pairs.level)} players, {how}; logits)")
    return ('<table class="interaction-pairs" style="border-collapse:collapse;font-size:0.9em">'
            f"<caption style='caption-side:top;text-align:left'>{caption}</caption>"
            "<tr><th>first</th><th>second</th><th>interaction</th><th>reads as</th></tr>" + "".join(rows) + "</table>")


def show_pairs(col, result, measure: str) -> None:
    """Under `measure`'s heatmap in `col`: its top pairs, when the measure gives pairs (shapley-interactions); nothing
    otherwise. `result`: the page's engine.explain.Explanation."""
    found = result.extras.get(measure, {}).get("interactions")
    if not found:
        return
    pairs = found[0]
    if not pairs.pairs:
        col.caption("One word only: no pair to show.")
        return
    col.html(pairs_html(pairs, result.text, result.offsets, result.tokens))
