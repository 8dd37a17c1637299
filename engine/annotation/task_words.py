"""The words of a stored task, as a lay annotator reads them: a study shows "Mehta's" where the task's tokens
are the word pieces `me ##hta ' s`, with each word's score the sum of its pieces' (as the Explain page's word
level). A task keeps only its text and its tokens (no character offsets), so the tokens are found in the text again
here and then grouped by `engine.importance.levels.group_tokens`: a new word starts where whitespace separates
two tokens, and punctuation stays with its word.

Finding a token: its tokenizer marks dropped (WordPiece's `##`, byte-level BPE's `Ġ`, SentencePiece's `▁`), then
searched from the previous token's end, ignoring case and accents (an uncased tokenizer lowercases and strips
them). A token that is not found (`[UNK]`, an emoji the vocabulary lacks) takes the text between the tokens
around it.
"""
from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from engine.errors import InvalidInputError
from engine.importance.levels import Unit, group_tokens

SHOWN_AS = ("word", "token")  # what a study shows its annotators: words (the default) or the model's word pieces
_MARKS = ("##", "\u0120", "\u2581")  # WordPiece continuation, byte-level BPE space, SentencePiece space


def check_shown_as(value: str) -> str:
    if value not in SHOWN_AS:
        raise InvalidInputError(f"a study shows its tasks as {' or '.join(repr(v) for v in SHOWN_AS)}; got {value!r}")
    return value


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` casefolded without accents, and for each of its characters the index of the character of `text` it
    came from."""
    chars, where = [], []
    for i, c in enumerate(text):
        for d in unicodedata.normalize("NFD", c):
            if unicodedata.combining(d):
                continue
            for f in d.casefold():
                chars.append(f)
                where.append(i)
    return "".join(chars), where


def token_offsets(text: str, tokens: Sequence[str]) -> list[tuple[int, int]]:
    """[N] (start, end) character spans of `tokens` in `text`. Tokens not found (`[UNK]`) between two found ones
    share the text between them: the first gets its span (so an emoji shows as itself), the others an empty
    span, which joins the word before it."""
    folded, where = _folded(text)
    spans: list[tuple[int, int]] = []
    pending: list[int] = []  # tokens not found since the last one found
    cursor, position = 0, 0  # where reading goes on: in `folded`, in `text`

    def settle(until: int) -> None:
        gap = text[position:until]
        lead = len(gap) - len(gap.lstrip())
        body = gap.strip()
        for k, i in enumerate(pending):
            spans[i] = (position + lead, position + lead + len(body)) if k == 0 and body else (position, position)
        pending.clear()

    for token in tokens:
        piece = str(token)
        for mark in _MARKS:
            piece = piece.removeprefix(mark)
        piece, _ = _folded(piece)
        found = folded.find(piece, cursor) if piece.strip() else -1
        # a match past more than one skipped chunk of text (an unknown token's) is a later occurrence of a short piece
        if found < 0 or len(folded[cursor:found].split()) > 1:
            pending.append(len(spans))
            spans.append((position, position))
            continue
        start, end = where[found], where[found + len(piece) - 1] + 1
        settle(start)
        spans.append((start, end))
        cursor, position = found + len(piece), end
    settle(len(text) if len(text[position:].split()) <= 1 else position)
    return spans


def task_words(text: str, tokens: Sequence[str]) -> list[Unit]:
    """The words of a task's `text` over its N `tokens`, in order; each `Unit` lists the tokens it covers (every
    token is in exactly one word)."""
    if not tokens:
        return []
    return group_tokens(token_offsets(text, tokens), text, "word")
