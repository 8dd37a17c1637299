"""Text labels beside the points of a scatter plot that do not overlap: plotly places every label at the one
`textposition` it is given, so two measures with nearly the same numbers (grad-l1 and grad-l2) print their names on
top of each other. Here points that coincide share one label ("grad-l1 / grad-l2"), and every other label takes the
first of eight places around its point whose box overlaps no label placed before it.

Boxes are estimated in pixels of the plot area: plotly's 12 px label font is about 7 px per character and 16 px
high; the plot area is the figure's width and height less plotly's default margins (80 px each side, 100 px top +
bottom). The estimate errs large, so labels that pass it do not touch on the screen.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CHAR_PX, LINE_PX, GAP_PX = 7.0, 16.0, 6.0
POSITIONS = ("top center", "bottom center", "middle right", "middle left", "top right", "top left", "bottom right",
             "bottom left")
SAME_POINT_PX = 11.0  # points closer than a marker's size (in both directions) are one point to the eye
PAD_PX = 4.0  # space kept between two labels, so that two names never read as one


def pixels(x: Sequence[float], y: Sequence[float], width: float, height: float) -> tuple[np.ndarray, np.ndarray]:
    """The points' positions in pixels of a plot area `width` x `height` spanning the data with 5% padding (as
    plotly's autorange does); y grows downwards."""
    x, y = np.asarray(x, float), np.asarray(y, float)

    def scale(v: np.ndarray, size: float) -> np.ndarray:
        lo, hi = np.nanmin(v), np.nanmax(v)
        span = (hi - lo) or 1.0
        return (v - lo + 0.05 * span) / (1.1 * span) * size

    return scale(x, width), height - scale(y, height)


def label_box(px: float, py: float, text: str, position: str) -> tuple[float, float, float, float]:
    """(left, top, right, bottom) in pixels of `text` placed at `position` around the point (px, py)."""
    w, h = CHAR_PX * len(text), LINE_PX
    vertical, horizontal = position.split()
    left = {"center": px - w / 2, "right": px + GAP_PX, "left": px - GAP_PX - w}[horizontal]
    top = {"top": py - GAP_PX - h, "middle": py - h / 2, "bottom": py + GAP_PX}[vertical]
    return left, top, left + w, top + h


def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float], pad: float = PAD_PX) -> bool:
    """Whether boxes a and b come closer than `pad` pixels."""
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def point_labels(x: Sequence[float], y: Sequence[float], names: Sequence[str], width: float = 800.0,
                 height: float = 360.0) -> tuple[list[str], list[str]]:
    """(label text, textposition) per point: coinciding points' names joined on the first of them (the others get
    ''), each label at the first place around its point that overlaps no earlier label and no point's marker."""
    px, py = pixels(x, y, width, height)
    n = len(names)
    texts = [str(name) for name in names]
    for i in range(n):  # coinciding points: one label
        if not texts[i]:
            continue
        for j in range(i + 1, n):
            if texts[j] and abs(px[i] - px[j]) < SAME_POINT_PX and abs(py[i] - py[j]) < SAME_POINT_PX:
                texts[i] = f"{texts[i]} / {texts[j]}"
                texts[j] = ""
    markers = [(px[k] - 6, py[k] - 6, px[k] + 6, py[k] + 6) for k in range(n)]
    placed: list[tuple[float, float, float, float]] = []
    positions = [POSITIONS[0]] * n
    for i in sorted(range(n), key=lambda k: py[k]):  # from the top of the plot down
        if not texts[i]:
            continue
        for position in POSITIONS:
            box = label_box(px[i], py[i], texts[i], position)
            if not any(overlaps(box, other) for other in placed) and \
                    not any(overlaps(box, m, 0.0) for k, m in enumerate(markers) if k != i):
                break
        else:
            position = POSITIONS[0]
        positions[i] = position
        placed.append(label_box(px[i], py[i], texts[i], position))
    return texts, positions
