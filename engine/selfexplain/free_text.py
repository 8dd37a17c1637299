"""Free-text explanations ("why is this text positive?") for the self-explanation tests that read what an
explanation *says* rather than apply it (counterfactual insertion, CC-SHAP, biased features: docs/methods.md#self-explanation-tests-beyond-madsen-et-al).

The parsing discipline of engine.selfexplain.replies holds here too: an explanation is judged only when it is an
explanation, by the rule `replies.check_explanation` (its docstring states the object and every case that is not
parsable: empty, a refusal, a bare heading, a label statement, runaway length, the input echoed or every content
word of it listed, only function words, the redaction placeholder, not fluent by the stated vocabulary test, a
loop, the request written out again). `check_free_text` is that rule.

Mentions are whole-word, case-insensitive matches of a word's letters (`mentions`).
"""
from __future__ import annotations

import re

from engine.selfexplain.replies import check_explanation, words

check_free_text = check_explanation  # the name the field tests call it by


def why_request(text: str, prediction: str, context: str = "") -> str:
    """The user message asking for the reason of `prediction` for `text` (after `context`, e.g. a hint)."""
    lead = context.strip() + "\n\n" if context.strip() else ""
    return (f"{lead}Text: {text}\n\nThe sentiment of this text is {prediction}. In one sentence, explain why: "
            "name the words that made you decide.")


def ask_why(record, generator, text: str, prediction: str, labels, should_stop=None, context: str = "") -> bool:
    """Ask the model why it predicts `prediction` for `text` (`why_request`, after `context`) and judge the answer
    (`check_free_text`). Fills `record`'s request, prompt, answer and cached (whether the generator's cache served
    it); an explanation sets its verdict to "explained", anything else leaves the verdict and gives the reason.

    Returns:
        Whether the answer is an explanation."""
    record.request = why_request(text, prediction, context=context)
    record.prompt = generator.chat_prompt(record.request)
    record.answer = generator.generate(record.prompt, should_stop=should_stop)
    record.cached = generator.last_cached
    ok, why = check_free_text(record.answer, text, labels, request=record.request)
    if ok:
        record.verdict = "explained"
    else:
        record.reason = why
    return ok


def mentions(explanation: str, word: str) -> bool:
    """Whether `explanation` names `word` (whole word, case-insensitive; a multi-word phrase as a phrase)."""
    parts = words(word)
    if not parts:
        return False
    pattern = r"(?<![^\W_])" + r"[\W_]+".join(re.escape(p) for p in parts) + r"(?![^\W_])"
    return re.search(pattern, explanation.lower()) is not None
