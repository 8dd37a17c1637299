"""`PromptedClassifier`: a causal language model used as a classifier by a prompt and a verbalizer
(docs/methods.md#prompted-language-models). It is a `Classifier` like any other, so every measure, curve and metric takes it.
Loading one from a folder or a packaged LLM: engine/models/prompted_loading.py.

    P(x)        the prompt spec rendered around x (chat template or plain text), ending where the answer starts
    s_k(x)      = log sum_{w in words(k)} exp(sum_j log p_LM(w_j | P(x), w_<j))   (word_score 'mean': mean over j)
    logits      [B, C] = log p(k|x) = log_softmax_k s_k(x) over the label set only: softmax(logits) is the class
                distribution, and logits do not change when every s_k moves by the same amount
    explained   `explained_logits(logits)`: what gradient, IG, LOO, occlusion, SHAP/LIME and beam explain;
                by default the log-odds l_c = log p(c) - log(1 - p(c)) (spec.logit 'log-odds'), or log p(c)

Only tokens whose characters overlap the input slot are maskable (`Batch.maskable`); for a paired prompt
the second slot is the auxiliary sequence. Instruction, examples, template, label and special tokens never are.

Masking writes `mask_token_id` into the batch like for any model; what the LM then reads is the spec's
`replacement` (recorded in `metadata['replacement']`):
  special   an added special token <|mask|> (positions fixed; its embedding starts as the table's mean)
  pad, unk  the tokenizer's token (positions fixed)
  redacted  a sentinel id (one past the vocabulary) in the batch; before the LM runs, every run of
            consecutive sentinels becomes the tokens of " [REDACTED]" (word level, Madsen et al. 2024)
  delete    the same sentinel, removed before the LM runs
For redacted/delete, attentions and hidden states are returned aligned to the batch's positions (each
position reads the expanded position of its last token; a deleted one, the token before it), and the
word-embedding path (gradients, IG on a masked input) sees the mean embedding of the replacement tokens
(redacted) or a zero vector (delete) at a sentinel, since an embedding cannot stand for several tokens.
"""
from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence

import torch

from engine.data.labels import label_key
from engine.errors import EmptyInputError, InvalidInputError
from engine.models.batch import AUXILIARY, PRIMARY, SPECIAL, Batch
from engine.models.classifier import Classifier, ForwardOutput, model_device
from engine.models.kinds import ModelKind
from engine.models.prefix_cache import MIN_PREFIX, PrefixKV, shared_prefix_length
from engine.models.prompt_checks import PromptSpecWarning, label_word_warnings
from engine.models.prompt_digest import prompt_sha256
from engine.models.prompt_spec import PromptSpec
from engine.settings import prefix_cache_enabled

MASK_TOKEN = "<|mask|>"
_MARK1, _MARK2 = "\ue000", "\ue001"  # private-use characters standing in for the slots while rendering


class PromptedClassifier(Classifier):
    """A causal LM (`*ForCausalLM`, loaded with eager attention) + tokenizer + `PromptSpec`.

    Shapes as for every `Classifier`: batches [B, T], logits [B, C]. device: as for `Classifier`, where the
    model's parameters already are unless given."""

    @property
    def kind(self) -> ModelKind:
        """A prompted LM, whatever its weights (zero-shot, registered, built in, LoRA-fine-tuned)."""
        return ModelKind.PROMPTED

    @property
    def prompt_sha256(self) -> str | None:
        """The digest of its prompt spec (`engine.models.prompt_digest.prompt_sha256`), as it reads it now."""
        return prompt_sha256(self.spec)

    def __init__(self, model, tokenizer, spec: PromptSpec, max_length: int = 512, metadata: dict | None = None,
                 device: torch.device | str | None = None):
        # Not Classifier.__init__: a causal LM has no num_labels to check against the classes.
        self.spec = spec
        self.tokenizer = tokenizer
        self.classes = spec.classes
        self.max_length = int(max_length)
        self.device = model_device(model) if device is None else torch.device(device)
        self.folder = None
        self.decoder = True  # the read-out position is the last real token (attention measures, pooled_positions)
        self._token_types = False
        # What Classifier.__init__ sets for `runtime` and the attention measures: a prompted LM is loaded in
        # float32 with eager attention (its hidden states and attentions are realigned per position).
        self.load_runtime = {"dtype_reason": "float32 unless load_prompted was asked otherwise",
                             "attn_reason": "eager: attention weights and position realignment need it"}
        self._attention_default = "eager"
        self._attention_lock = threading.Lock()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
        self._sentinel = None
        self._replacement_ids: list[int] = []
        kind = spec.replacement
        if kind == "special":
            if MASK_TOKEN not in tokenizer.get_vocab():
                tokenizer.add_tokens([MASK_TOKEN], special_tokens=True)
            if len(tokenizer) > model.get_input_embeddings().num_embeddings:
                model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
            token, token_id = MASK_TOKEN, int(tokenizer.convert_tokens_to_ids(MASK_TOKEN))
        elif kind in ("pad", "unk"):
            token = getattr(tokenizer, f"{kind}_token", None)
            if token is None:
                raise InvalidInputError(f"the tokenizer has no {kind} token; choose replacement special, redacted or delete")
            token_id = int(tokenizer.convert_tokens_to_ids(token))
        else:  # redacted, delete: a sentinel outside the vocabulary, rewritten before the LM runs
            token_id = self._sentinel = int(model.get_input_embeddings().num_embeddings)
            token = spec.replacement_text if kind == "redacted" else ""
            if kind == "redacted":
                self._replacement_ids = tokenizer(" " + spec.replacement_text, add_special_tokens=False)["input_ids"]
        self.model = model.to(self.device).eval()
        self.metadata = {
            "id": "unsaved", "source": "prompted", "strategy": "zero-shot", "masked_fine_tuned": False,
            "classes": list(self.classes), "paired": spec.paired, "max_length": self.max_length,
            **(metadata or {}),
            "prompt": spec.to_dict(),
            "replacement": kind, "replacement_token": token, "replacement_token_id": token_id,
            "replacement_tokens": self._replacement_ids if kind == "redacted" else None,
            "replacement_in_distribution": False,
        }
        self._render_cache: dict = {}
        #: (class, token ids) of every label word, in the verbalizer's order (classes, then each class's words)
        self.label_word_tokens = self._label_tokens()
        # Perturbed rows share the prompt before the slot: its keys and values are computed once
        # (engine/models/prefix_cache.py). ENGINE_PREFIX_CACHE=0 turns it off (the benches compare both).
        self.prefix_cache = prefix_cache_enabled()
        self._prefix_store: PrefixKV | None = None
        # label words glued to the prompt's last word ("was" + "very"): accepted, but said (engine.models.prompt_checks)
        probe = self.render("x", "x" if spec.paired else None)[0]  # the prompt with a one-word input
        self.prompt_warnings = label_word_warnings(self.tokenizer, probe,
                                                   [w for name in self.classes for w in spec.verbalizer[name]])
        for message in self.prompt_warnings:
            warnings.warn(message, PromptSpecWarning, stacklevel=2)

    # -- the prompt -------------------------------------------------------------------------------
    def _template(self) -> tuple[str, str, str | None, str]:
        """The rendered prompt split at the slots: (before, between, after or None when unpaired, after)."""
        spec = self.spec
        turn = spec.user_turn(_MARK1, _MARK2 if spec.paired else None)
        if spec.template == "chat":
            if getattr(self.tokenizer, "chat_template", None) is None:
                raise InvalidInputError("the tokenizer has no chat template; use template 'plain'")
            messages = [{"role": "system", "content": spec.system}] if spec.system else []
            lead = spec.instruction + "\n\n" if spec.instruction.strip() else ""  # empty: input_format says it all
            first = True
            for ex in spec.examples:
                content = spec.user_turn(ex["input"], ex.get("input2"))
                messages.append({"role": "user", "content": (lead if first else "") + content})
                messages.append({"role": "assistant", "content": spec.answer_prefix + spec.verbalizer[ex["label"]][0]})
                first = False
            messages.append({"role": "user", "content": (lead if first else "") + turn})
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            text += spec.answer_prefix
        else:
            parts = [spec.system] if spec.system else []
            if spec.instruction.strip():
                parts.append(spec.instruction)
            for ex in spec.examples:
                parts.append(spec.user_turn(ex["input"], ex.get("input2")) + "\n" + spec.answer_prefix
                             + spec.verbalizer[ex["label"]][0])
            text = "\n\n".join(parts + [turn + "\n" + spec.answer_prefix])
            # Plain text starts with the BOS token where the tokenizer has one (Llama-style models expect it; the
            # tokenizer's own special tokens are never added, since some append a separator after the answer slot).
            text = (self.tokenizer.bos_token or "") + text
        if text.count(_MARK1) != 1 or text.count(_MARK2) != (1 if spec.paired else 0):
            raise InvalidInputError("the chat template dropped or repeated the input slot")
        before, rest = text.split(_MARK1)
        if spec.paired:
            if _MARK2 in before:
                raise InvalidInputError("the second slot {input2} must come after {input} in input_format")
            between, after = rest.split(_MARK2)
            return before, between, after, ""
        return before, rest, None, ""

    def render(self, text: str, text2: str | None = None) -> tuple[str, tuple[int, int], tuple[int, int] | None]:
        """The exact string the model sees for input `text` (and `text2`), with the character spans of the slots.
        The separators the template adds (the plain template's newline before answer_prefix):
        engine.models.prompt_checks.template_layout."""
        if "parts" not in self._render_cache:
            self._render_cache["parts"] = self._template()
        before, between, after, _ = self._render_cache["parts"]
        span1 = (len(before), len(before) + len(text))
        if after is None:
            return before + text + between, span1, None
        start2 = span1[1] + len(between)
        return before + text + between + (text2 or "") + after, span1, (start2, start2 + len(text2 or ""))

    def _label_tokens(self) -> list[tuple[int, list[int]]]:
        """(class, tokens) of every label word: the tokens of P(x) + w after those of P(x), checked to be a
        prefix (BPE could merge across the boundary)."""
        prompt, _, _ = self.render("x", "x" if self.spec.paired else None)
        base = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        out = []
        for k, name in enumerate(self.classes):
            for word in self.spec.verbalizer[name]:
                full = self.tokenizer(prompt + word, add_special_tokens=False)["input_ids"]
                if full[:len(base)] != base or len(full) == len(base):
                    raise InvalidInputError(
                        f"label word {word!r} merges with the end of the prompt when tokenised (the prompt's tokens are not "
                        "a prefix): end the prompt (answer_prefix) with a space or newline, or change the word")
                out.append((k, full[len(base):]))
        return out

    def target_words(self) -> dict[str, int]:
        """The verbalizer's label words (as `engine.data.labels.label_key` spells them: ' Positive' -> 'positive'),
        each with its class: a target may be given as one. A word two classes share names neither."""
        words: dict[str, set[int]] = {}
        for k, name in enumerate(self.classes):
            for word in self.spec.verbalizer[name]:
                words.setdefault(label_key(word), set()).add(k)
        return {word: next(iter(ks)) for word, ks in words.items() if len(ks) == 1 and word}

    @property
    def single_token_words(self) -> bool:
        return all(len(t) == 1 for _, t in self.label_word_tokens)

    # -- tokenisation -----------------------------------------------------------------------------
    def batch(self, primary, auxiliary=None, target=None) -> Batch:
        if isinstance(primary, str):
            primary = [primary]
            auxiliary = [auxiliary] if isinstance(auxiliary, str) or auxiliary is None else auxiliary
            target = [target] if isinstance(target, int) else target
        return self._tokenize(list(primary), auxiliary, target).to(self.device)

    def batch_of(self, examples) -> Batch:
        examples = list(examples)
        paired = examples[0].auxiliary is not None if examples else False
        return self._tokenize([e.primary for e in examples], [e.auxiliary for e in examples] if paired else None,
                              [e.label for e in examples]).to(self.device)

    def encode_prompt(self, text: str, text2: str | None):
        """(token ids, segment of each id, offsets into `text`) of the prompt rendered around `text` (and `text2`), not
        cut to max_length: the primary slot's tokens are PRIMARY, the second slot's AUXILIARY, the rest SPECIAL."""
        prompt, span1, span2 = self.render(text, text2)
        enc = self.tokenizer(prompt, add_special_tokens=False, return_offsets_mapping=True)
        special = set(self.tokenizer.all_special_ids)
        segments = []
        for tid, (a, b) in zip(enc["input_ids"], enc["offset_mapping"]):
            seg = SPECIAL
            if tid not in special and b > a:
                if a < span1[1] and b > span1[0]:
                    seg = PRIMARY
                elif span2 is not None and a < span2[1] and b > span2[0]:
                    seg = AUXILIARY
            segments.append(seg)
        offsets = [(max(a - span1[0], 0), min(b, span1[1]) - span1[0]) if s == PRIMARY else (0, 0)
                   for (a, b), s in zip(enc["offset_mapping"], segments)]
        return enc["input_ids"], segments, offsets

    def _tokenize(self, primary: list[str], auxiliary, target) -> Batch:
        if not primary:
            raise EmptyInputError("no input text given")
        if auxiliary is not None:
            auxiliary = list(auxiliary)
            if len(auxiliary) != len(primary):
                raise InvalidInputError(f"{len(primary)} primary texts but {len(auxiliary)} auxiliary texts")
        if self.spec.paired and (auxiliary is None or any(a is None for a in auxiliary)):
            raise InvalidInputError("this prompt has a second slot {input2}: give every input its auxiliary text")
        if not self.spec.paired and auxiliary is not None and any(a is not None for a in auxiliary):
            raise InvalidInputError("this prompt has no second slot {input2}; add one to its input_format for a paired task")
        rows, truncated = [], []
        for i, text in enumerate(primary):
            if not isinstance(text, str) or not text.strip():
                raise EmptyInputError(f"input {i} is empty: type some text to classify")
            text2 = auxiliary[i] if auxiliary is not None else None
            ids, segs, offs = self.encode_prompt(text, text2)
            cut = False
            for _ in range(8):  # cut the primary text until the prompt fits (BPE may re-merge at the cut)
                excess = len(ids) - self.max_length
                if excess <= 0:
                    break
                ends = [o[1] for o, s in zip(offs, segs) if s == PRIMARY]
                keep = len(ends) - excess
                if keep < 1:
                    raise InvalidInputError(f"the prompt alone is longer than max_length {self.max_length}: raise it or shorten the prompt")
                text = text[:ends[keep - 1]]
                ids, segs, offs = self.encode_prompt(text, text2)
                cut = True
            if PRIMARY not in segs:
                raise EmptyInputError(f"input {i} has no tokens left after tokenisation (only spaces or control characters?)")
            rows.append((ids, segs, offs))
            truncated.append(cut)
        B, T = len(rows), max(len(r[0]) for r in rows)
        input_ids = torch.full((B, T), int(self.tokenizer.pad_token_id), dtype=torch.long)
        attention = torch.zeros((B, T), dtype=torch.long)
        segments = torch.zeros((B, T), dtype=torch.long)
        offsets = []
        for i, (ids, segs, offs) in enumerate(rows):
            n = len(ids)
            input_ids[i, :n] = torch.tensor(ids)
            attention[i, :n] = 1
            segments[i, :n] = torch.tensor(segs)
            offsets.append(list(offs) + [(0, 0)] * (T - n))
        if target is not None:
            target = torch.as_tensor(list(target), dtype=torch.long)
            if target.shape != (B,):
                raise InvalidInputError(f"{B} inputs but {target.numel()} targets")
        return Batch(input_ids=input_ids, attention_mask=attention, token_type_ids=torch.zeros_like(input_ids),
                     segments=segments, maskable=segments == PRIMARY, target=target,
                     truncated=torch.tensor(truncated, dtype=torch.bool), offsets=offsets)

    def maskable_tokens(self, batch: Batch, row: int = 0) -> list[str]:
        ids = batch.input_ids[row].cpu()[batch.maskable[row].cpu()].tolist()
        shown = self.meta.replacement_token or "[deleted]"
        return [shown if t == self._sentinel else self._piece_text(t) for t in ids]

    def _piece_text(self, token_id: int) -> str:
        """A piece as a reader sees it: byte-level BPE ('Ġgripping') and SentencePiece ('▁gripping') pieces
        carry a marker for the space before them, which the tokenizer's own conversion turns back into text;
        WordPiece continuations keep their '##' (a single piece converts to itself). A piece that is only
        whitespace (a newline) keeps its raw form so the heatmap still shows a unit for it."""
        piece = self.tokenizer.convert_ids_to_tokens(token_id)
        return self.tokenizer.convert_tokens_to_string([piece]).strip() or piece

    # -- the replacement --------------------------------------------------------------------------
    def word_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B, T, H] word embeddings; a sentinel (redacted/delete) reads the mean embedding of the replacement's
        tokens, or zeros for delete (see the module docstring)."""
        table = self.model.get_input_embeddings()
        if self._sentinel is None:
            return table(input_ids)
        hit = input_ids == self._sentinel
        e = table(input_ids.masked_fill(hit, 0))
        if not hit.any():
            return e
        if self._replacement_ids:
            fill = table.weight[torch.tensor(self._replacement_ids, device=e.device)].mean(0)
        else:
            fill = torch.zeros(e.shape[-1], dtype=e.dtype, device=e.device)
        return torch.where(hit[..., None], fill.to(e.dtype), e)

    def _expand(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        """Rewrite sentinels: (ids [B, T'], mask [B, T'], index [B, T] into T' or None when nothing changed)."""
        if self._sentinel is None or not bool((input_ids == self._sentinel).any()):
            return input_ids, attention_mask, None
        pad = int(self.tokenizer.pad_token_id)
        rows, index = [], []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            out, where, prev_hit = [], [], False
            for tid, m in zip(ids, mask):
                if not m:
                    where.append(max(len(out) - 1, 0))
                    continue
                if tid == self._sentinel:
                    if not prev_hit:
                        out.extend(self._replacement_ids)
                    prev_hit = True
                else:
                    out.append(tid)
                    prev_hit = False
                where.append(max(len(out) - 1, 0))
            rows.append(out)
            index.append(where)
        T2 = max(len(r) for r in rows)
        ids2 = torch.full((len(rows), T2), pad, dtype=torch.long)
        mask2 = torch.zeros((len(rows), T2), dtype=torch.long)
        for i, r in enumerate(rows):
            ids2[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask2[i, :len(r)] = 1
        dev = input_ids.device
        return ids2.to(dev), mask2.to(dev), torch.tensor(index, dtype=torch.long, device=dev)

    # -- forward ----------------------------------------------------------------------------------
    def vocabulary_log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary log-probabilities [..., V] from final hidden states [..., H] (with Gemma's soft-capping)."""
        logits = self.model.get_output_embeddings()(hidden).float()
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return torch.log_softmax(logits, -1)

    def _class_scores(self, word_scores: torch.Tensor) -> torch.Tensor:
        """s [B, C]: per class, logsumexp of its words' scores [B, W]."""
        classes = torch.tensor([k for k, _ in self.label_word_tokens], device=word_scores.device)
        s = torch.full((word_scores.shape[0], self.num_classes), float("-inf"), device=word_scores.device,
                       dtype=word_scores.dtype)
        for k in range(self.num_classes):
            s[:, k] = torch.logsumexp(word_scores[:, classes == k], dim=1)
        return s

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_attentions: bool = False, output_hidden_states: bool = False) -> ForwardOutput:
        """Class log-probabilities [B, C] (see the module docstring) from ids [B, T] or word embeddings [B, T, H].

        From ids, without a gradient and without attentions, the rows' shared prompt prefix is served from the
        key/value cache (engine/models/prefix_cache.py): the same numbers to float rounding, computed over the
        suffix only."""
        s, atts, hidden = self._scores(input_ids, attention_mask, inputs_embeds, output_attentions, output_hidden_states)
        return ForwardOutput(torch.log_softmax(s, -1), atts, hidden)

    def class_scores(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """s [B, C]: each class's label-word log-probability under the LM, before the renormalisation over the
        label set that `forward` applies (what captum's LLMAttribution explains for a one-word target)."""
        return self._scores(input_ids, attention_mask, None, False, False)[0]

    def _scores(self, input_ids, attention_mask, inputs_embeds, output_attentions: bool, output_hidden_states: bool,
                prefix_ids: torch.Tensor | None = None):
        """(s [B, C], attentions or None, hidden states or None): see `forward`. `prefix_ids` [P] (embeddings in
        only, from `logits_from_embeddings`): the first P positions of every row of `inputs_embeds` are these
        tokens' embeddings, checked there, so their keys and values come from the cache."""
        index = None
        P = 0
        suffix_embeds = prefix = None
        if input_ids is not None:
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            input_ids, attention_mask, index = self._expand(input_ids, attention_mask)
            if self.prefix_cache and not output_attentions and not torch.is_grad_enabled():
                P = shared_prefix_length(input_ids, attention_mask, self.template_prefix_ids())
                P = P if P >= MIN_PREFIX else 0
            embeds = None if P else self.model.get_input_embeddings()(input_ids)
            if P:
                prefix, suffix_embeds = input_ids[0, :P], self.model.get_input_embeddings()(input_ids[:, P:])
        else:
            embeds = inputs_embeds
            if attention_mask is None:
                attention_mask = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
            if prefix_ids is not None:
                P, prefix, suffix_embeds = len(prefix_ids), prefix_ids, embeds[:, len(prefix_ids):]
        B = attention_mask.shape[0]
        rows = torch.arange(B, device=attention_mask.device)
        last = self.pooled_positions(attention_mask)
        atts = None
        if P:
            kv = self.prefix_kv()
            suffix, hidden = kv.run(prefix, suffix_embeds, attention_mask, output_hidden_states=output_hidden_states)
            if self.single_token_words:
                final = suffix[rows, last - P]
            else:
                word_scores = self._multi_token_scores(suffix_embeds, attention_mask, last, prefix=(kv, prefix))
        else:
            base = self.model.base_model
            kwargs = {"attention_mask": attention_mask, "inputs_embeds": embeds}
            if output_attentions:
                kwargs["output_attentions"] = True
            if output_hidden_states:
                kwargs["output_hidden_states"] = True
            out = base(**kwargs)
            atts, hidden = getattr(out, "attentions", None), getattr(out, "hidden_states", None)
            if self.single_token_words:
                final = out.last_hidden_state[rows, last]
            else:
                word_scores = self._multi_token_scores(embeds, attention_mask, last)
        if self.single_token_words:
            logp = self.vocabulary_log_probs(final)  # [B, V]
            ids = torch.tensor([t[0] for _, t in self.label_word_tokens], device=logp.device)
            word_scores = logp[:, ids]
        if index is not None:
            atts = None if atts is None else tuple(_gather2(a, index) for a in atts)
            hidden = None if hidden is None else tuple(h.gather(1, index[..., None].expand(-1, -1, h.shape[-1])) for h in hidden)
        return self._class_scores(word_scores), atts, hidden

    def template_prefix_ids(self) -> torch.Tensor:
        """[P0] the tokens of the prompt before the input slot: the longest prefix ever shared. Every input and
        every perturbation of it starts so, so one cached entry serves them all (a perturbation batch that
        happens to share more, e.g. an unmasked first word, is still cut here)."""
        if "prefix_ids" not in self._render_cache:
            prompt, (start, _), _ = self.render("x", "x" if self.spec.paired else None)
            before = prompt[:start]
            ids = self.tokenizer(before, add_special_tokens=False)["input_ids"] if before else []
            self._render_cache["prefix_ids"] = torch.tensor(ids, dtype=torch.long)
        return self._render_cache["prefix_ids"]

    def prefix_kv(self) -> PrefixKV:
        """The prefix cache of this model (made on first use; cleared by `clear_prefix_cache`)."""
        if self._prefix_store is None or self._prefix_store.base is not self.model.base_model:
            self._prefix_store = PrefixKV(self.model.base_model)
        return self._prefix_store

    def clear_prefix_cache(self) -> None:
        """Forget the cached prefixes (call after changing the weights in place, e.g. a training step)."""
        self._prefix_store = None

    def _multi_token_scores(self, embeds: torch.Tensor, attention_mask: torch.Tensor, last: torch.Tensor,
                            prefix: tuple | None = None) -> torch.Tensor:
        """Word scores [B, W] by teacher forcing: every input extended by every label word, one batched pass.

        `embeds` [B, T - P, H] are the embeddings after a cached prefix of P tokens when `prefix` = (PrefixKV,
        prefix ids [P]) is given (P = 0 otherwise); `attention_mask` [B, T] and `last` [B] are over the whole
        sequence."""
        table = self.model.get_input_embeddings()
        P = 0 if prefix is None else int(prefix[1].shape[0])
        B, S, H = embeds.shape
        W = len(self.label_word_tokens)
        m = max(len(t) for _, t in self.label_word_tokens)
        ext = embeds.new_zeros(B * W, S + m, H)
        mask = attention_mask.new_zeros(B * W, P + S + m)
        for b in range(B):
            n = int(last[b]) + 1
            for w, (_, toks) in enumerate(self.label_word_tokens):
                r = b * W + w
                ext[r, :n - P] = embeds[b, :n - P]
                ext[r, n - P:n - P + len(toks)] = table(torch.tensor(toks, device=embeds.device))
                mask[r, :n + len(toks)] = 1
        if prefix is None:
            hidden = self.model.base_model(inputs_embeds=ext, attention_mask=mask).last_hidden_state
        else:
            hidden, _ = prefix[0].run(prefix[1], ext, mask)
        scores = []
        for b in range(B):
            n = int(last[b]) + 1 - P
            for w, (_, toks) in enumerate(self.label_word_tokens):
                r = b * W + w
                logp = self.vocabulary_log_probs(hidden[r, n - 1:n - 1 + len(toks)])  # position j predicts token j+1
                total = logp[torch.arange(len(toks), device=logp.device), torch.tensor(toks, device=logp.device)].sum()
                scores.append(total / len(toks) if self.spec.word_score == "mean" else total)
        return torch.stack(scores).reshape(B, W)

    def logits_from_embeddings(self, inputs_embeds: torch.Tensor, batch: Batch) -> torch.Tensor:
        """[B, C] log-probabilities from word embeddings [B, T, H] of `batch`'s rows (a gradient measure's forward).

        The prompt before the slot is the same in every row and, for the gradient measures, never interpolated
        (IG, GradientSHAP and DeepLift keep the input's own embedding off the slot), so where the rows' first
        positions are exactly those tokens' embeddings their keys and values come from the prefix cache and
        forward and backward run over the suffix only. The prefix is then a constant of the graph: its
        embeddings get a zero gradient, which no measure reads (scores live on the slot's positions, after the
        prefix). Exact equality is checked, so an interpolated or perturbed prefix runs the whole prompt."""
        prefix = self._gradient_prefix(inputs_embeds, batch)
        if prefix is None:
            return self.forward(inputs_embeds=inputs_embeds, attention_mask=batch.attention_mask).logits
        s, _, _ = self._scores(None, batch.attention_mask, inputs_embeds, False, False, prefix_ids=prefix)
        return torch.log_softmax(s, -1)

    def _gradient_prefix(self, inputs_embeds: torch.Tensor, batch: Batch) -> torch.Tensor | None:
        """The leading tokens of the prompt before the slot [L] that every row of `inputs_embeds` [B, T, H] starts
        with exactly (their embeddings at real positions, each row keeping its read-out position after them), else
        None (cache off, or fewer than MIN_PREFIX such positions). L can be shorter than the template's prefix: the
        template is rendered around a placeholder, and the prompt's last token before the slot can merge with the
        slot's first word (SmolLM2's ":" + newline), as `shared_prefix_length` allows in the no-grad path. Reads the
        embeddings, not `batch.input_ids` (the gradient passes hand a batch of attention and type ids only)."""
        prefix = self.template_prefix_ids()
        mask = batch.attention_mask
        if not self.prefix_cache or len(prefix) < MIN_PREFIX or mask.shape != inputs_embeds.shape[:2]:
            return None
        P = min(len(prefix), inputs_embeds.shape[1])
        prefix = prefix[:P].to(inputs_embeds.device)
        with torch.no_grad():
            own = self.model.get_input_embeddings()(prefix).to(inputs_embeds.dtype)
            same = (inputs_embeds[:, :P].detach() == own[None]).all(-1).all(0) & mask[:, :P].bool().all(0)  # [P]
        L = int(same.long().cumprod(0).sum())
        L = min(L, int(self.pooled_positions(mask).min()))  # the read-out position stays in every row's suffix
        return prefix[:L] if L >= MIN_PREFIX else None

    @property
    def counted_module(self) -> torch.nn.Module:
        """The LM's base model: `forward` runs it (and the LM head on the answer position only), never the causal
        LM's own forward, so a hook there would count nothing. Teacher-forced multi-token label words run it again
        on B x W rows, which are counted: they are rows the model computes."""
        return self.model.base_model

    def explained_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """What the measures explain per class [N, C], from `logits` = log p [N, C]: the log-odds
        l_c = log p(c) - logsumexp_{k != c} log p(k) (exact for any number of classes, finite when p(c) rounds
        to 1), or log p(c) itself when the spec says logit 'log-prob'."""
        if self.spec.logit == "log-prob":
            return logits
        C = logits.shape[-1]
        eye = torch.eye(C, dtype=torch.bool, device=logits.device)
        others = torch.logsumexp(logits[:, None, :].expand(-1, C, -1).masked_fill(eye, float("-inf")), -1)
        return logits - others

    @property
    def mask_token_id(self) -> int:
        return self.meta.replacement_token_id


def _gather2(a: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Attention [B, heads, T', T'] read at the original positions `index` [B, T] (queries and keys)."""
    B, Hh, _, _ = a.shape
    T = index.shape[1]
    q = index[:, None, :, None].expand(B, Hh, T, a.shape[-1])
    a = a.gather(2, q)
    k = index[:, None, None, :].expand(B, Hh, T, T)
    return a.gather(3, k)


__all__: Sequence[str] = ("PromptedClassifier", "MASK_TOKEN")
