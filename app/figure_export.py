"""Take a page's tables and charts away for a paper: every table as CSV (through engine.csv_safe, so a spreadsheet
never runs a cell as a formula), every chart as PNG, SVG and PDF.

Each file is made when its button is pressed, not when the page is drawn: st.download_button is handed a function
(Streamlit calls it on the click, on a thread of its own), so a page with a dozen charts pays nothing for them until
one is asked for. A chart's file is the chart's own data redrawn with matplotlib (`to_matplotlib`: plotly's static
export needs kaleido and a Chrome it drives, which the project does not ship), in the same colours, dashes, axes,
titles and legend: the palette of app/palette.py is in the figure's traces, so it carries over as it is. The chart's
own toolbar also saves it as SVG in the browser (`toImageButtonOptions`).
"""
from __future__ import annotations

import colorsys
import html
import io
import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
import streamlit as st

from engine.csv_safe import frame_to_csv

FORMATS = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
DPI = 200  # PNG resolution: a figure 6.4 inches wide is 1280 pixels, enough for a printed column
_DASHES = {"solid": "-", "dot": ":", "dash": "--", "dashdot": "-.", "longdash": (0, (8, 3)),
           "longdashdot": (0, (8, 3, 1, 3))}
_SYMBOLS = {"circle": "o", "diamond": "D", "square": "s", "x": "x", "cross": "P", "triangle-up": "^",
            "triangle-down": "v", "star": "*"}
#: plotly's default trace colours (template "plotly"), for traces that name none, in the order plotly gives them
_DEFAULT = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880", "#FF97FF",
            "#FECB52")


# -- tables --------------------------------------------------------------------------------------------------------
def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The table as UTF-8 CSV with formula-like text cells neutralised (engine.csv_safe.frame_to_csv)."""
    return frame_to_csv(frame).encode("utf-8")


def csv_button(frame: pd.DataFrame, stem: str, key: str, label: str = "CSV") -> None:
    """A download button for `frame` as `<stem>.csv`, built on the click."""
    st.download_button(label, lambda: csv_bytes(frame), file_name=f"{safe_stem(stem)}.csv", mime="text/csv", key=key,
                       icon=":material/download:", on_click="ignore")


def table(frame, stem: str, key: str, export: pd.DataFrame | None = None, **dataframe_args) -> None:
    """st.dataframe(frame, **dataframe_args) with its CSV download under it: of `export` where given (the numbers
    behind a frame shown with words in some cells), else of the frame. A pandas Styler is exported as its data."""
    st.dataframe(frame, **dataframe_args)
    data = export if export is not None else getattr(frame, "data", frame)  # a Styler keeps the frame it styles
    if isinstance(data, pd.DataFrame):
        index = not dataframe_args.get("hide_index", False) and not isinstance(data.index, pd.RangeIndex)
        csv_button(data.reset_index() if index else data, stem, key=f"{key}_csv")


def safe_stem(stem: str) -> str:
    """A file name from store values (run, model and dataset names): letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(stem)).strip("-") or "table"


# -- charts --------------------------------------------------------------------------------------------------------
def chart(fig, stem: str, key: str, **plotly_args) -> None:
    """st.plotly_chart(fig) (full width by default) with PNG, SVG and PDF downloads under it, each drawn on the
    click; the chart's toolbar camera saves SVG too."""
    plotly_args.setdefault("width", "stretch")
    config = {"toImageButtonOptions": {"format": "svg", "filename": safe_stem(stem)}, "displaylogo": False}
    st.plotly_chart(fig, config=config, key=key, **plotly_args)
    row = st.container(horizontal=True)
    for fmt, mime in FORMATS.items():
        row.download_button(fmt.upper(), _on_demand(fig, fmt), file_name=f"{safe_stem(stem)}.{fmt}", mime=mime,
                            key=f"{key}_{fmt}", icon=":material/download:", on_click="ignore",
                            help=f"This chart as {fmt.upper()} for a paper (redrawn from its data)")


def _on_demand(fig, fmt: str):
    return lambda: figure_bytes(fig, fmt)


def figure_bytes(fig, fmt: str) -> bytes:
    """The plotly figure `fig` as a `fmt` file (png | svg | pdf), drawn with matplotlib from its data."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown figure format {fmt!r}; use one of {', '.join(FORMATS)}")
    out = io.BytesIO()
    to_matplotlib(fig).savefig(out, format=fmt, dpi=DPI, bbox_inches="tight")
    return out.getvalue()


def colour(value, alpha: float | None = None):
    """A plotly colour ('#RRGGBB', 'rgb(...)', 'rgba(...)', 'hsl(...)', 'hsla(...)' or a CSS name) as matplotlib's
    RGBA tuple; None stays None."""
    from matplotlib.colors import to_rgba

    if value is None:
        return None
    text = str(value).strip().lower().replace(" ", "")
    match = re.fullmatch(r"(rgba?|hsla?)\(([^)]*)\)", text)
    if match:
        kind, parts = match.group(1), match.group(2).split(",")
        a = float(parts[3]) if len(parts) > 3 else 1.0
        if kind.startswith("rgb"):
            rgb = tuple(float(p) / 255 for p in parts[:3])
        else:
            h, s, lightness = float(parts[0]) / 360, float(parts[1].rstrip("%")) / 100, float(parts[2].rstrip("%")) / 100
            rgb = colorsys.hls_to_rgb(h, lightness, s)
        return (*rgb, a if alpha is None else alpha)
    return to_rgba(text, alpha)


def _plain(text) -> str:
    """Chart text as matplotlib draws it: plotly's HTML entities decoded, its tags dropped, '$' not read as TeX."""
    if text is None:
        return ""
    text = re.sub(r"<br\s*/?>", "\n", str(text))
    return html.unescape(re.sub(r"<[^>]+>", "", text)).replace("$", r"\$")


def _values(v) -> list:
    """A trace's data as a list: plain lists, numpy arrays, and plotly's typed arrays of a figure read back from JSON
    ({'dtype': ..., 'bdata': base64, 'shape': 'rows, columns'})."""
    if v is None:
        return []
    if isinstance(v, dict) and "bdata" in v:
        import base64

        array = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        if v.get("shape"):
            array = array.reshape([int(n) for n in str(v["shape"]).split(",")])
        return array.tolist()
    return list(v.tolist() if hasattr(v, "tolist") else v)


def _title(axis_or_layout) -> str:
    title = getattr(axis_or_layout, "title", None)
    return _plain(getattr(title, "text", None)) if title is not None else ""


def _colorscale(scale):
    """A plotly colour scale (a name or [[position, colour], ...]) as a matplotlib colormap."""
    from matplotlib.colors import LinearSegmentedColormap

    if scale is None:
        scale = "Viridis"
    if isinstance(scale, str):
        import plotly.colors

        scale = plotly.colors.get_colorscale(scale)
    return LinearSegmentedColormap.from_list("plotly", [(float(p), colour(c)) for p, c in scale])


def _percent_format(fmt: str | None):
    from matplotlib.ticker import PercentFormatter

    match = re.fullmatch(r"\.(\d+)%", fmt or "")
    return PercentFormatter(1.0, decimals=int(match.group(1))) if match else None


def _trace_colour(trace, index: int):
    line = getattr(trace, "line", None)
    marker = getattr(trace, "marker", None)
    for value in (getattr(line, "color", None), getattr(marker, "color", None)):
        if isinstance(value, str):
            return colour(value)
    return colour(_DEFAULT[index % len(_DEFAULT)])


def _error(bars, n: int):
    """[2, n] lower and upper error lengths of plotly error bars (None without them)."""
    if bars is None or getattr(bars, "array", None) is None or getattr(bars, "visible", True) is False:
        return None
    upper = np.asarray(_values(bars.array), dtype=float)
    lower = np.asarray(_values(bars.arrayminus), dtype=float) if (bars.symmetric is False and
                                                                   bars.arrayminus is not None) else upper
    if upper.size != n:
        return None
    return np.vstack([lower, upper])


def _scatter(ax, trace, index: int, log_y: bool) -> None:
    x, y = _values(trace.x), _values(trace.y)
    if not y:
        return
    if not x:
        x = list(range(len(y)))
    label = _plain(trace.name) if trace.name and trace.showlegend is not False else "_nolegend_"
    line = trace.line
    fill = trace.fill
    if fill in ("toself", "tonext"):
        fc = colour(trace.fillcolor) if trace.fillcolor else (*_trace_colour(trace, index)[:3], 0.2)
        ax.fill(x, y, color=fc, linewidth=0, label=label)
        return
    mode = trace.mode or ("lines+markers" if len(y) < 20 else "lines")
    c = _trace_colour(trace, index)
    width = float(line.width) if line is not None and line.width is not None else 2.0
    style = _DASHES.get(line.dash if line is not None and line.dash else "solid", "-")
    marker = _SYMBOLS.get(str(trace.marker.symbol) if trace.marker and trace.marker.symbol else "circle", "o")
    size = float(trace.marker.size) if trace.marker and isinstance(trace.marker.size, (int, float)) else 6.0
    opacity = float(trace.opacity) if trace.opacity is not None else 1.0
    drawstyle = "steps-post" if line is not None and line.shape == "hv" else "default"
    kwargs = {"color": c, "alpha": opacity, "label": label}
    if "lines" in mode:
        ax.plot(x, y, linestyle=style, linewidth=width * 0.75, drawstyle=drawstyle,
                marker=marker if "markers" in mode else None, markersize=size * 0.6, **kwargs)
    elif "markers" in mode:
        ax.plot(x, y, linestyle="none", marker=marker, markersize=size * 0.6, **kwargs)
    ex, ey = _error(trace.error_x, len(x)), _error(trace.error_y, len(y))
    if ex is not None or ey is not None:
        ax.errorbar(x, y, xerr=ex, yerr=ey, fmt="none", ecolor=c, elinewidth=0.8, capsize=2, label="_nolegend_")
    if "text" in mode and trace.text is not None:
        texts = [trace.text] * len(x) if isinstance(trace.text, str) else _values(trace.text)
        for xi, yi, t in zip(x, y, texts):
            if t:
                ax.annotate(_plain(t), (xi, yi), textcoords="offset points", xytext=(0, 5), ha="center", fontsize=7)


def _bar(ax, trace, index: int) -> None:
    x, y = [_plain(v) for v in _values(trace.x)], _values(trace.y)
    c = _trace_colour(trace, index)
    ey = _error(trace.error_y, len(y))
    ax.bar(x, y, color=c, yerr=ey, capsize=3, label=_plain(trace.name) if trace.name else "_nolegend_")


def _heatmap(fig, ax, trace) -> None:
    z = np.asarray(_values(trace.z), dtype=float)
    coloraxis = getattr(fig.layout, "coloraxis", None)
    scale = trace.colorscale or (coloraxis.colorscale if coloraxis is not None else None)
    zmin = trace.zmin if trace.zmin is not None else (coloraxis.cmin if coloraxis is not None else None)
    zmax = trace.zmax if trace.zmax is not None else (coloraxis.cmax if coloraxis is not None else None)
    reversed_y = fig.layout.yaxis.autorange == "reversed"
    image = ax.imshow(z, cmap=_colorscale(scale), vmin=zmin, vmax=zmax, aspect="auto",
                      origin="upper" if reversed_y else "lower")
    xs = _values(trace.x) or list(range(z.shape[1]))
    ys = _values(trace.y) or list(range(z.shape[0]))
    ax.set_xticks(range(len(xs)), [_plain(v) for v in xs], rotation=45 if len(xs) > 4 else 0,
                  ha="right" if len(xs) > 4 else "center")
    ax.set_yticks(range(len(ys)), [_plain(v) for v in ys])
    template = trace.texttemplate or ""
    match = re.search(r"%\{z:([^}]*)\}", template)
    if match:
        for (i, j), v in np.ndenumerate(z):
            if np.isfinite(v):
                ax.text(j, i, format(v, match.group(1)), ha="center", va="center", fontsize=7)
    bar = ax.figure.colorbar(image, ax=ax)
    title = getattr(getattr(trace, "colorbar", None), "title", None)
    if title is not None and title.text:
        bar.set_label(_plain(title.text))


def _violin(ax, trace, index: int, slot: int, slots: int) -> None:
    x, y = np.asarray(_values(trace.x)), np.asarray(_values(trace.y), dtype=float)
    groups = sorted(set(x.tolist())) if x.size else [0]
    data = [y[x == g] if x.size else y for g in groups]
    positions = np.asarray([float(g) if isinstance(g, (int, float)) else k for k, g in enumerate(groups)])
    step = (np.min(np.diff(positions)) if len(positions) > 1 else 1.0) / max(slots, 1)
    kept = [(p + (slot - (slots - 1) / 2) * step, d) for p, d in zip(positions, data) if len(d)]
    if not kept:
        return
    parts = ax.violinplot([d for _, d in kept], positions=[p for p, _ in kept], widths=step * 0.9,
                          showmedians=True)
    c = _trace_colour(trace, index)
    for body in parts["bodies"]:
        body.set_facecolor(c)
        body.set_alpha(0.4)
    ax.plot([], [], color=c, label=_plain(trace.name) if trace.name else "_nolegend_")


def _shapes(fig, ax) -> None:
    """Lines of add_vline / add_hline (a line over the whole plot's height or width)."""
    for shape in fig.layout.shapes or ():
        if shape.type != "line":
            continue
        style = _DASHES.get(shape.line.dash or "solid", "-") if shape.line is not None else "-"
        c = colour(shape.line.color) if shape.line is not None and shape.line.color else (0, 0, 0, 0.6)
        if shape.x0 == shape.x1 and str(shape.yref or "").endswith("domain"):
            ax.axvline(shape.x0, linestyle=style, color=c, linewidth=0.8)
        elif shape.y0 == shape.y1 and str(shape.xref or "").endswith("domain"):
            ax.axhline(shape.y0, linestyle=style, color=c, linewidth=0.8)


def _annotations(fig, ax, log_x: bool, log_y: bool) -> None:
    for note in fig.layout.annotations or ():
        if not note.text:
            continue
        x = note.x if note.x is not None else 0.5
        y = note.y if note.y is not None else 0.5
        x_paper, y_paper = str(note.xref or "").startswith("paper"), str(note.yref or "").startswith("paper")
        if not x_paper and log_x:
            x = 10 ** float(x)  # plotly places a note on a log axis by its log10
        if not y_paper and log_y:
            y = 10 ** float(y)
        # paper coordinates are the axes' (0..1); matplotlib's "y axis transform" is x in axes, y in data units
        transform = (ax.transAxes if x_paper and y_paper else ax.get_yaxis_transform() if x_paper
                     else ax.get_xaxis_transform() if y_paper else ax.transData)
        ax.text(x, y, _plain(note.text), transform=transform, fontsize=7,
                ha={"right": "right", "left": "left"}.get(note.xanchor, "center"),
                va={"top": "top", "bottom": "bottom"}.get(note.yanchor, "center"))


def _axis(ax, axis, which: str) -> None:
    set_label, set_scale, getter = ((ax.set_xlabel, ax.set_xscale, ax.xaxis) if which == "x"
                                    else (ax.set_ylabel, ax.set_yscale, ax.yaxis))
    set_label(_title(axis))
    log = axis.type == "log"
    if log:
        set_scale("log")
    formatter = _percent_format(axis.tickformat)
    if formatter is not None:
        getter.set_major_formatter(formatter)
    if axis.range is not None:
        low, high = (10 ** float(v) for v in axis.range) if log else (float(v) for v in axis.range)
        (ax.set_xlim if which == "x" else ax.set_ylim)(low, high)
    if axis.tickvals is not None:
        ticks = _values(axis.tickvals)
        (ax.set_xticks if which == "x" else ax.set_yticks)(ticks, [_plain(t) for t in _values(axis.ticktext)] or None)


def to_matplotlib(fig, size: Sequence[float] = (6.4, 4.0)):
    """The plotly figure's data as a matplotlib Figure (no pyplot: safe on Streamlit's threads): scatter lines,
    markers, text, error bars and filled bands, bars, heatmaps with their colour scale and cell text, violins; the
    title, axis titles, log axes, percent ticks, ranges and tick labels; vertical and horizontal lines and notes; a
    legend of the named traces (below the plot when the chart has many)."""
    from matplotlib.figure import Figure

    layout = fig.layout
    height = float(layout.height) if layout.height else 400.0
    out = Figure(figsize=(size[0], max(size[1], height / 100.0 * 0.8)))
    ax = out.add_subplot()
    log_x, log_y = layout.xaxis.type == "log", layout.yaxis.type == "log"
    violins = [t for t in fig.data if t.type == "violin"]
    for index, trace in enumerate(fig.data):
        if trace.visible is False or trace.visible == "legendonly":
            continue
        if trace.type in ("scatter", "scattergl"):
            _scatter(ax, trace, index, log_y)
        elif trace.type == "bar":
            _bar(ax, trace, index)
        elif trace.type == "heatmap":
            _heatmap(fig, ax, trace)
        elif trace.type == "violin":
            _violin(ax, trace, index, violins.index(trace), len(violins))
    _axis(ax, layout.xaxis, "x")
    _axis(ax, layout.yaxis, "y")
    _shapes(fig, ax)
    _annotations(fig, ax, log_x, log_y)
    title = _title(layout)
    if title:
        ax.set_title(title, fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    if labels and layout.showlegend is not False:
        if len(labels) > 6 or (layout.legend is not None and layout.legend.orientation == "h"):
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, frameon=False)
        else:
            ax.legend(fontsize=7, frameon=False)
    if not any(t.type == "heatmap" for t in fig.data):  # a grid over a heatmap's cells hides them
        ax.grid(True, linewidth=0.3, alpha=0.5)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return out
