"""Token heatmaps as HTML built only from escaped text.

Every token passes through `html.escape` before it is placed in markup, and the only other values in
the markup are numbers formatted here, so no user text can become HTML (see tests/test_heatmap.py).
Signed scores use a diverging scale (red = pushes towards the class, blue = against), absolute scores
a sequential one; the value shows on hover.
"""
from __future__ import annotations

import html
import math
from collections.abc import Sequence

LEGEND_SIGNED = "red: supports the explained class · blue: speaks against it · hover for the value"
LEGEND_ABSOLUTE = "darker: more important · hover for the value"


def _color(value: float, scale: float, signed: bool) -> str:
    if not math.isfinite(value) or scale <= 0:
        return "transparent"
    a = min(abs(value) / scale, 1.0)
    if signed:
        return f"rgba(214,39,40,{a:.3f})" if value >= 0 else f"rgba(31,119,180,{a:.3f})"
    return f"rgba(117,66,191,{a:.3f})"


def token_heatmap_html(tokens: Sequence[str], scores: Sequence[float] | None, signed: bool,
                       masked: Sequence[bool] | None = None, title: str | None = None) -> str:
    """One line of tokens coloured by score. `masked` marks tokens shown as [MASK] (struck through)."""
    values = [float(s) for s in scores] if scores is not None else [0.0] * len(tokens)
    finite = [abs(v) for v in values if math.isfinite(v)]
    scale = max(finite) if finite else 0.0
    spans = []
    for i, token in enumerate(tokens):
        value = values[i]
        style = f"background:{_color(value, scale, signed)};padding:2px 3px;margin:1px;border-radius:3px;display:inline-block"
        text = html.escape(str(token), quote=True)
        if masked is not None and masked[i]:
            style += ";text-decoration:line-through;color:#888"
        tip = f"{value:+.4g}" if signed else f"{value:.4g}"
        spans.append(f'<span title="{html.escape(tip)}" style="{style}">{text}</span>')
    head = f'<div style="font-weight:600;font-size:0.95rem;margin-bottom:2px">{html.escape(title)}</div>' if title else ""
    return f'<div class="token-heatmap" style="line-height:2;font-family:sans-serif">{head}{"".join(spans)}</div>'
