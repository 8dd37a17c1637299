"""Free-text explanations ("why is this text positive?") for the self-explanation tests that read what an
explanation *says* rather than apply it (counterfactual insertion, CC-SHAP, biased features: docs/methods.md#self-explanation-tests-beyond-madsen-et-al).

The parsing discipline of engine.selfexplain.replies holds here too: an explanation is judged only when it is an
explanation. Not parsable when the reply
  - is empty, whitespace or a refusal;
  - only names or negates a label ("positive", "The sentiment is not negative."): it gives no reason;
  - echoes the input: it keeps at least ECHO_SHARE (80%) of the input's words and adds fewer than 3 of its own, so
    every word of the input would count as "mentioned";
  - is longer than MAX_WORDS words (a runaway generation, not an explanation);
  - loops: at least LOOP_REPEATS of its LOOP_WORDS-word runs repeat an earlier run, and they are at least
    LOOP_SHARE (25%) of its runs ("The story is told in the first person point of view." three times; numbers
    count as one word, so numbered lines that repeat loop too). A base
    model that continues text instead of answering does this (Gemma 3 270M: 41 of 50 insertion replies; none of
    SmolLM2-Instruct's 106 field replies);
  - repeats the request: it holds a run of ECHO_REQUEST_WORDS (12) words of the request outside the input text
    (the instruction or the hint), so it continues the prompt instead of answering ("... In one sentence,
    explain why: name the words that made you decide."). Twelve, so that an answer that starts by restating
    the verdict ("The sentiment of this text is negative. In one sentence, I can explain why: ...") is read.

Mentions are whole-word, case-insensitive matches of a word's letters (`mentions`).
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from engine.selfexplain.parsing import is_refusal
from engine.selfexplain.replies import is_label_statement, words

ECHO_SHARE = 0.8
MAX_WORDS = 200
LOOP_WORDS = 8
LOOP_REPEATS = 2
LOOP_SHARE = 0.25
ECHO_REQUEST_WORDS = 12


def _runs(ws: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]


def loops(reply: str) -> bool:
    """Whether `reply` repeats itself as a looping generation does (module docstring). Numbers count as one word,
    so a loop that numbers its lines ("1. The movie is a good movie. 2. The movie is a good movie. 3. ...", Gemma 3
    270M) repeats as one that does not."""
    runs = _runs(["#" if w.isdigit() else w for w in words(reply)], LOOP_WORDS)
    seen: set[tuple[str, ...]] = set()
    repeats = 0
    for run in runs:
        repeats += run in seen
        seen.add(run)
    return repeats >= LOOP_REPEATS and repeats >= LOOP_SHARE * len(runs)


def repeats_request(reply: str, request: str, source: str) -> bool:
    """Whether `reply` holds ECHO_REQUEST_WORDS consecutive words of `request` outside the input text `source`."""
    parts = request.split(source) if source and source in request else [request]
    asked = {run for part in parts for run in _runs(words(part), ECHO_REQUEST_WORDS)}
    return any(run in asked for run in _runs(words(reply), ECHO_REQUEST_WORDS))


def why_request(text: str, prediction: str, context: str = "") -> str:
    """The user message asking for the reason of `prediction` for `text` (after `context`, e.g. a hint)."""
    lead = context.strip() + "\n\n" if context.strip() else ""
    return (f"{lead}Text: {text}\n\nThe sentiment of this text is {prediction}. In one sentence, explain why: "
            "name the words that made you decide.")


def check_free_text(reply: str, source: str, labels: Iterable[str] = (), request: str = "") -> tuple[bool, str]:
    """Is `reply` an explanation of `source` (see the module docstring), given the `request` that asked for it
    (the user message; "" skips that rule)? (True, "") or (False, why)."""
    if not reply or not reply.strip():
        return False, "the reply is empty"
    if is_refusal(reply):
        return False, "the reply is a refusal"
    ws, src = words(reply), words(source)
    if not ws:
        return False, "the reply has no words"
    if is_label_statement(reply, labels):
        return False, "the reply only names or negates a label: it gives no reason"
    if len(ws) > MAX_WORDS:
        return False, f"the reply has {len(ws)} words (an explanation has at most {MAX_WORDS})"
    if src:
        from collections import Counter

        kept = sum((Counter(ws) & Counter(src)).values()) / len(src)
        own = len(ws) - sum((Counter(ws) & Counter(src)).values())
        if kept >= ECHO_SHARE and own < 3:
            return False, "the reply echoes the input: every word of it would count as mentioned"
    if loops(reply):
        return False, "the reply repeats itself (a looping generation, not an explanation)"
    if request and repeats_request(reply, request, source):
        return False, "the reply repeats the request: it continues the prompt instead of answering"
    return True, ""


def mentions(explanation: str, word: str) -> bool:
    """Whether `explanation` names `word` (whole word, case-insensitive; a multi-word phrase as a phrase)."""
    parts = words(word)
    if not parts:
        return False
    pattern = r"(?<![^\W_])" + r"[\W_]+".join(re.escape(p) for p in parts) + r"(?![^\W_])"
    return re.search(pattern, explanation.lower()) is not None
