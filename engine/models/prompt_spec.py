"""`PromptSpec`: how a causal LM is asked to classify (docs/methods.md#prompted-language-models): the instruction, optional
few-shot examples, chat template or plain text, the slot(s) where the input goes, and the verbalizer.

A spec is plain JSON (`models add FOLDER --prompt SPEC.json`):

    {"instruction": "Is the sentiment of this movie review positive or negative? Answer with one word.",
     "input_format": "Review: {input}",            # the user turn; {input2} is the second slot of a paired task
     "template": "chat",                           # "chat": the tokenizer's chat template; "plain": raw text
     "system": null,                               # a system message (chat only)
     "examples": [{"input": "a delight", "label": "positive"}],   # few-shot turns (label = a class name)
     "answer_prefix": "",                          # text the answer starts with (after the generation prefix)
     "verbalizer": {"negative": ["negative", "Negative"], "positive": ["positive", "Positive"]},
     "word_score": "sum",                          # multi-token words: summed (default) or mean log-probability
     "logit": "log-odds",                          # what measures explain: log-odds of the class or its log-probability
     "replacement": "redacted",                    # what masking writes (REPLACEMENTS)
     "replacement_text": "[REDACTED]",             # the word written by "redacted"
     "mask_notice": "Some words may be redacted and replaced by [REDACTED]."}

The classes are the verbalizer's keys in the given order (class id = position).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.errors import InvalidInputError

#: what masking writes into the input slot
REPLACEMENTS = {
    "redacted": "each run of masked tokens becomes the word `replacement_text` (Madsen et al. 2024); changes the length",
    "special": "one added special token (<|mask|>, embedding initialised to the mean of the table); positions stay fixed",
    "pad": "the tokenizer's pad token (for many chat models a turn separator: out of distribution)",
    "unk": "the tokenizer's unk token (SmolLM2: <|endoftext|>)",
    "delete": "masked tokens are removed (positions shift); nothing artificial is written",
}
TEMPLATES = ("chat", "plain")
WORD_SCORES = ("sum", "mean")
LOGITS = ("log-odds", "log-prob")
SLOT, SLOT2 = "{input}", "{input2}"


@dataclass
class PromptSpec:
    """See the module docstring for the fields and their meaning."""

    instruction: str
    verbalizer: dict[str, list[str]]
    input_format: str = SLOT
    template: str = "chat"
    system: str | None = None
    examples: list[dict] = field(default_factory=list)
    answer_prefix: str = ""
    word_score: str = "sum"
    logit: str = "log-odds"
    replacement: str = "redacted"
    replacement_text: str = "[REDACTED]"
    mask_notice: str | None = None

    def __post_init__(self):
        if not isinstance(self.verbalizer, dict) or len(self.verbalizer) < 2:
            raise InvalidInputError("the verbalizer must map at least two class names to label words, e.g. "
                                    '{"negative": ["negative"], "positive": ["positive"]}')
        clean = {}
        for name, words in self.verbalizer.items():
            words = [words] if isinstance(words, str) else list(words or [])
            if not words or any(not isinstance(w, str) or not w.strip() for w in words):
                raise InvalidInputError(f"class {name!r} of the verbalizer needs one or more non-empty label words")
            clean[str(name)] = words
        self.verbalizer = clean
        if SLOT not in self.input_format:
            raise InvalidInputError(f"input_format must contain the slot {SLOT} (and {SLOT2} for a paired task): {self.input_format!r}")
        if self.input_format.count(SLOT) != 1 or self.input_format.count(SLOT2) > 1:
            raise InvalidInputError(f"input_format must hold {SLOT} once (and {SLOT2} at most once)")
        for key, allowed in (("template", TEMPLATES), ("word_score", WORD_SCORES), ("logit", LOGITS),
                             ("replacement", tuple(REPLACEMENTS))):
            if getattr(self, key) not in allowed:
                raise InvalidInputError(f"prompt {key} must be one of {', '.join(allowed)}; got {getattr(self, key)!r}")
        if self.replacement == "redacted" and not self.replacement_text.strip():
            raise InvalidInputError("replacement 'redacted' needs a non-empty replacement_text")
        for ex in self.examples:
            if not isinstance(ex, dict) or "input" not in ex or ex.get("label") not in self.verbalizer:
                raise InvalidInputError(f"each few-shot example needs 'input' and a 'label' among {list(self.verbalizer)}: {ex!r}")
            if self.paired and "input2" not in ex:
                raise InvalidInputError(f"a paired prompt's few-shot examples need 'input2' too: {ex!r}")

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(self.verbalizer)

    @property
    def paired(self) -> bool:
        return SLOT2 in self.input_format

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PromptSpec:
        if not isinstance(data, dict):
            raise InvalidInputError("a prompt spec is a JSON object")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidInputError(f"unknown prompt field(s) {', '.join(unknown)}; fields: {', '.join(sorted(known))}")
        if "instruction" not in data or "verbalizer" not in data:
            raise InvalidInputError("a prompt spec needs at least 'instruction' and 'verbalizer'")
        return cls(**data)

    @classmethod
    def load(cls, path: str | os.PathLike) -> PromptSpec:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InvalidInputError(f"no prompt spec at {path}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise InvalidInputError(f"the prompt spec {path} is not valid JSON: {err}") from None
        return cls.from_dict(data)

    def user_turn(self, text: str, text2: str | None = None) -> str:
        """The input_format with its slots filled (plain string substitution, no str.format: braces in text are kept)."""
        out = self.input_format.replace(SLOT2, text2 if text2 is not None else "") if self.paired else self.input_format
        return out.replace(SLOT, text)


def sentiment_prompt(replacement: str = "redacted") -> PromptSpec:
    """The zero-shot sentiment prompt of the registered `smollm2-rt-prompt`: one user turn, question first, the
    text alone after it, a one-word answer.

    Chosen on 48 rt *validation* sentences among five wordings (docs/llm.md); with "redacted" it carries the
    notice that redacted words are marked (docs/methods.md#prompted-language-models). Single-token label words after SmolLM2's
    `<|im_start|>assistant\n` (positive 16185, negative 17728); the capitalised forms are added because the
    model often answers with them."""
    notice = "Some words may have been redacted and replaced by [REDACTED]. " if replacement == "redacted" else ""
    return PromptSpec(
        instruction="Is the sentiment of this text positive or negative? " + notice + "Answer with one word.",
        input_format="{input}",
        verbalizer={"negative": ["negative", "Negative"], "positive": ["positive", "Positive"]},
        replacement=replacement,
        mask_notice=notice.strip() or None,
    )
