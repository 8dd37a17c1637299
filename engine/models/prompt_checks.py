"""What a prompt spec makes the model read, said out loud (docs/llm.md#the-prompt-spec):

- `template_layout(spec)`: the text the template adds around the spec's fields. The `plain` template joins the
  parts with blank lines and puts a newline between the user turn (`input_format`) and `answer_prefix`; that
  newline is the template's, not the spec's, so it is stated here, in the Models page's preview and in docs/llm.md.
  (It is kept rather than removed: prompts registered with the plain template, and their results, read it.)
- `label_word_warnings(tokenizer, prompt, words)`: a label word that does not start a new word after the end of
  the prompt ("very" after an answer prefix ending in "was": the model reads "wasvery") is accepted, since a
  user may mean it, but warned about, naming the token sequence the model will read. The engine emits each as a
  `PromptSpecWarning` when a `PromptedClassifier` is built (and keeps them in `prompt_warnings`); `models add
  --prompt` prints them and the prompt editor shows them under its preview.
"""
from __future__ import annotations

from collections.abc import Sequence

from engine.models.prompt_spec import PromptSpec


class PromptSpecWarning(UserWarning):
    """A prompt spec the engine accepts but that probably does not do what its author meant."""


def template_layout(spec: PromptSpec) -> str:
    """One line saying how the template assembles the prompt from the spec's fields (the separators it adds)."""
    if spec.template == "plain":
        return ("plain template: [BOS] + system + '\\n\\n' + instruction + '\\n\\n' + (for each example: input_format + "
                "'\\n' + answer_prefix + label word + '\\n\\n') + input_format + '\\n' + answer_prefix; the '\\n' "
                "before answer_prefix is the template's (write answer_prefix without a leading newline)")
    return ("chat template: the tokenizer's chat template around [system], the user turn (instruction + '\\n\\n' + "
            "input_format; few-shot examples as earlier user/assistant turns) and its generation prefix, then "
            "answer_prefix")


def _glued(prompt: str, word: str) -> bool:
    """Whether `word` continues the prompt's last word instead of starting a new one: both sides of the join are
    letters or digits ("was" + "very" reads "wasvery"). Punctuation or whitespace on either side is a boundary."""
    return bool(prompt) and bool(word) and prompt[-1].isalnum() and word[0].isalnum()


def label_word_warnings(tokenizer, prompt: str, words: Sequence[str]) -> list[str]:
    """One warning per label word that does not start a new word after `prompt` (the rendered prompt, ending with
    the answer prefix), naming the tokens the model reads there."""
    out = []
    base = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    tail_word = prompt.split()[-1] if prompt.split() else prompt
    for word in words:
        if not _glued(prompt, word):
            continue
        full = tokenizer(prompt + word, add_special_tokens=False)["input_ids"]
        start = max(len(base) - 1, 0)  # the prompt's last token and the word's tokens
        pieces = tokenizer.convert_ids_to_tokens(full[start:])
        out.append(f"label word {word!r} does not start a new word after the prompt's end {tail_word!r}: the model "
                   f"reads {tail_word + word.split()[0]!r} (tokens {pieces}); if a separate word is meant, write it "
                   f"with a leading space ({' ' + word!r})")
    return out
