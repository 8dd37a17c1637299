"""Explanations computed elsewhere (inseq, captum, ferret, your own method), read from a file and aligned to the
model's tokens by character offsets, then registered as a measure `imported:<name>` that every metric takes
(erasure metrics, recursive masking: computed once on the unmasked input, as beam search is).

Formats (docs/own-explanations.md), recognised by extension and shape:
- CSV: one line per scored unit (token or word): `id` or `text`, `start`, `end`, `score`, optional `token`,
  `target`, `measure`; the lines of one input are consecutive or share the id/text.
- JSON (a list of records, or {"explanations": [...]}) or JSONL (one record per line). A record has `id` or
  `text`, optional `target` and `measure`/`explainer`, and its units as `spans` [{start, end, score, token?}],
  or as parallel `offsets` [[start, end]], `scores` and optional `tokens`, or (no offsets) as
    ferret: `Explanation` as `dataclasses.asdict` writes it: text, tokens (special tokens included), scores, explainer;
    captum: `LLMAttributionResult` fields input_tokens and seq_attr (with the record's text or id);
  tokens without offsets are found in the text in order (word-piece markers ##, the sentencepiece and byte-level
  space marks and special tokens removed; case-insensitive).
- inseq: `FeatureAttributionOutput.save()` JSON (either `use_primitives`; arrays as lists, `__ndarray__` lists or
  inseq's base64 safetensors). Per sequence, the text is `info["input_texts"][i]`, the units the source tokens
  (encoder-decoder) or the prompt part of the target (decoder-only), the scores the attribution column of the first
  generated token; granular (3-D) attributions must be aggregated first (`out.aggregate()`).

Alignment (per input, with the model's offsets of its maskable tokens): a unit (its whitespace trimmed) must cover
whole model tokens, one (a token-level file from the same tokenizer) or several (a word scored as one unit: each of
its pieces gets the word's score, so they rank together); a model token covered by several units gets the sum of
their scores. A unit that cuts a model token (shifted offsets, or units finer than the model's tokens), covers none
(but whitespace) or leaves a model token without a score refuses the file, naming the row. Units past the end of a truncated input are dropped. Every row is validated before any work:
its text must equal the dataset example's (or its id name one), offsets lie in the text, scores be finite, a
unit's token (when given) equal the text at its offsets, and the row's target (when given) the class evaluated.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from engine.errors import InvalidInputError
from engine.importance.explainer import Explainer
from engine.importance.registry import MEASURES, register
from engine.importance.types import Call

PREFIX = "imported:"
SPECIAL = re.compile(r"^(\[(CLS|SEP|PAD|MASK|BOS|EOS)\]|<s>|</s>|<pad>|<mask>|<bos>|<eos>|<\|[^|]*\|>)$", re.I)
MARKERS = ("##", "\u2581", "\u0120", "\u010a")  # word-piece continuation, sentencepiece / byte-level space, newline


class ScoresFileError(InvalidInputError):
    """A scores file that cannot be read or aligned; the message names the file and its row."""


@dataclass(frozen=True)
class ImportedRow:
    """One explained input as read: where it is in the file (`where`, e.g. 'line 4', 'record 2'), the example it
    names (`uid` and/or `text`), its units as character spans [start, end) with scores (`spans`, or None when only
    `tokens` were given and the spans are found in the text), the units' tokens, and the explained class."""

    where: str
    measure: str
    uid: str | None
    text: str | None
    spans: tuple[tuple[int, int], ...] | None
    tokens: tuple[str, ...] | None
    scores: tuple[float, ...]
    target: int | str | None = None
    unit_where: tuple[str, ...] | None = None  # per unit, where a CSV has one line per unit

    def unit(self, i: int) -> str:
        """Where unit i of the row is: its CSV line, or '<row>, unit i'."""
        return self.unit_where[i] if self.unit_where else f"{self.where}, unit {i}"


def _fail(path, where: str, why: str):
    raise ScoresFileError(f"{Path(path).name}, {where}: {why}")


def _finite(path, where: str, values) -> tuple[float, ...]:
    out = []
    for i, v in enumerate(values):
        try:
            f = float(v)
        except (TypeError, ValueError):
            _fail(path, where, f"score {i} is {v!r}, not a number")
        if not math.isfinite(f):
            _fail(path, where, f"score {i} is {v!r}: scores must be finite")
        out.append(f)
    return tuple(out)


def _offset(path, where: str, v) -> int:
    try:
        f = float(v)
    except (TypeError, ValueError):
        _fail(path, where, f"offset {v!r} is not a whole number")
    if not f.is_integer() or f < 0:
        _fail(path, where, f"offset {v!r} is not a whole number >= 0")
    return int(f)


def _sequence_of(path, where: str, value) -> np.ndarray:
    """A score array of an inseq file as float64: nested lists, {'__ndarray__': list} or base64 safetensors."""
    if isinstance(value, dict) and "__ndarray__" in value:
        value = value["__ndarray__"]
        if isinstance(value, str):
            _fail(path, where, "numpy-compact arrays are not read: save with ndarray_compact=False")
    if isinstance(value, str):
        from safetensors.torch import load

        try:
            tensors = load(base64.b64decode(value))
        except Exception as err:  # noqa: BLE001  (any decoding failure is the file's)
            _fail(path, where, f"the attributions are not base64 safetensors ({err})")
        return next(iter(tensors.values())).double().numpy()
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        _fail(path, where, "the attributions are not an array of numbers")


def _plain(obj):
    """inseq's `use_primitives=False` wraps objects as {'__instance_type__': ..., 'attributes': {...}}."""
    if isinstance(obj, dict) and "__instance_type__" in obj:
        return obj.get("attributes", {})
    return obj


def _inseq_rows(path, data: dict, name: str | None) -> list[ImportedRow]:
    data = _plain(data)
    info = _plain(data.get("info") or {})
    texts = info.get("input_texts") or []
    measure = name or str(info.get("attribution_method") or Path(path).stem)
    rows = []
    for i, seq in enumerate(data.get("sequence_attributions") or []):
        seq, where = _plain(seq), f"sequence {i}"
        if i >= len(texts):
            _fail(path, where, "info['input_texts'] has no text for it")
        if seq.get("source_attributions") is not None:
            tokens = [_plain(t)["token"] for t in seq.get("source") or []]
            matrix = _sequence_of(path, where, seq["source_attributions"])
        elif seq.get("target_attributions") is not None:
            start = int(seq.get("attr_pos_start") or 0)
            tokens = [_plain(t)["token"] for t in (seq.get("target") or [])[:start]]
            matrix = _sequence_of(path, where, seq["target_attributions"])[:start]
        else:
            _fail(path, where, "no source_attributions nor target_attributions")
        if matrix.ndim == 3:
            _fail(path, where, "granular attributions (3-D): aggregate them first (out.aggregate()) and save again")
        if matrix.ndim == 2:
            matrix = matrix[:, 0]  # the first generated token: the label of a classification by generation
        if len(matrix) != len(tokens):
            _fail(path, where, f"{len(tokens)} tokens but {len(matrix)} scores")
        rows.append(ImportedRow(where, measure, None, str(texts[i]), None, tuple(map(str, tokens)),
                                _finite(path, where, matrix.tolist())))
    if not rows:
        _fail(path, "top level", "no sequence_attributions")
    return rows


def _record_row(path, where: str, rec: dict, name: str | None) -> ImportedRow:
    if not isinstance(rec, dict):
        _fail(path, where, f"a record must be an object, got {type(rec).__name__}")
    uid = None if rec.get("id") is None else str(rec["id"])
    text = rec.get("text")
    if uid is None and text is None:
        _fail(path, where, "neither 'id' nor 'text': a row must name its input")
    if text is not None and not isinstance(text, str):
        _fail(path, where, "'text' must be a string")
    measure = name or str(rec.get("measure") or rec.get("explainer") or Path(path).stem)
    target = rec.get("target")
    tokens = spans = None
    if "spans" in rec:
        units = rec["spans"]
        if not isinstance(units, list) or not all(isinstance(u, dict) for u in units):
            _fail(path, where, "'spans' must be a list of {start, end, score}")
        missing = [k for k in ("start", "end", "score") if any(k not in u for u in units)]
        if missing:
            _fail(path, where, f"a span lacks {missing[0]!r}")
        spans = [(u["start"], u["end"]) for u in units]
        scores = [u["score"] for u in units]
        if all("token" in u for u in units):
            tokens = [u["token"] for u in units]
    elif "offsets" in rec:
        spans, scores, tokens = rec["offsets"], rec.get("scores"), rec.get("tokens")
        if scores is None:
            _fail(path, where, "'offsets' without 'scores'")
    elif "input_tokens" in rec and "seq_attr" in rec:  # captum LLMAttributionResult
        tokens, scores = rec["input_tokens"], rec["seq_attr"]
    elif "tokens" in rec and "scores" in rec:  # ferret Explanation
        tokens, scores = rec["tokens"], rec["scores"]
    else:
        _fail(path, where, "no units: give 'spans', 'offsets' + 'scores', 'tokens' + 'scores' (ferret) or "
                           "'input_tokens' + 'seq_attr' (captum)")
    if not isinstance(scores, list):
        _fail(path, where, "the scores must be a list")
    if spans is not None:
        if not isinstance(spans, list) or any(not isinstance(s, list | tuple) or len(s) != 2 for s in spans):
            _fail(path, where, "offsets must be [start, end] pairs")
        spans = [(_offset(path, where, s), _offset(path, where, e)) for s, e in spans]
        if len(spans) != len(scores):
            _fail(path, where, f"{len(spans)} offsets but {len(scores)} scores")
    if tokens is not None and len(tokens) != len(scores):
        _fail(path, where, f"{len(tokens)} tokens but {len(scores)} scores")
    return ImportedRow(where, measure, uid, text, None if spans is None else tuple(spans),
                       None if tokens is None else tuple(map(str, tokens)), _finite(path, where, scores), target)


def _csv_rows(path, name: str | None) -> list[ImportedRow]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        columns = set(reader.fieldnames or ())
        need = {"start", "end", "score"} - columns
        if need or not columns & {"id", "text"}:
            _fail(path, "header", f"columns {sorted(columns)}: a scores CSV needs start, end, score and id or text")
        groups: dict[tuple, dict] = {}
        for line, rec in enumerate(reader, start=2):
            where = f"line {line}"
            key = (rec.get("measure") or name or Path(path).stem, rec.get("id") or None, rec.get("text") or None)
            if key[1] is None and key[2] is None:
                _fail(path, where, "neither id nor text")
            g = groups.setdefault(key, {"where": where, "spans": [], "scores": [], "tokens": [], "target": None, "lines": []})
            g["lines"].append(where)
            g["spans"].append((_offset(path, where, rec["start"]), _offset(path, where, rec["end"])))
            g["scores"].append(_finite(path, where, [rec["score"]])[0])
            g["tokens"].append(rec.get("token"))
            if rec.get("target") not in (None, ""):
                g["target"] = rec["target"]
    rows = []
    for (measure, uid, text), g in groups.items():
        tokens = tuple(g["tokens"]) if all(t is not None for t in g["tokens"]) else None
        rows.append(ImportedRow(g["where"], name or measure, uid, text, tuple(g["spans"]), tokens,
                                tuple(g["scores"]), g["target"], tuple(g["lines"])))
    return rows


def read_scores_file(path: str | Path, name: str | None = None) -> dict[str, list[ImportedRow]]:
    """Every explained input of a scores file, grouped by measure name (a ferret file may hold several
    explainers). `name` overrides the names the file gives. Structure, numbers and offsets are checked here;
    the match with the dataset and the model's tokens in `resolve` and `align`."""
    path = Path(path)
    if not path.is_file():
        raise ScoresFileError(f"no scores file {path}")
    if path.suffix.lower() == ".csv":
        rows = _csv_rows(path, name)
    else:
        try:
            if path.suffix.lower() == ".jsonl":
                lines = [(i, ln) for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
                rows = [_record_row(path, f"line {i}", json.loads(ln), name) for i, ln in lines]
            else:
                data = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and "sequence_attributions" in _plain(data):
                    rows = _inseq_rows(path, data, name)
                else:
                    records = data.get("explanations") if isinstance(data, dict) else data
                    if not isinstance(records, list):
                        _fail(path, "top level", "expected a list of records, {'explanations': [...]} or an inseq "
                                                 "FeatureAttributionOutput")
                    rows = [_record_row(path, f"record {i}", r, name) for i, r in enumerate(records)]
        except json.JSONDecodeError as err:
            raise ScoresFileError(f"{path.name}: not JSON ({err}); use .csv, .json or .jsonl") from None
    if not rows:
        raise ScoresFileError(f"{path.name}: no rows")
    out: dict[str, list[ImportedRow]] = {}
    for r in rows:
        out.setdefault(r.measure, []).append(r)
    return out


def _clean(token: str) -> str:
    for m in MARKERS:
        if token.startswith(m):
            token = token[len(m):]
    return token.strip()


def _fold(s: str) -> str:
    """Case- and accent-insensitive form (what uncased tokenizers do), one character per character."""
    return "".join(unicodedata.normalize("NFKD", c)[0] if c else c for c in s).lower()


def _spans_from_tokens(path, row: ImportedRow, text: str) -> tuple[tuple[int, int] | None, ...]:
    """Find each token of `row` in `text` in order: only whitespace may lie between two tokens; special tokens
    get no span (None)."""
    folded, cursor, spans = _fold(text), 0, []
    for tok in row.tokens:
        piece = _clean(tok)
        if SPECIAL.match(tok.strip()) or not piece:
            spans.append(None)
            continue
        at = folded.find(_fold(piece), cursor)
        if at < 0 or text[cursor:at].strip():
            _fail(path, row.where, f"token {tok!r} is not found in the text after character {cursor} "
                                   f"({text[cursor:cursor + 20]!r}...)")
        spans.append((at, at + len(piece)))
        cursor = at + len(piece)
    return tuple(spans)


def resolve(path, rows: Sequence[ImportedRow], examples: Sequence, split: str = "test") -> list[tuple]:
    """[(row, example, spans)]: each row matched to its dataset example by id (uid) or exact text, its spans
    (found from its tokens when it has no offsets) checked to lie in the text and, with tokens, to read them."""
    by_uid = {e.uid: e for e in examples}
    by_text: dict[str, object] = {}
    for e in examples:
        by_text.setdefault(e.primary, e)
    out = []
    for row in rows:
        if row.uid is not None:
            ex = by_uid.get(row.uid)
            if ex is None:
                _fail(path, row.where, f"id {row.uid!r} is no example of the {split} split (ids look like "
                                       f"{', '.join(list(by_uid)[:3])})")
            if row.text is not None and row.text != ex.primary:
                _fail(path, row.where, f"its text differs from example {row.uid!r}'s text")
        else:
            ex = by_text.get(row.text)
            if ex is None:
                _fail(path, row.where, f"its text {row.text[:40]!r} is the text of no example of the {split} split")
        text = ex.primary
        if row.spans is None:
            spans = _spans_from_tokens(path, row, text)
        else:
            spans = row.spans
            for i, (s, e) in enumerate(spans):
                if not 0 <= s < e <= len(text):
                    _fail(path, row.unit(i), f"offsets ({s}, {e}) outside the text (0, {len(text)}) or empty")
                if row.tokens is not None and _fold(_clean(row.tokens[i])) != _fold(text[s:e].strip()) \
                        and not SPECIAL.match(row.tokens[i].strip()):
                    _fail(path, row.unit(i), f"offsets ({s}, {e}) read {text[s:e]!r} but its token is "
                                           f"{row.tokens[i]!r}")
        out.append((row, ex, spans))
    return out


def align(path, row: ImportedRow, spans, offsets: Sequence[tuple[int, int]], maskable: Sequence[bool],
          truncated: bool, text: str) -> np.ndarray:
    """Scores [T] over the model's positions (offsets [T], maskable [T]) from the row's units (module docstring)."""
    T = len(offsets)
    positions = [t for t in range(T) if maskable[t]]
    out = np.zeros(T)
    covered = np.zeros(T, dtype=bool)
    last_end = max((offsets[t][1] for t in positions), default=0)
    for i, (span, score) in enumerate(zip(spans, row.scores)):
        if span is None:
            continue
        s, e = span
        piece = text[s:e]
        if not piece.strip():
            continue  # a whitespace unit carries no token
        s, e = s + len(piece) - len(piece.lstrip()), e - (len(piece) - len(piece.rstrip()))
        hit = [t for t in positions if offsets[t][0] < e and s < offsets[t][1]]
        if not hit:
            if truncated and s >= last_end:
                continue
            _fail(path, row.unit(i), f"unit ({s}, {e}) {text[s:e]!r} covers no token of the model")
        for t in hit:
            a, b = offsets[t]
            if a < s or b > e:
                _fail(path, row.unit(i), f"unit ({s}, {e}) {text[s:e]!r} cuts the model's token {text[a:b]!r} "
                                         f"({a}, {b}): units are the model's tokens or whole groups of them (words)")
        out[hit] += score
        covered[hit] = True
    for t in positions:
        if not covered[t]:
            a, b = offsets[t]
            _fail(path, row.where, f"the model's token {text[a:b]!r} ({a}, {b}) has no score in the file")
    return out


def target_index(value, classes: Sequence[str]) -> int | None:
    """The class index a row's `target` names (an index or a class name); None when it gives none."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value in classes:
        return list(classes).index(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInputError(f"target {value!r} is neither a class ({', '.join(classes)}) nor an index") from None


class ImportedExplainer(Explainer):
    """imported: scores read from a file (engine/importance/imported.py), aligned to the model's tokens."""

    signed = True
    computed_once = True  # the file scores the unmasked input only: recursive masking ranks once
    # It explains only the inputs its file scores: named by `evaluate --scores`, never offered among the measures
    # that can explain a model (measure_availability skips it), so an import does not leak into pages or `all`.
    file_bound = True
    defaults: ClassVar[dict] = {"file_sha256": ""}
    source: ClassVar[str] = ""
    pairs: ClassVar[tuple] = ()  # (row, example, spans)

    def _table(self) -> dict:
        """{token ids of the input (no padding): (row, scores over its positions)}, aligned once per explainer."""
        if getattr(self, "_aligned", None) is None:
            table = {}
            for row, example, spans in self.pairs:
                target_index(row.target, self.classifier.classes)  # an unknown class refuses the file now
                batch = self.classifier.batch_of([example])
                n = int(batch.attention_mask[0].sum())
                scores = align(self.source, row, spans, batch.offsets[0][:n], batch.maskable[0][:n].tolist(),
                               bool(batch.truncated[0]), example.primary)
                table[tuple(batch.input_ids[0][:n].tolist())] = (row, scores)
            self._aligned = table
        return self._aligned

    def check(self) -> None:
        """Align every row now (refusing the file with the row named) instead of at the first explanation."""
        self._table()

    def _scores(self, call: Call):
        b = call.batch
        table = self._table()
        out = torch.zeros(b.input_ids.shape, dtype=torch.float64)
        for i in range(len(b)):
            n = int(b.attention_mask[i].sum())
            hit = table.get(tuple(b.input_ids[i][:n].tolist()))
            if hit is None:
                raise InvalidInputError(f"input {i} of the batch has no scores in {Path(self.source).name} "
                                        f"({self.name} scores {len(table)} unmasked inputs of the dataset)")
            row, scores = hit
            want = target_index(row.target, self.classifier.classes)
            if want is not None and want != int(call.target[i]):
                raise InvalidInputError(f"{Path(self.source).name}, {row.where}: it explains class "
                                        f"{self.classifier.classes[want]!r} but class "
                                        f"{self.classifier.classes[int(call.target[i])]!r} is explained here")
            out[i, :n] = torch.from_numpy(scores)
        return out.to(b.device), {}


def file_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def register_imported(path, name: str, pairs: Sequence[tuple]) -> str:
    """Register the rows of one measure of a scores file as measure `imported:<name>` (replacing an earlier
    import of that name in this process); returns the measure id. Its one option, file_sha256, keys results to
    the file's content."""
    mid = PREFIX + name
    digest = file_digest(path)
    cls = type(f"Imported_{re.sub(r'[^0-9a-zA-Z]', '_', name)}", (ImportedExplainer,), {
        "name": mid, "source": str(path), "pairs": tuple(pairs), "defaults": {"file_sha256": digest},
        "__doc__": f"{mid}: scores read from {Path(path).name} (sha256 {digest}), aligned by character offsets."})
    if mid in MEASURES and issubclass(MEASURES[mid], ImportedExplainer):
        del MEASURES[mid]
    register(cls)
    return mid


def import_scores(path, examples: Sequence, classifier=None, name: str | None = None,
                  split: str = "test") -> dict[str, str]:
    """Read, match, (with `classifier`) align and register every measure of a scores file; returns
    {measure id: file sha256}. Any bad row refuses the whole file before anything is registered."""
    grouped = read_scores_file(path, name)
    resolved = {m: resolve(path, rows, examples, split) for m, rows in grouped.items()}
    if classifier is not None:
        for m, pairs in resolved.items():
            probe = type("Probe", (ImportedExplainer,), {"name": PREFIX + m, "source": str(path),
                                                         "pairs": tuple(pairs)})
            probe(classifier, memo=False).check()
    return {register_imported(path, m, pairs): file_digest(path) for m, pairs in resolved.items()}
