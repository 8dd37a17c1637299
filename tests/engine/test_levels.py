"""Word and sentence levels: units found from the tokenizer's offsets (BERT `##` pieces, byte-level BPE,
sentencepiece-style `▁` pieces) and scores aggregated over them (sums preserved for `sum`)."""
from __future__ import annotations

import numpy as np
import pytest

from engine.errors import InvalidInputError
from engine.importance.levels import aggregate, group_tokens, unit_index


def _bert_tokenizer():
    from transformers import AutoTokenizer

    from engine.models import resolve_encoder

    return AutoTokenizer.from_pretrained(resolve_encoder("tiny"))


def _pieces(tokenizer, text):
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return tokenizer.convert_ids_to_tokens(enc["input_ids"]), enc["offset_mapping"]


def test_bert_word_pieces_join_into_the_words_typed():
    tok = _bert_tokenizer()
    text = "Unredeemable, overwrought   melodrama!"
    tokens, offsets = _pieces(tok, text)
    assert any(t.startswith("##") for t in tokens), tokens  # the point: words split into pieces
    words = group_tokens(offsets, text, "word", tokens)
    assert [w.text for w in words] == ["Unredeemable,", "overwrought", "melodrama!"]
    assert sorted(i for w in words for i in w.tokens) == list(range(len(tokens)))


def test_byte_level_bpe_offsets_that_include_the_space_still_split_words():
    """GPT-2-style pieces (`Ġword`) whose offsets start on the space: the space starts a new word."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer(trim_offsets=False)
    bpe.train_from_iterator(["the movie was good", "a gripping film", "unwatchable mess"] * 5, vocab_size=300,
                            min_frequency=1, show_progress=False)
    text = "the unwatchablefilm was good"
    enc = bpe.encode(text)
    assert any(text[s:s + 1] == " " for s, _ in enc.offsets), "these offsets include the leading space"
    assert len(enc.tokens) > len(text.split()), enc.tokens
    words = group_tokens(enc.offsets, text, "word", enc.tokens)
    assert [w.text for w in words] == ["the", "unwatchablefilm", "was", "good"]


def test_sentencepiece_style_metaspace_pieces_join_into_words():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    sp = Tokenizer(models.BPE(unk_token="<unk>"))
    sp.pre_tokenizer = pre_tokenizers.Metaspace()
    sp.train_from_iterator(["the movie was good", "a gripping film"] * 5,
                           trainers.BpeTrainer(vocab_size=60, special_tokens=["<unk>"], show_progress=False))
    text = "moviegood filmthe"
    enc = sp.encode(text)
    assert len(enc.tokens) > 2 and enc.tokens[0].startswith("▁"), enc.tokens
    words = group_tokens(enc.offsets, text, "word", enc.tokens)
    assert [w.text for w in words] == ["moviegood", "filmthe"]


def test_sentences_of_a_babi_paragraph():
    tok = _bert_tokenizer()
    text = "Mary moved to the bathroom. John went to the hallway.\nDaniel travelled to the office."
    tokens, offsets = _pieces(tok, text)
    sentences = group_tokens(offsets, text, "sentence", tokens)
    assert [s.text for s in sentences] == ["Mary moved to the bathroom.", "John went to the hallway.",
                                           "Daniel travelled to the office."]


def test_sum_preserves_the_total_and_mean_and_max_abs_follow_their_definitions():
    text = "redeems it"
    offsets = [(0, 3), (3, 5), (5, 7), (8, 10)]  # red ##ee ##ms it
    words = group_tokens(offsets, text, "word")
    scores = np.array([0.5, -2.0, 0.25, 1.0])
    summed = aggregate(scores, words, "sum")
    assert summed == pytest.approx([-1.25, 1.0]) and summed.sum() == pytest.approx(scores.sum())
    assert aggregate(scores, words, "mean") == pytest.approx([-1.25 / 3, 1.0])
    assert aggregate(scores, words, "max-abs") == pytest.approx([-2.0, 1.0]), "the largest magnitude, with its sign"
    assert list(unit_index(words, 4)) == [0, 0, 0, 1]


def test_token_level_is_the_identity_and_unknown_names_are_refused():
    offsets = [(0, 3), (4, 6)]
    units = group_tokens(offsets, "bad it", "token", ["bad", "it"])
    assert aggregate([1.0, 2.0], units, "sum") == pytest.approx([1.0, 2.0])
    with pytest.raises(InvalidInputError, match="word"):
        group_tokens(offsets, "bad it", "paragraph")
    with pytest.raises(InvalidInputError, match="max-abs"):
        aggregate([1.0, 2.0], units, "median")
