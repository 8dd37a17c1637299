"""What a typed input becomes for the model, checked before any work is done on it (a MaSF fit, a measure), with
what a reader should know in words: the text is empty or has no token left; it was cut to the model's length; most
of its tokens are unknown to the model's tokenizer (an emoji-only text becomes one `[UNK]`, which the model still
classifies, often confidently: the prediction and its explanation then say next to nothing about the text typed).

The tokens counted are the input's maskable ones (a paired task's question and a prompt's own words are not the
text typed), after truncation, through the model's own tokenisation (`Classifier.batch`)."""
from __future__ import annotations

from dataclasses import dataclass

from engine.errors import EmptyInputError
from engine.models import Batch

#: more than this share of the text's tokens unknown to the tokenizer: the input is mostly unreadable to the model
MOSTLY_UNKNOWN = 0.5


@dataclass(frozen=True)
class InputCheck:
    """n_tokens: the text's tokens the model reads (maskable, after truncation); n_unknown: how many of them are the
    tokenizer's unknown token; unknown_token: its string ('[UNK]'; None for a tokenizer that has none);
    truncated: the text was cut to `max_length` tokens (the whole input's, special tokens included)."""

    n_tokens: int
    n_unknown: int
    unknown_token: str | None
    truncated: bool
    max_length: int

    @property
    def mostly_unknown(self) -> bool:
        return self.n_tokens > 0 and self.n_unknown > MOSTLY_UNKNOWN * self.n_tokens

    def warnings(self) -> list[str]:
        """What the reader should know about this input before reading a prediction of it, in words (markdown-safe:
        no user text in them)."""
        out = []
        if self.mostly_unknown:
            share = "all" if self.n_unknown == self.n_tokens else f"{self.n_unknown} of the {self.n_tokens}"
            out.append(f"The model's tokenizer does not know most of this text: {share} of its tokens became the "
                       f"unknown token {self.unknown_token} (emoji, or a script or symbols its vocabulary lacks). The "
                       "model reads next to nothing of what was typed, so its prediction and every explanation of "
                       "it say little about this text, however confident they look.")
        if self.truncated:
            out.append(f"The text was truncated to {self.max_length} tokens; only the kept part is classified and "
                       "explained.")
        return out


def check_batch(classifier, batch: Batch, row: int = 0) -> InputCheck:
    """The check of row `row` of a batch the classifier made (`Classifier.batch`)."""
    tokenizer = classifier.tokenizer
    unknown_id = getattr(tokenizer, "unk_token_id", None)
    ids = batch.input_ids[row].cpu()[batch.maskable[row].cpu()].tolist()
    return InputCheck(n_tokens=len(ids), n_unknown=sum(i == unknown_id for i in ids) if unknown_id is not None else 0,
                      unknown_token=getattr(tokenizer, "unk_token", None), truncated=bool(batch.truncated[row]),
                      max_length=int(classifier.max_length))


def check_input(classifier, text: str | None, auxiliary: str | None = None) -> InputCheck:
    """Tokenise `text` (and a paired task's `auxiliary`) as the model will and check it; EmptyInputError, in words,
    for an empty text or one with no token left (only spaces or control characters). Costs one tokenisation: run it
    before anything is fitted or computed for the input."""
    if not isinstance(text, str) or not text.strip():
        raise EmptyInputError("The text is empty: type a text, or pick a test example, first.")
    try:
        batch = classifier.batch([text], [auxiliary] if auxiliary is not None else None)
    except EmptyInputError:
        raise EmptyInputError("The text has no token the model reads (only spaces or control characters?): type a "
                              "text first.") from None
    return check_batch(classifier, batch)
