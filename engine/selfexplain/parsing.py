"""The self-explanation prompts and the parsing of the model's answers (docs/methods.md#self-explanations, after Madsen,
Chandar & Reddy 2024; the wording here is this project's own).

Every parser returns `(value, reason)`: value None means "not parsable" and `reason` says why. Given the input
text, each also applies the rule of engine.selfexplain.replies for its kind (check_rewrite, check_redaction,
check_attribution: each rule's docstring states the object asked for), so a reply that is not that object is not
parsable.

    counterfactual   the edited text: the answer with preambles ("Here is the edited text:"), HTML, markdown
                     and surrounding quotes stripped; a refusal or an empty answer is not parsable
    attribution      the important words: numbered or bulleted lines, else quoted words in a sentence, else
                     a comma/semicolon/newline list (quotes after "... are" when the answer quotes its subject
                     first; items of more than MAX_WORDS words are sentences, not words, and are dropped);
                     quotes, markup and trailing explanations ("funny - shows ...") stripped; only words
                     that occur in the input (whole word, case-insensitive) are kept; none left: not parsable
    redaction        the rewritten text as for counterfactual, variants of the mask token ("[redacted]",
                     "[ REDACTED ]") normalised; an answer that redacts nothing is not parsable
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable

from engine.selfexplain.replies import check_attribution, check_redaction, check_rewrite, is_refusal

KINDS = ("counterfactual", "attribution", "redaction")
MAX_WORDS = 5  # longest item of an attribution list that counts as a named word or phrase

_TASK = "sentiment"

COUNTERFACTUAL_PROMPT = (
    "Rewrite the following text with as few changes as possible so that its {task} becomes {target}. "
    "Reply with the rewritten text only, nothing else.\n\nText: {text}")
ATTRIBUTION_PROMPT = (
    "Which words of the following text are the most important for its {task}, so that without them the "
    "{task} could not be told? List them, one word per line, and write nothing else.\n\nText: {text}")
REDACTION_PROMPT = (
    "Rewrite the following text with the words that are most important for its {task} replaced by {mask}, "
    "so that the {task} can no longer be told. Reply with the rewritten text only, nothing else.\n\nText: {text}")


def explanation_request(kind: str, text: str, *, target: str | None = None, mask: str = "[REDACTED]",
                        task: str = _TASK) -> str:
    """The user message that asks for a self-explanation of `kind` about `text`."""
    if kind == "counterfactual":
        if not target:
            raise ValueError("a counterfactual request needs the target class")
        return COUNTERFACTUAL_PROMPT.format(task=task, target=target, text=text)
    if kind == "attribution":
        return ATTRIBUTION_PROMPT.format(task=task, text=text)
    if kind == "redaction":
        return REDACTION_PROMPT.format(task=task, mask=mask, text=text)
    raise ValueError(f"unknown self-explanation kind {kind!r}; kinds: {', '.join(KINDS)}")


_PREAMBLE_LINE = re.compile(r"^\W*(here\s+is|here'?s|sure|certainly|of course|okay|ok)\b.*$|^[^\n]{0,80}:\s*$",
                            re.IGNORECASE)
_LABEL_PREFIX = re.compile(r"^\W{0,3}(?:the\s+)?(?:rewritten|edited|redacted|new|modified|revised|counterfactual)?\s*"
                           r"(?:text|paragraph|review|version|sentence|answer|reply|response|output)\s*:\s*", re.IGNORECASE)
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "`": "`"}


def _clean_markup(answer: str) -> str:
    text = html.unescape(answer)
    text = re.sub(r"<br\s*/?>", "\n", text, flags=re.IGNORECASE)
    text = re.sub(r"</?[a-zA-Z][^>]*>", "", text)  # other HTML tags
    text = re.sub(r"```[a-zA-Z]*", "", text)  # code fences
    text = re.sub(r"(\*\*|__)(.+?)\1", r"\2", text)  # bold
    return text.replace("\r\n", "\n").strip()


def _strip_quotes(text: str) -> str:
    text = text.strip()
    while len(text) >= 2 and text[0] in _QUOTES and text.endswith(_QUOTES[text[0]]):
        text = text[1:-1].strip()
    return text


def extract_paragraph(answer: str) -> tuple[str | None, str]:
    """The text of an answer that should be a rewritten text: (text, '') or (None, why not)."""
    text = _clean_markup(answer)
    if not text:
        return None, "empty answer"
    if is_refusal(text):
        return None, "the model refused"
    lines = text.split("\n")
    while lines and (not lines[0].strip() or _PREAMBLE_LINE.match(lines[0].strip())):
        lines.pop(0)  # "Here is the rewritten text:" / "Sure!" / "Rewritten text:"
    text = "\n".join(lines).strip()
    text = _LABEL_PREFIX.sub("", text, count=1).strip()
    # The rewrite is the first paragraph; what follows a blank line is commentary ("Note: I changed ...").
    text = re.split(r"\n\s*\n", text, maxsplit=1)[0].strip() if text else text
    text = _strip_quotes(text)
    if not text:
        return None, "no text after the preamble"
    return text, ""


def parse_counterfactual(answer: str, text: str | None = None, labels: Iterable[str] = (),
                         mask: str = "[REDACTED]") -> tuple[str | None, str]:
    """The edited text of a counterfactual answer. With the input `text`, the reply must also be a rewrite of it
    (engine.selfexplain.replies.check_rewrite; `labels`: the label words, so "not negative" is refused; `mask`:
    the redaction placeholder, which a rewrite does not hold)."""
    edited, why = extract_paragraph(answer)
    if edited is None or text is None:
        return edited, why
    ok, why = check_rewrite(edited, text, labels, mask)
    return (edited, "") if ok else (None, why)


def normalise_mask(text: str, mask: str = "[REDACTED]") -> str:
    """Variants of the mask token ("[redacted]", "[ REDACTED ]", "(REDACTED)") written as `mask`."""
    word = re.escape(mask.strip("[]() "))
    return re.sub(r"[\[(]\s*" + word + r"\s*[\])]", mask, text, flags=re.IGNORECASE)


def parse_redaction(answer: str, mask: str = "[REDACTED]", source: str | None = None,
                    labels: Iterable[str] = ()) -> tuple[str | None, str]:
    """The redacted text of an answer. With the input `source`, it must also be a redacted copy of it
    (engine.selfexplain.replies.check_redaction)."""
    text, why = extract_paragraph(answer)
    if text is None:
        return None, why
    text = normalise_mask(text, mask)
    if mask not in text:
        return None, f"the answer redacts nothing (no {mask})"
    if source is not None:
        ok, why = check_redaction(text, source, mask, labels)
        if not ok:
            return None, why
    return text, ""


_QUOTED = re.compile(r'"([^"\n]{1,60})"|“([^”\n]{1,60})”|(?<!\w)\'([^\'\n]{1,60})\'(?!\w)')
_NAMING = re.compile(r"\b(?:are|is|include|includes|would be)\b\s*:?", re.IGNORECASE)
_ITEM_LINE = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.):]|\(\d{1,3}\))\s+(.+)$")


def _clean_item(item: str) -> str:
    item = item.strip()
    item = re.split(r"\s+[-–—:]\s+|\s*:\s+|\s+\(", item, maxsplit=1)[0]  # "funny - it shows ..." -> "funny"
    item = _strip_quotes(item.strip())
    return item.strip(" \t.,;:!?\"'“”‘’*`").strip()


def parse_attribution(answer: str, text: str | None = None) -> tuple[list[str] | None, str]:
    """The words an answer names as important, in the order named, without duplicates (case-insensitive).
    With `text`, only words that occur in it (whole word, case-insensitive) are kept."""
    cleaned = _clean_markup(answer)
    if not cleaned:
        return None, "empty answer"
    if is_refusal(cleaned):
        return None, "the model refused"
    lines = [line for line in cleaned.split("\n") if line.strip()]
    listed = [m.group(1) for m in (_ITEM_LINE.match(line) for line in lines) if m]
    # Quotes before "... are" name the subject ('the words for the sentiment of "too sappy" are "too" and "for"'):
    # read the quotes after the first "are/is/include" that has quotes after it.
    tail = cleaned
    for m in _NAMING.finditer(cleaned):
        if _QUOTED.search(cleaned, m.end()):
            tail = cleaned[m.end():]
            break
    quoted = [a or b or c for a, b, c in _QUOTED.findall(tail)]
    if listed:
        items = listed
    elif quoted:  # 'The most important words are "dull" and "long".'
        items = quoted
    else:
        lines = [line for line in lines if not _PREAMBLE_LINE.match(line.strip())]
        items = [part for line in lines for part in re.split(r"[,;]", line)]
    words, seen = [], set()
    for item in items:
        word = _clean_item(item)
        # an item of more than MAX_WORDS words is a sentence (an echo of the input), not a named word
        if word and word.lower() not in seen and len(word.split()) <= MAX_WORDS:
            seen.add(word.lower())
            words.append(word)
    if not words:
        return None, "no words could be read from the answer"
    if text is not None:
        found = [w for w in words if _word_pattern(w).search(text)]
        if not found:
            return None, "none of the named words occurs in the text"
        ok, why = check_attribution(found, text, cleaned)
        if not ok:
            return None, why
        words = found
    return words, ""


def _word_pattern(word: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(word) + r"(?!\w)", re.IGNORECASE)


def redact_words(text: str, words: list[str], mask: str = "[REDACTED]") -> str:
    """Every occurrence of every word (whole word, case-insensitive) replaced by `mask`. Mask tokens already in
    the text are left alone, so redacting twice changes nothing (idempotent)."""
    parts = text.split(mask)  # the pieces between existing masks: a named word "redacted" never hits a mask
    for word in sorted({w for w in words if w.strip()}, key=len, reverse=True):
        pattern = _word_pattern(word)
        parts = [pattern.sub(mask, p) for p in parts]
    return mask.join(parts)


def word_spans(text: str, words: list[str]) -> list[tuple[int, int, int]]:
    """(start, end, rank) character spans of every occurrence of each word in `text`; rank = position in `words`."""
    spans = []
    for rank, word in enumerate(words):
        spans += [(m.start(), m.end(), rank) for m in _word_pattern(word).finditer(text)]
    return sorted(spans)
