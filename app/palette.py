"""The dashboard's one visual language for charts: which colour a measure's curve gets, how the random baseline
is drawn, and the diverging scale of signed values in matrices. The heatmaps' token colours are engine.colours
(shared with the exported HTML and LaTeX); this module builds on them, so a chart and a heatmap agree.

- **Measures** get colours from the Okabe-Ito palette (colour-blind safe, distinct in greyscale by lightness),
  extended by Paul Tol's muted scheme for charts with more than eight measures. A measure keeps its colour on every
  page: the measures people compare most have fixed ones, the rest take the first free colour in the chart.
- **The random baseline** is never one measure among others: always grey, a dotted line, and its spread a grey band.
- **Signed matrices** (the measures' agreement) use the heatmaps' convention: orange at +1 (agree / supports),
  purple at -1, white at 0.
"""
from __future__ import annotations

from engine.colours import NEGATIVE, POSITIVE, WHITE

# Okabe & Ito (2008), black left out (it reads as the axes), then Tol's muted scheme
CATEGORICAL = ("#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#332288",
               "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499")
#: the measures compared most often keep one colour on every page
FIXED = {"ig-sign": "#0072B2", "grad-l2": "#E69F00", "loo-sign": "#009E73", "x-grad-sign": "#D55E00",
         "deeplift": "#CC79A7", "gradient-shap": "#56B4E9", "occlusion": "#332288", "kernel-shap": "#44AA99",
         "lime": "#999933", "shapley-sampling": "#882255", "attention-rollout": "#88CCEE", "attnlrp": "#117733"}
BASELINE = "#7F7F7F"
BASELINE_DASH = "dot"
RANDOM = "random"


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#{:02X}{:02X}{:02X}".format(*rgb)


#: plotly colour scale for values in [-1, 1] (zmin=-1, zmax=1): purple, white, orange
SIGNED_SCALE = [[0.0, _hex(NEGATIVE)], [0.5, _hex(WHITE)], [1.0, _hex(POSITIVE)]]


def measure_colours(measures) -> dict[str, str]:
    """{measure: colour} for the measures drawn in one chart: random grey, the FIXED ones theirs, the others the
    first CATEGORICAL colours no other measure of the chart has (cycling only beyond 16 measures)."""
    out: dict[str, str] = {}
    names = list(dict.fromkeys(measures))
    for name in names:
        if name == RANDOM:
            out[name] = BASELINE
        elif name in FIXED:
            out[name] = FIXED[name]
    free = [c for c in CATEGORICAL if c not in out.values()] or list(CATEGORICAL)
    for i, name in enumerate(n for n in names if n not in out):
        out[name] = free[i % len(free)]
    return out


def series_colours(n: int) -> list[str]:
    """n colours for series that are not measures (models, runs, groups), in CATEGORICAL order."""
    return [CATEGORICAL[i % len(CATEGORICAL)] for i in range(n)]


def band(colour: str, alpha: float = 0.15) -> str:
    """The fill of a curve's interval band: `colour` ('#RRGGBB') with opacity `alpha`, as a CSS rgba()."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def line_style(measure: str, colour: str, width: float = 3) -> dict:
    """A measure's line: solid in its colour; the random baseline grey and dotted whatever colour it was given."""
    if measure == RANDOM:
        return {"color": BASELINE, "width": width, "dash": BASELINE_DASH}
    return {"color": colour, "width": width}
