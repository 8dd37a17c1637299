"""Token heatmaps as HTML built only from escaped text (the engine's `heatmap_html`, also used by the HTML
export, so the page and the exported file look the same).

Every token passes through `html.escape` before it is placed in markup, and the only other values in
the markup are numbers and colours formatted by the engine, so no user text can become HTML (see
tests/app/test_heatmap.py). Signed scores use ColorBrewer's colour-blind-safe PuOr ends (orange = pushes
towards the class, purple = against), absolute scores one sequential hue; each heatmap carries its colour
scale (a gradient bar with the scores at its ends) and the value shows on hover.
"""
from __future__ import annotations

from engine.colours import LEGEND_ABSOLUTE, LEGEND_SIGNED  # noqa: F401 (re-exported for the pages)
from engine.export import heatmap_html as token_heatmap_html  # noqa: F401
