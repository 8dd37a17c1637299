"""A word-level tokenizer over a fixed vocabulary (for the BiLSTM-attention model on GloVe vectors).

Built with the `tokenizers` library and wrapped as a `PreTrainedTokenizerFast`, so it behaves like the
transformers' tokenizers everywhere in the engine: `[CLS] primary [SEP] auxiliary [SEP]`, sequence ids,
character offsets, truncation and `save_pretrained` / `AutoTokenizer.from_pretrained` (JSON only).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _pre_tokenizer():
    from tokenizers import normalizers, pre_tokenizers

    return normalizers.BertNormalizer(lowercase=True, strip_accents=True, clean_text=True), pre_tokenizers.BertPreTokenizer()


def count_words(texts: Iterable[str]) -> Counter:
    normalizer, pre = _pre_tokenizer()
    counts: Counter = Counter()
    for text in texts:
        counts.update(word for word, _ in pre.pre_tokenize_str(normalizer.normalize_str(text)))
    return counts


def build_word_tokenizer(words: Iterable[str], model_max_length: int = 512):
    """A fast tokenizer whose ids are SPECIALS (0..4) followed by `words` in the given order."""
    from tokenizers import Tokenizer, models, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for word in words:
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer = _pre_tokenizer()
    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_max_length=model_max_length,
    )
