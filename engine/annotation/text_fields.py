"""Free text people type into a study (its name, instructions, consent, completion code, annotator names, worker
ids, comments): any printable text is kept verbatim (markup included: it is escaped on display), but characters
that show nothing or something else than was typed are refused with the field and the position named:

- control characters (Unicode category Cc: the null byte, escape, DEL, the C1 range): stored raw they end up in
  CSV exports and terminals as they are, and a page shows a replacement character;
- lone surrogates (category Cs): not text, and SQLite cannot store them as UTF-8;
- the bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder what a reader sees.

A field that takes several lines keeps tab, newline and a carriage return before a newline (CRLF text).

    config = check_text(name, "the study name")                        # one line
    check_text(instructions, "instructions", multiline=True)
"""
from __future__ import annotations

import unicodedata

from engine.errors import InvalidInputError

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
MULTILINE_ALLOWED = frozenset("\t\n")


def _describe(ch: str) -> str:
    code = f"U+{ord(ch):04X}"
    if ch == "\0":
        return f"a null byte ({code})"
    if ch in BIDI_CONTROLS:
        return f"a bidirectional text control ({code}, {unicodedata.name(ch, 'unnamed')})"
    if unicodedata.category(ch) == "Cs":
        return f"a lone surrogate ({code})"
    return f"a control character ({code})"


def refused_character(text: str, multiline: bool = False) -> tuple[int, str] | None:
    """(index, character) of the first character `text` may not hold, or None."""
    for i, ch in enumerate(text):
        if multiline and (ch in MULTILINE_ALLOWED or (ch == "\r" and text[i + 1 : i + 2] == "\n")):
            continue
        if ch in BIDI_CONTROLS or unicodedata.category(ch) in ("Cc", "Cs"):
            return i, ch
    return None


def check_text(text: str, field: str, multiline: bool = False) -> str:
    """`text` unchanged, or InvalidInputError naming `field`, the character and its position, and what the
    field allows."""
    found = refused_character(text, multiline) if isinstance(text, str) else None
    if found is None:
        return text
    i, ch = found
    allows = ("printable text, tabs and line breaks" if multiline else "printable text on one line (no tab or line "
              "break)")
    raise InvalidInputError(f"{field} holds {_describe(ch)} at character {i + 1}: it takes {allows}. Remove it (it "
                            f"often comes with text pasted from another program)")
