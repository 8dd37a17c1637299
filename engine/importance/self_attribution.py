"""`self-attribution`: the words a prompted language model names as important for its own answer (the
attribution self-explanation of Madsen et al. 2024, docs/methods.md#self-explanations), as a token-importance measure, so that
recursive masking and the erasure metrics hold it to the same yardstick as the other measures.

Only prompted classifiers can be asked (`supports`). For each input the model is asked, in a chat turn of its
own, for the words its sentiment depends on (engine.selfexplain.parsing.ATTRIBUTION_PROMPT; greedy decoding,
generations cached on disk). Score of a token: (m - r) / m when it overlaps an occurrence (whole word,
case-insensitive) of the r-th of the m named words (r = 0 for the first named, so the order named is the
ranking), else 0. An answer that names no word of the input gives all zeros (`extras['parsable']` False).
Generation is inherently about the unmasked input, so recursive masking computes it once (`computed_once`).
Unit: none (a rank in (0, 1]).
"""
from __future__ import annotations

import torch

from engine.importance.explainer import Explainer
from engine.importance.registry import register
from engine.importance.types import Call
from engine.models.kinds import ModelKind


@register
class SelfAttribution(Explainer):
    """self-attribution: the words the LM itself names as important (prompted language models only)."""

    name = "self-attribution"
    cost_tier = 5
    signed = False
    defaults = {"max_new_tokens": 128}
    computed_once = True

    def _check_options(self) -> None:
        if self.options["max_new_tokens"] < 1:
            raise ValueError("max_new_tokens must be >= 1")

    def supports(self) -> tuple[bool, str]:
        if self.classifier.kind is not ModelKind.PROMPTED:
            return False, "only a prompted language model can name the words it relies on (models add FOLDER --prompt)"
        if self.classifier.spec.paired:
            return False, "self-explanations are implemented for single-text prompts"
        return True, ""

    def _slot_text(self, ids: list[int]) -> tuple[str, list[tuple[int, int]]]:
        """The slot's text and each token's character span in it, from cumulative decoding (exact for any
        tokenizer, unlike offsets into a text that a masked input no longer has). A masked position reads as
        the replacement word."""
        tok = self.classifier.tokenizer
        vocab = len(tok)
        shown = " " + (self.classifier.meta.replacement_token or "")
        pieces: list = []  # runs of token ids (decoded together) and replacement words

        def render() -> str:
            return "".join(tok.decode(p, clean_up_tokenization_spaces=False) if isinstance(p, list) else p for p in pieces)

        spans, before = [], ""
        for t in ids:
            if t >= vocab:  # the sentinel of the redacted/delete replacements
                pieces.append(shown)
            elif pieces and isinstance(pieces[-1], list):
                pieces[-1].append(t)
            else:
                pieces.append([t])
            now = render()
            # a character split over two tokens decodes to U+FFFD first: keep spans ordered
            spans.append((min(len(before), len(now)), len(now)))
            before = now
        return before, spans

    def _scores(self, call: Call):
        from engine.selfexplain.generation import DecodingSettings, Generator
        from engine.selfexplain.parsing import explanation_request, parse_attribution, word_spans

        b = call.batch
        generator = Generator(self.classifier, DecodingSettings(max_new_tokens=self.options["max_new_tokens"]))
        scores = torch.zeros(b.input_ids.shape, dtype=torch.float32)
        extras = {"words": [], "answers": [], "parsable": [], "reason": []}
        for i in range(b.input_ids.shape[0]):
            call.check_stop()
            positions = b.maskable[i].nonzero().flatten().tolist()
            text, spans = self._slot_text(b.input_ids[i, positions].tolist())
            prompt = generator.chat_prompt(explanation_request("attribution", text.strip()))
            answer = generator.generate(prompt, should_stop=call.should_stop)
            words, why = parse_attribution(answer, text)
            extras["answers"].append(answer)
            extras["words"].append(words or [])
            extras["parsable"].append(words is not None)
            extras["reason"].append(why)
            if not words:
                continue
            m = len(words)
            for start, end, rank in word_spans(text, words):
                for pos, (a, z) in zip(positions, spans):
                    if a < end and z > start:
                        scores[i, pos] = max(float(scores[i, pos]), (m - rank) / m)
            if call.progress is not None:
                call.progress(i + 1, b.input_ids.shape[0])
        return scores.to(b.input_ids.device), extras
