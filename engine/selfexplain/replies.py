"""What counts as a reply of each kind (docs/methods.md#self-explanations, "Parsing discipline"): a self-explanation
is judged only when the model's reply is the object that was asked for; anything else is "not parsable", never
classified again and never called faithful. Reusable by every self-explanation test (the rules take plain text).

Words are the lower-cased runs of letters and digits (`words`), so "it's" and "it 's" both read (it, s) and
punctuation never counts. n = the input's words, m = the reply's.

    a rewrite (counterfactual; redaction on the words it did not redact) is not parsable when it is
      - empty, whitespace, or a refusal ("I'm sorry ...", "As an AI ...")                 [extract_paragraph]
      - a statement about the label: every word is a label word (the classes, their verbalizer words, the
        abstentions) or label talk (LABEL_TALK: "the sentiment is not ..."), and one of them is a label word:
        "positive", "not negative", "The sentiment is not positive."
      - of another length: m < n / LENGTH_FACTOR or m > LENGTH_FACTOR * n + LENGTH_SLACK (a factor of 3, with
        3 words of slack so a 2-word input may get a 9-word rewrite)
      - not made from the input: a counterfactual keeps fewer than MIN_KEPT_SHARE (30%) of the input's words
        (counted with multiplicity: |words(reply) & words(input)| / n), e.g. "asdf qwer ###"; a redaction's
        unredacted words come from the input less than MIN_FROM_INPUT_SHARE (50%) of the time
      - (counterfactual) the input itself, up to case, spaces and punctuation: no edit was made
    an attribution is not parsable when it names no word of the input [parse_attribution], or when the words it
      names cover every word of the input (the input echoed back is not a choice of words)

Each rule returns (True, "") or (False, why), the reason shown with the verdict.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

LENGTH_FACTOR = 3.0
LENGTH_SLACK = 3
MIN_KEPT_SHARE = 0.3
MIN_FROM_INPUT_SHARE = 0.5

# Words a sentence *about* the label is made of besides the label words themselves.
LABEL_TALK = frozenset("""
a an the this that it its it's is was be been being would will becomes become now not no very quite rather
sentiment sentiments tone text review sentence paragraph passage answer label class classification overall
of to as my i think feel feels seems seem definitely clearly mostly mainly
""".split())


def words(text: str) -> list[str]:
    """The lower-cased words of `text` (runs of letters and digits), in order."""
    return re.findall(r"[^\W_]+", text.lower())


def label_vocabulary(labels: Iterable[str]) -> frozenset[str]:
    """The words of the label words and class names given (e.g. classes + verbalizer words + abstentions)."""
    return frozenset(w for label in labels for w in words(label))


def is_label_statement(reply: str, labels: Iterable[str]) -> bool:
    """True when `reply` only names or negates a label: all its words are label words or LABEL_TALK and at
    least one is a label word ("positive", "not negative", "The sentiment is not positive.")."""
    vocab = label_vocabulary(labels)
    ws = words(reply)
    return bool(ws) and any(w in vocab for w in ws) and all(w in vocab or w in LABEL_TALK for w in ws)


def _shared(a: list[str], b: list[str]) -> int:
    return sum((Counter(a) & Counter(b)).values())


def _length_ok(m: int, n: int) -> bool:
    return n / LENGTH_FACTOR <= m <= LENGTH_FACTOR * n + LENGTH_SLACK


def check_rewrite(reply: str, source: str, labels: Iterable[str] = ()) -> tuple[bool, str]:
    """Is `reply` (already stripped of preambles and quotes) a counterfactual rewrite of `source`?"""
    ws, src = words(reply), words(source)
    if not ws:
        return False, "the reply has no words"
    if is_label_statement(reply, labels):
        return False, "the reply names or negates a label instead of rewriting the text"
    if not _length_ok(len(ws), len(src)):
        return False, (f"the reply has {len(ws)} words against the input's {len(src)}: a rewrite is within a "
                       f"factor of {LENGTH_FACTOR:g} of the input's length")
    kept = _shared(ws, src) / max(len(src), 1)
    if kept < MIN_KEPT_SHARE:
        return False, (f"the reply keeps {kept:.0%} of the input's words (a rewrite keeps at least "
                       f"{MIN_KEPT_SHARE:.0%})")
    if ws == src:
        return False, "the reply is the input unchanged (no edit)"
    return True, ""


def check_redaction(reply: str, source: str, mask: str = "[REDACTED]", labels: Iterable[str] = ()) -> tuple[bool, str]:
    """Is `reply` (with `mask` written as `mask`) a redacted copy of `source`? Each mask counts as one word."""
    n_masks = reply.count(mask)
    rest = words(reply.replace(mask, " "))
    src = words(source)
    if is_label_statement(reply.replace(mask, " "), labels) and rest:
        return False, "the reply names or negates a label instead of redacting the text"
    m = len(rest) + n_masks
    if not _length_ok(m, len(src)):
        return False, (f"the reply has {m} words and masks against the input's {len(src)} words: a redacted copy is "
                       f"within a factor of {LENGTH_FACTOR:g} of the input's length")
    if rest:
        from_input = _shared(rest, src) / len(rest)
        if from_input < MIN_FROM_INPUT_SHARE:
            return False, (f"only {from_input:.0%} of the reply's unredacted words come from the input (a redacted "
                           f"copy: at least {MIN_FROM_INPUT_SHARE:.0%})")
    return True, ""


def check_attribution(named: list[str], source: str) -> tuple[bool, str]:
    """Are the `named` words (each occurring in `source`) a choice of words rather than the whole input?"""
    src = words(source)
    covered = {w for item in named for w in words(item)}
    if src and all(w in covered for w in src):
        return False, "the reply names every word of the input: an echo of the text is not an attribution"
    return True, ""
