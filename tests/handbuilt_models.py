"""Hand-built classifiers whose reasons are known exactly, for tests/engine/test_groundtruth_unit.py.

Each is a 2-class `engine.models.Classifier` around a small float64 nn.Module: logit_0 = 0 and logit_1 = a
closed-form function of the word embeddings, so every measure's right answer can be derived by hand.

Vocabulary (word -> id; ids 0 [PAD], 1 [MASK], 2 [CLS], 3 [SEP] have the zero embedding, so masking a
token to [MASK] removes it exactly, and IG's zero baseline equals the [MASK] baseline). The embedding has
H = 5 named features:

    VALUE  (0)  the word's linear weight ("good" +1, "bad" -2, "fine" +0.5; the filler words 0)
    A      (1)  1 for the planted word "trig"
    B      (2)  1 for the second planted word "pair"
    NOT    (3)  1 for the gate word "not"
    SALIENT(4)  the attention score of the distractor "loud" (used by the attention head only)

Heads (each an nn.Module, the nonlinearities as `torch.nn.ReLU` modules so captum's DeepLift applies its
rescale rule to them; n_A = sum over real tokens of feature A, likewise n_B):

    linear      logit_1 = sum_t VALUE_t
    or          logit_1 = linear + k * (1 - relu(1 - (n_A + n_B)))     (= k * min(1, n_A + n_B) for counts >= 0)
    and         logit_1 = linear + k * relu(n_A + n_B - 1)
    gated       logit_1 = linear + k * sum_t A_t * (1 - NOT_{t-1})     ("trig" counts unless right after "not")
    peak        logit_1 = linear + k * n_A * (2 - n_A)                  (a response that peaks at n_A = 1)
    attention   logit_1 = k * sum_t a_t VALUE_t, a = softmax over real tokens of SALIENT_t; the forward returns a
                as the one layer's attention (every query row), so the attention measures read it
"""
from __future__ import annotations

from types import SimpleNamespace

import torch

from engine.models import Batch, Classifier

VALUE, A, B, NOT, SALIENT = range(5)
SPECIALS = ("[PAD]", "[MASK]", "[CLS]", "[SEP]")
#: word -> (VALUE, A, B, NOT, SALIENT)
WORDS = {
    "the": (0, 0, 0, 0, 0), "film": (0, 0, 0, 0, 0), "plot": (0, 0, 0, 0, 0), "was": (0, 0, 0, 0, 0),
    "good": (1.0, 0, 0, 0, 0), "bad": (-2.0, 0, 0, 0, 0), "fine": (0.5, 0, 0, 0, 0),
    "trig": (0, 1, 0, 0, 0), "pair": (0, 0, 1, 0, 0), "not": (0, 0, 0, 1, 0),
    "loud": (0, 0, 0, 0, 2.0), "hit": (1.0, 0, 0, 0, 0),
}
VOCAB = {**{s: i for i, s in enumerate(SPECIALS)}, **{w: i + len(SPECIALS) for i, w in enumerate(WORDS)}}


class _Linear(torch.nn.Module):
    def forward(self, e):  # e [B, T, H] with padding zeroed
        return e[..., VALUE].sum(1)


class _Or(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k, self.relu = k, torch.nn.ReLU()

    def forward(self, e):
        count = (e[..., A] + e[..., B]).sum(1)
        return e[..., VALUE].sum(1) + self.k * (1 - self.relu(1 - count))


class _And(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k, self.relu = k, torch.nn.ReLU()

    def forward(self, e):
        count = (e[..., A] + e[..., B]).sum(1)
        return e[..., VALUE].sum(1) + self.k * self.relu(count - 1)


class _Gated(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, e):
        previous_not = torch.nn.functional.pad(e[..., NOT], (1, 0))[:, :-1]  # NOT of the token before t
        return e[..., VALUE].sum(1) + self.k * (e[..., A] * (1 - previous_not)).sum(1)


class _Peak(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, e):
        n_a = e[..., A].sum(1)
        return e[..., VALUE].sum(1) + self.k * n_a * (2 - n_a)


class EmbeddingModule(torch.nn.Module):
    """The frame every hand-built module shares: a float64 word-embedding table [V, H] and the config the engine
    reads (2 classes, one layer). Subclasses compute logit_1 from `embedded(...)`."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.embed = torch.nn.Embedding(*table.shape, _weight=table)
        self.config = SimpleNamespace(num_labels=2, hidden_size=table.shape[1], num_hidden_layers=1,
                                      initializer_range=0.02)

    def get_input_embeddings(self):
        return self.embed

    def embedded(self, input_ids, inputs_embeds):
        """[B, T, H]: the ids' embeddings, or the embeddings given (captum's gradient measures pass those)."""
        return self.embed(input_ids) if inputs_embeds is None else inputs_embeds


class HandBuilt(EmbeddingModule):
    """The module a hand-built `Classifier` wraps: word embeddings [V, 5] (float64) and one head.

    forward(input_ids [B, T] or inputs_embeds [B, T, 5], attention_mask [B, T]) -> logits [B, 2]; padding is
    zeroed before the head. The attention head also returns attentions (1 layer of [B, 1, T, T])."""

    def __init__(self, head: str, k: float = 3.0, embedding_scale: dict[str, float] | None = None):
        table = torch.zeros(len(VOCAB), 5, dtype=torch.float64)
        for word, features in WORDS.items():
            table[VOCAB[word]] = torch.tensor(features, dtype=torch.float64)
        for word, scale in (embedding_scale or {}).items():
            table[VOCAB[word]] *= scale
        super().__init__(table)
        self.kind, self.k = head, float(k)
        heads = {"linear": _Linear, "or": _Or, "and": _And, "gated": _Gated, "peak": _Peak}
        self.head = heads[head](self.k) if head not in ("linear", "attention") else (_Linear() if head == "linear" else None)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                output_attentions=False, output_hidden_states=False):
        e = self.embedded(input_ids, inputs_embeds)
        real = attention_mask.to(e.dtype)
        e = e * real[..., None]
        attentions = None
        if self.kind == "attention":
            scores = e[..., SALIENT].masked_fill(real == 0, float("-inf"))
            a = torch.softmax(scores, dim=1)  # [B, T]
            logit = self.k * (a * e[..., VALUE]).sum(1)
            if output_attentions:
                attentions = (a[:, None, None, :].expand(-1, 1, a.shape[1], -1),)
        else:
            logit = self.head(e)
        logits = torch.stack([torch.zeros_like(logit), logit], dim=1)
        return SimpleNamespace(logits=logits, attentions=attentions,
                               hidden_states=(e,) if output_hidden_states else None)


class _Tokenizer:
    """Just what the measures use: the mask and pad ids and id -> word, of `vocab` (word -> id; default VOCAB, whose
    first four ids are SPECIALS' as in every vocabulary here)."""

    def __init__(self, vocab: dict[str, int] | None = None):
        self.vocab = VOCAB if vocab is None else vocab
        self.mask_token_id, self.pad_token_id = self.vocab["[MASK]"], self.vocab["[PAD]"]

    def convert_ids_to_tokens(self, ids):
        words = list(self.vocab)
        return [words[int(i)] for i in ids]


def handbuilt(head: str, k: float = 3.0, embedding_scale: dict[str, float] | None = None) -> Classifier:
    """The hand-built Classifier with `head` ('linear', 'or', 'and', 'gated', 'peak', 'attention'), strength k
    (logits) and optionally some words' embeddings scaled (e.g. {"trig": 1.5})."""
    classifier = Classifier(HandBuilt(head, k, embedding_scale), _Tokenizer(), ("neg", "pos"), max_length=64)
    classifier.metadata["id"] = f"handbuilt-{head}"
    return classifier


def batch_of(texts: list[str], vocab: dict[str, int] | None = None) -> Batch:
    """A Batch of whitespace-split texts: [CLS] words [SEP], right-padded; the words are maskable. `vocab`: word -> id
    (default VOCAB), its first four ids SPECIALS'."""
    vocab = VOCAB if vocab is None else vocab
    rows = [[vocab[w] for w in text.split()] for text in texts]
    T = max(len(r) for r in rows) + 2
    ids = torch.zeros(len(rows), T, dtype=torch.long)
    att = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r) + 2] = torch.tensor([vocab["[CLS]"], *r, vocab["[SEP]"]])
        att[i, : len(r) + 2] = 1
    maskable = ids >= len(SPECIALS)
    return Batch(input_ids=ids, attention_mask=att, token_type_ids=torch.zeros_like(ids), segments=maskable.long(),
                 maskable=maskable, target=None, truncated=torch.zeros(len(rows), dtype=torch.bool),
                 offsets=[[(0, 0)] * T for _ in rows])


def exact_shapley(classifier: Classifier, text: str, target: int = 1, vocab: dict[str, int] | None = None) -> torch.Tensor:
    """Exact Shapley values [N] of the N words of `text` for class `target`'s logit, removal = [MASK], by
    enumerating all 2^N coalitions (N <= 12): phi_i = sum over S not containing i of
    |S|! (N - |S| - 1)! / N! * (v(S + i) - v(S))."""
    from itertools import product
    from math import factorial

    vocab = VOCAB if vocab is None else vocab
    batch = batch_of([text], vocab)
    positions = batch.maskable[0].nonzero().flatten().tolist()
    n = len(positions)
    coalitions = list(product((0, 1), repeat=n))
    ids = batch.input_ids.repeat(len(coalitions), 1)
    for row, keep in enumerate(coalitions):
        for j, kept in enumerate(keep):
            if not kept:
                ids[row, positions[j]] = vocab["[MASK]"]
    with torch.no_grad():
        v = classifier.forward(input_ids=ids, attention_mask=batch.attention_mask.repeat(len(coalitions), 1)).logits[:, target]
    value = {keep: float(v[row]) for row, keep in enumerate(coalitions)}
    phi = torch.zeros(n, dtype=torch.float64)
    for keep, v_s in value.items():
        size = sum(keep)
        for i in range(n):
            if not keep[i]:
                with_i = keep[:i] + (1,) + keep[i + 1:]
                phi[i] += factorial(size) * factorial(n - size - 1) / factorial(n) * (value[with_i] - v_s)
    return phi
