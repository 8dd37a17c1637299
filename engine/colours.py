"""The colours of importance scores, shared by the app's heatmaps and the exported HTML and LaTeX.

Colour-blind safe: signed scores use the two ends of ColorBrewer's PuOr diverging scheme (orange: supports
the explained class; purple: speaks against it), which stay apart under deuteranopia, protanopia and
tritanopia and in greyscale (the orange end is light, the purple end dark); unsigned scores one
sequential hue (ColorBrewer BrBG's teal end). A score's colour is white blended towards its end colour by
|score| / scale, with `scale` the largest |score| of the row, so 0 is white and the largest score full colour.
"""
from __future__ import annotations

import math

WHITE = (255, 255, 255)
POSITIVE = (230, 97, 1)  # PuOr #e66101
NEGATIVE = (94, 60, 153)  # PuOr #5e3c99
UNSIGNED = (1, 102, 94)  # BrBG #01665e

LEGEND_SIGNED = "orange: supports the explained class · purple: speaks against it · bar: the colour scale · hover for the value"
LEGEND_ABSOLUTE = "darker teal: more important · bar: the colour scale · hover for the value"


def score_scale(values) -> float:
    """The largest finite |value| (0.0 when there is none): the score that gets the full colour."""
    finite = [abs(float(v)) for v in values if math.isfinite(float(v))]
    return max(finite) if finite else 0.0


def score_rgb(value: float, scale: float, signed: bool) -> tuple[int, int, int]:
    """(r, g, b) in 0..255 of `value` on a scale whose ends are -scale..+scale (signed) or 0..scale."""
    if not math.isfinite(value) or scale <= 0:
        return WHITE
    a = min(abs(value) / scale, 1.0)
    end = (POSITIVE if value >= 0 else NEGATIVE) if signed else UNSIGNED
    return tuple(int(round(w + (c - w) * a)) for w, c in zip(WHITE, end))


def text_rgb(background: tuple[int, int, int]) -> tuple[int, int, int]:
    """Black or white text, whichever reads better on `background` (WCAG relative luminance)."""
    def channel(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in background)
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return (0, 0, 0) if (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) else (255, 255, 255)


def hex_colour(rgb: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def scale_ends(scale: float, signed: bool) -> tuple[float, float]:
    """The scores at the two ends of the colour bar."""
    return (-scale, scale) if signed else (0.0, scale)
