"""Writers that take an explanation away: JSON and CSV (tokens, words, sentences, every measure's scores,
the prediction and the provenance), a self-contained HTML heatmap, and LaTeX colour boxes for a paper figure.

Every piece of user text (the input, its tokens, class names, measure names) is escaped for the format it
lands in: `html.escape` for HTML, `latex_escape` for LaTeX; the only other values in the markup are numbers
and colours formatted here (tests/engine/test_export.py feeds hostile text through each writer).

    record = explanation_record(explanation, classifier, level="word")
    Path("x.html").write_text(to_html(record))
"""
from __future__ import annotations

import csv
import html
import io
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime

from engine.colours import (
    LEGEND_ABSOLUTE,
    LEGEND_SIGNED,
    hex_colour,
    scale_ends,
    score_rgb,
    score_scale,
    text_rgb,
)
from engine.csv_safe import safe_row
from engine.errors import InvalidInputError
from engine.importance.completeness import completeness_warning
from engine.importance.levels import DEFAULT_AGGREGATION, LEVELS, aggregate, check_aggregation, check_level, unit_index

FORMATS = ("json", "csv", "html", "latex")
MIME = {"json": "application/json", "csv": "text/csv", "html": "text/html", "latex": "application/x-latex"}
SUFFIX = {"json": "json", "csv": "csv", "html": "html", "latex": "tex"}
PLURAL = {"token": "tokens", "word": "words", "sentence": "sentences"}


def _number(value) -> float | None:
    """A JSON-safe float: NaN and infinities become null."""
    value = float(value)
    return value if math.isfinite(value) else None


_COMPLETENESS_KEYS = ("completeness_gap", "f_input", "f_baseline", "allowed_gap", "initial_gap")


def _completeness(extras: dict) -> dict:
    """{'completeness': {...}} for a measure that reports completeness (the record's one input), else {}."""
    if "complete" not in extras:
        return {}
    out = {k: _number(extras[k][0]) for k in _COMPLETENESS_KEYS if k in extras}
    out["complete"] = bool(extras["complete"][0])
    if "steps_used" in extras:
        out["steps_used"], out["rule_used"] = int(extras["steps_used"][0]), str(extras["rule_used"][0])
    return {"completeness": out}


def explanation_record(explanation, classifier, level: str = "word", aggregation: str = DEFAULT_AGGREGATION,
                       command: str | None = None) -> dict:
    """Everything an export holds, as plain JSON-able data.

    tokens / words / sentences: one entry per unit with its text, character span [start, end) in `text`, the
    tokens it covers (or, for a token, the word it belongs to) and each measure's score (aggregated by
    `aggregation` for words and sentences); `level` is the view the HTML and LaTeX writers draw.

    Args:
        explanation: an Explanation (`engine.explain_text`); classifier: the model that made it.
        level: 'token', 'word' or 'sentence'; aggregation: how pieces' scores combine ('sum', 'mean', 'max-abs').
        command: the command line that made it, for the provenance.

    Returns:
        A dict (format 'engine.explanation/1') for `to_json`, `to_csv`, `to_html` or `to_latex`.
    """
    from engine.runtime import code_version

    check_level(level)
    check_aggregation(aggregation)
    e = explanation
    probs = [float(p) for p in e.probabilities]
    predicted = int(max(range(len(probs)), key=probs.__getitem__))
    classes = list(classifier.classes)
    record = {
        "format": "engine.explanation/1",
        "text": e.text,
        "level": level,
        "aggregation": aggregation,
        "prediction": {"classes": classes, "probabilities": probs, "predicted": predicted,
                       "predicted_class": classes[predicted]},
        "target": e.target, "target_class": classes[e.target], "target_source": e.target_source,
        "truncated": bool(e.truncated),
        "measures": {m: {"signed": bool(e.signed[m]), "options": e.options.get(m, {}),
                         **_completeness(e.extras.get(m, {}))} for m in e.scores},
        "errors": dict(e.errors),
        # scores that do not add up to f(x) - f(baseline) (engine.importance.completeness), each with its fix
        "warnings": [w for m in e.scores if (w := completeness_warning(m, e.extras.get(m, {})))],
        "provenance": {
            "model_id": classifier.id,
            "weights_sha256": classifier.weights_sha256,
            "base_model": classifier.meta.base_model,
            "dataset": classifier.meta.dataset,
            "code_version": code_version(),
            "command": command,
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "scores": "in the unit of the explained class's logit unless the measure says otherwise",
        },
    }
    words = e.units("word")
    word_of = unit_index(words, len(e.tokens))
    for unit_level in LEVELS:
        units = e.units(unit_level)
        scores = {m: aggregate(v, units, aggregation) for m, v in e.scores.items()}
        rows = []
        for g, unit in enumerate(units):
            row = {"index": g, "text": unit.text, "start": unit.start, "end": unit.end}
            row.update({"word": int(word_of[g])} if unit_level == "token" else {"tokens": list(unit.tokens)})
            row["scores"] = {m: _number(v[g]) for m, v in scores.items()}
            rows.append(row)
        record[PLURAL[unit_level]] = rows
    return record


def to_json(record: dict) -> str:
    return json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False)


def to_csv(record: dict) -> str:
    """One row per token, word and sentence (column `level`), one column per measure, then the prediction
    and provenance repeated on every row (so a row read alone still says what it is)."""
    measures = list(record["measures"])
    prov = record["provenance"]
    constant = {"aggregation": record["aggregation"], "target": record["target"], "target_class": record["target_class"],
                "target_source": record["target_source"], "predicted_class": record["prediction"]["predicted_class"],
                "p_predicted": record["prediction"]["probabilities"][record["prediction"]["predicted"]],
                "model_id": prov["model_id"], "weights_sha256": prov["weights_sha256"],
                "code_version": prov["code_version"], "created": prov["created"],
                "warnings": " | ".join(record.get("warnings", []))}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(safe_row(["level", "index", "text", "start", "end", "word", *measures, *constant]))
    for level in LEVELS:
        for row in record[PLURAL[level]]:
            scores = ["" if row["scores"][m] is None else repr(row["scores"][m]) for m in measures]
            # safe_row: a token such as '=HYPERLINK(...)' must not run as a formula when the CSV is opened
            writer.writerow(safe_row([level, row["index"], row["text"], row["start"], row["end"], row.get("word", ""),
                                      *scores, *constant.values()]))
    return out.getvalue()


# -- HTML -----------------------------------------------------------------------------------------------

def _end(value: float, signed: bool) -> str:
    return f"{value:+.3g}" if signed else f"{value:.3g}"


def colour_scale_html(scale: float, signed: bool) -> str:
    """A small gradient bar with the scores at its ends (and 0 in the middle of a signed one)."""
    low, high = scale_ends(scale, signed)
    stops = ([hex_colour(score_rgb(-1, 1, True)), "#ffffff", hex_colour(score_rgb(1, 1, True))] if signed
             else ["#ffffff", hex_colour(score_rgb(1, 1, False))])
    bar = (f'<span style="display:inline-block;width:140px;height:10px;border:1px solid #999;vertical-align:middle;'
           f'background:linear-gradient(to right,{",".join(stops)})"></span>')
    return (f'<div class="colour-scale" style="font-size:0.75rem;color:#555;margin-top:2px">'
            f'<span class="scale-min">{_end(low, signed)}</span> {bar} <span class="scale-max">{_end(high, signed)}</span>'
            + (' <span style="color:#888">(0 = white)</span>' if signed else "") + "</div>")


def heatmap_html(units: Sequence[str], scores: Sequence[float] | None, signed: bool,
                 masked: Sequence[bool] | None = None, title: str | None = None, scale_bar: bool = True,
                 title_tip: str | None = None, scale: float | None = None) -> str:
    """One line of tokens (or words, sentences) coloured by score, with the colour scale under it.
    `masked` marks units shown as [MASK] (struck through and outlined); `title_tip`: the title's tooltip (e.g. the
    measure's formula, while the title says its name in words); `scale`: the |score| that gets the full colour
    (default: the largest of these scores; heatmaps drawn to be compared pass one scale to each)."""
    values = [float(s) for s in scores] if scores is not None else [0.0] * len(units)
    if len(values) != len(units):
        raise InvalidInputError(f"{len(units)} units but {len(values)} scores")
    scale = score_scale(values) if scale is None else float(scale)
    spans = []
    for i, unit in enumerate(units):
        value = values[i]
        background = score_rgb(value, scale, signed)
        style = (f"background:{hex_colour(background)};color:{hex_colour(text_rgb(background))};"
                 "padding:2px 3px;margin:1px;border-radius:3px;display:inline-block")
        text = html.escape(str(unit), quote=True)
        if masked is not None and masked[i]:
            style += ";text-decoration:line-through;outline:1px dashed #666;opacity:0.75"
        tip = (f"{value:+.4g}" if signed else f"{value:.4g}") if scores is not None else "no score"
        spans.append(f'<span title="{html.escape(tip)}" style="{style}">{text}</span>')
    head_tip = f' title="{html.escape(title_tip, quote=True)}"' if title_tip else ""
    head = (f'<div class="heatmap-title"{head_tip} style="font-weight:600;font-size:0.95rem;margin-bottom:2px">'
            f'{html.escape(title)}</div>') if title else ""
    bar = colour_scale_html(scale, signed) if scale_bar and scores is not None else ""
    return (f'<div class="token-heatmap" style="line-height:2;font-family:sans-serif">{head}{"".join(spans)}'
            f"{bar}</div>")


def _view(record: dict, level: str | None) -> tuple[str, list[dict]]:
    level = check_level(level or record["level"])
    return level, record[PLURAL[level]]


def to_html(record: dict, level: str | None = None) -> str:
    """A self-contained HTML page (no scripts, no external files): the prediction, one heatmap per measure
    at `level` (default: the record's), the legend and the provenance."""
    level, units = _view(record, level)
    e = html.escape
    pred = record["prediction"]
    prov = record["provenance"]
    parts = [f"<h1>Explanation of {e(prov['model_id'])}</h1>",
             f"<p>Prediction: <b>{e(pred['predicted_class'])}</b> ({pred['probabilities'][pred['predicted']]:.1%}); "
             f"explained class: <b>{e(record['target_class'])}</b> ({e(record['target_source'])}). "
             f"Level: {e(level)}" + (f", scores summed over each {e(level)}'s tokens by {e(record['aggregation'])}"
                                     if level != "token" else "") + ".</p>"]
    for measure, info in record["measures"].items():
        scores = [u["scores"][measure] for u in units]
        values = [float("nan") if v is None else v for v in scores]
        parts.append(heatmap_html([u["text"] for u in units], values, info["signed"], title=measure))
        parts.append(f'<p class="legend">{e(LEGEND_SIGNED if info["signed"] else LEGEND_ABSOLUTE)}</p>')
        completeness = info.get("completeness")
        if completeness is not None and completeness["complete"] is False:
            warning = next((w for w in record.get("warnings", []) if w.startswith(measure + ":")), "")
            parts.append(f'<p class="warning"><b>Warning:</b> {e(warning)}</p>')
    rows = "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in prov.items())
    parts.append(f"<h2>Provenance</h2><table>{rows}</table><h2>Text</h2><pre>{e(record['text'])}</pre>")
    return ("<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Explanation</title>"
            "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto}th{text-align:left;padding-right:1rem}"
            "pre{white-space:pre-wrap}.legend{font-size:0.8rem;color:#555}.warning{color:#8a4b00}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


# -- LaTeX ----------------------------------------------------------------------------------------------

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#",
                   "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%", "~": r"\textasciitilde{}",
                   "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def _rgb(rgb: tuple[int, int, int]) -> str:
    return ",".join(str(int(c)) for c in rgb)


def latex_escape(text: str) -> str:
    """`text` as LaTeX that prints it literally (the ten specials, and < > | that OT1 fonts misprint)."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text)).replace("\n", " ")


def to_latex(record: dict, level: str | None = None) -> str:
    """A LaTeX fragment for a figure: per measure, the units in \\colorbox[RGB] boxes (the same colours as the
    app). Needs `\\usepackage{xcolor}` (and UTF-8 input for non-ASCII text)."""
    level, units = _view(record, level)
    prov = record["provenance"]
    def comment(text: str) -> str:  # a line break would end the comment and start LaTeX
        return "% " + " ".join(str(text).split())

    lines = [comment(f"Token importance exported by engine {prov['code_version']}: model {prov['model_id']} "
                     f"(sha256 {prov['weights_sha256']}); level {level}; aggregation {record['aggregation']}; "
                     f"created {prov['created']}"),
             comment("Needs \\usepackage{xcolor} in the preamble."),
             *(comment("Warning: " + w) for w in record.get("warnings", [])),
             "{\\setlength{\\fboxsep}{1.5pt}%"]
    for measure, info in record["measures"].items():
        values = [float("nan") if u["scores"][measure] is None else u["scores"][measure] for u in units]
        scale = score_scale(values)
        boxes = []
        for unit, value in zip(units, values):
            bg = score_rgb(value, scale, info["signed"])
            fg = text_rgb(bg)
            word = latex_escape(unit["text"])
            if fg != (0, 0, 0):
                word = f"\\textcolor[RGB]{{{_rgb(fg)}}}{{{word}}}"
            boxes.append(f"\\colorbox[RGB]{{{_rgb(bg)}}}{{\\strut {word}}}")
        low, high = scale_ends(scale, info["signed"])
        lines.append(f"\\noindent\\textbf{{{latex_escape(measure)}}} "
                     f"{{\\footnotesize(colour scale {low:+.3g} to {high:+.3g})}}\\par")
        lines.append("\\noindent " + "\\allowbreak\n".join(boxes) + "\\par\\medskip")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write(record: dict, fmt: str) -> str:
    """The record in `fmt` (json, csv, html or latex)."""
    writers = {"json": to_json, "csv": to_csv, "html": to_html, "latex": to_latex}
    if fmt not in writers:
        raise InvalidInputError(f"unknown export format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    return writers[fmt](record)
