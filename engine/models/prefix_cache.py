"""The prompt prefix of a prompted causal LM, computed once and reused by every perturbed row
(docs/methods.md#the-prompt-prefix-computed-once).

A perturbation (LOO, occlusion, SHAP, LIME, beam, recursive masking, the erasure metrics, MaSF's features)
changes only the input slot, so every row of a perturbation batch starts with the same tokens: the system
prompt, the instruction, the few-shot examples and the template up to the slot. A causal LM's states at those
positions cannot see what follows, so they are the same for every row. `PrefixKV` runs that shared prefix once
(batch 1), keeps its key/value cache and its hidden states, and for each batch expands the cache over the rows
and runs only the suffix (the slot and what follows it) with position ids continuing after the prefix.

What is shared is checked on the batch itself: the leading positions where every row holds the same token (all
real, since padding is on the right) and that belong to the prompt before the slot, shortened so every row keeps
at least one token of its own (its last real token, where the answer is read). Cutting at the slot makes the
template's prefix one cache entry for every input and every perturbation of it. Nothing in the result depends
on where the split falls: the logits equal the uncached forward's to float rounding (tests/engine/test_prefix_cache.py
states the tolerance per family).

Used only where it is exact and useful: no attentions asked for (those measures read every query position), a
shared prefix of at least `MIN_PREFIX` tokens, and either token ids in without a gradient (a training step's
gradient flows into the prefix's weights) or a gradient measure's embeddings whose prefix positions are exactly
the prefix tokens' embeddings (`PromptedClassifier.logits_from_embeddings`: the measures interpolate the slot only,
so the prefix is a constant of their graph and forward and backward run over the suffix).
"""
from __future__ import annotations

import copy
from collections import OrderedDict

import torch

MIN_PREFIX = 4  # below this the extra call costs more than it saves
KEEP = 4  # prefixes kept (an explanation alternates between few inputs; a dataset sweep moves on)


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         longest: torch.Tensor | None = None) -> int:
    """Leading positions where all rows of ids [B, T] hold the same real token (and, when `longest` [P0] is
    given, the tokens of `longest`), leaving every row at least its last real token. 0: nothing to share."""
    if input_ids.shape[0] == 0:
        return 0
    real = attention_mask.bool()
    same = (input_ids == input_ids[:1]).all(0) & real.all(0)  # [T]
    if longest is not None:
        n = min(len(longest), input_ids.shape[1])
        agree = torch.zeros_like(same)
        agree[:n] = input_ids[0, :n] == longest[:n].to(input_ids.device)
        same &= agree
    run = int(same.long().cumprod(0).sum())
    last = int(((torch.arange(input_ids.shape[1], device=input_ids.device) * real).argmax(-1)).min())
    return min(run, last)  # the token at `last` (the read-out position) stays in every row's suffix


class PrefixKV:
    """Per model: the key/value caches and hidden states of recently seen prefixes, keyed by their token ids."""

    def __init__(self, base_model: torch.nn.Module):
        self.base = base_model
        self._store: OrderedDict[tuple, tuple[object, tuple[torch.Tensor, ...]]] = OrderedDict()
        self.prefix_rows = 0  # prefixes computed (each one row): what a cost meter adds to the suffix rows
        self.suffix_tokens = 0  # suffix positions run (rows x padded suffix length): the work the cache leaves

    def clear(self) -> None:
        self._store.clear()

    def _weights_version(self) -> int:
        """A fingerprint of the weights' identity and in-place versions: an optimizer step, a loaded adapter or a
        merge changes it, so a prefix computed with other weights is never served."""
        return hash(tuple((id(p), p._version) for p in self.base.parameters()))

    def _prefix(self, ids: torch.Tensor, embed) -> tuple[object, tuple[torch.Tensor, ...]]:
        key = (self._weights_version(), *ids.tolist())
        hit = self._store.get(key)
        if hit is not None:
            self._store.move_to_end(key)
            return hit
        with torch.no_grad():  # a constant of every graph built on it (a gradient measure's backward stops here)
            out = self.base(inputs_embeds=embed(ids[None]), attention_mask=torch.ones_like(ids)[None], use_cache=True,
                            output_hidden_states=True)
        self.prefix_rows += 1
        entry = (out.past_key_values, tuple(h.detach() for h in out.hidden_states))
        self._store[key] = entry
        while len(self._store) > KEEP:
            self._store.popitem(last=False)
        return entry

    def run(self, prefix_ids: torch.Tensor, suffix_embeds: torch.Tensor, attention_mask: torch.Tensor,
            output_hidden_states: bool = False):
        """The base model over rows that start with `prefix_ids` [P] and continue with `suffix_embeds`
        [B, S, H] (word embeddings), `attention_mask` [B, P + S] covering both; the prefix comes from the cache.

        Returns (last_hidden_state [B, S, H] of the suffix, hidden_states: a tuple of [B, P + S, H] over the
        whole sequence, the prefix's expanded over the rows, or None)."""
        B = suffix_embeds.shape[0]
        self.suffix_tokens += B * suffix_embeds.shape[1]
        cache, prefix_hidden = self._prefix(prefix_ids, self.base.get_input_embeddings())
        # The model appends the suffix's keys and values to the cache it is given: give it a copy, expanded.
        cache = copy.deepcopy(cache)
        if B > 1:
            cache.batch_repeat_interleave(B)
        out = self.base(inputs_embeds=suffix_embeds, attention_mask=attention_mask, past_key_values=cache,
                        use_cache=True, output_hidden_states=output_hidden_states)
        hidden = None
        if output_hidden_states:
            hidden = tuple(torch.cat([p.expand(B, -1, -1), s], 1) for p, s in zip(prefix_hidden, out.hidden_states))
        return out.last_hidden_state, hidden
