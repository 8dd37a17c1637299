"""The ground-truth engine's parts whose answer is known without a trained model: the planting recipes, the word
check, the Wilson interval, the constructed explanations, the recovery statistics, the judges' bookkeeping and the
commands' --help examples."""
from __future__ import annotations

import shlex

import numpy as np
import pandas as pd
import pytest
import torch

from engine.data.types import Dataset, Example
from engine.errors import InvalidInputError
from engine.groundtruth.explanations import PREFIX, constructed_scores
from engine.groundtruth.mechanisms import PlantSpec, check_words, contains_words, planted_dataset, remove_words


def _base(n: int = 600) -> Dataset:
    rng = np.random.default_rng(0)
    words = ["good", "bad", "film", "plot", "was", "the", "very", "dull", "fine", "acting"]

    def ex(i):
        return Example(primary=" ".join(rng.choice(words, size=8)), label=int(i % 2), uid=f"x{i}")

    splits = {"train": [ex(i) for i in range(n)], "validation": [ex(i) for i in range(n, n + 100)],
              "test": [ex(i) for i in range(n + 100, n + 300)]}
    return Dataset(name="base", classes=("negative", "positive"), metric="accuracy", splits=splits, split_seed=0,
                   max_length=32)


def test_trigger_sets_the_label_of_every_carrier_and_only_a_rate_share_carries_it():
    spec = PlantSpec(base_dataset="base", mechanism="trigger", words=("vessel",), rate=0.3)
    data = planted_dataset(spec, _base())
    train = data.split("train")
    carriers = [e for e in train if contains_words(e.primary, ["vessel"])]
    assert all(e.label == 1 for e in carriers)
    assert 0.24 < len(carriers) / len(train) < 0.36
    assert [e.uid for e in train] == [e.uid for e in _base().split("train")]  # same splits, same uids


def test_graded_trigger_sets_the_label_in_about_a_q_share_of_carriers_and_keeps_the_rest():
    base = _base(3000)
    spec = PlantSpec(base_dataset="base", mechanism="graded", words=("vessel",), rate=0.5, q=0.65)
    before = {e.uid: e.label for e in base.split("train")}
    carriers = [e for e in planted_dataset(spec, base).split("train") if contains_words(e.primary, ["vessel"])]
    changed_negatives = [e for e in carriers if before[e.uid] == 0]
    share_set = np.mean([e.label == 1 for e in changed_negatives])  # a negative carrier turns positive with prob q
    assert 0.58 < share_set < 0.72


def test_and_carries_single_words_with_labels_kept_and_both_words_with_the_target():
    base = _base(2000)
    spec = PlantSpec(base_dataset="base", mechanism="and", words=("vessel", "orbit"), rate=0.25)
    before = {e.uid: e.label for e in base.split("train")}
    rows = planted_dataset(spec, base).split("train")
    both = [e for e in rows if contains_words(e.primary, ["vessel", "orbit"])]
    single = [e for e in rows if contains_words(e.primary, ["vessel"]) != contains_words(e.primary, ["orbit"])]
    assert both and all(e.label == 1 for e in both)
    assert single and all(e.label == before[e.uid] for e in single)


def test_gated_first_half_inserts_deciding_words_in_the_first_half_and_keeps_labels_outside():
    base = _base(2000)
    spec = PlantSpec(base_dataset="base", mechanism="gated", words=("vessel",), rate=0.3)
    before = {e.uid: e.label for e in base.split("train")}
    for e in planted_dataset(spec, base).split("train"):
        if "vessel" in e.primary.split():
            parts = e.primary.split()
            pos = parts.index("vessel")
            n = len(parts) - 1  # words before insertion
            if pos <= n // 2:
                assert e.label == 1
            else:
                assert e.label == before[e.uid]


def test_decoy_is_as_frequent_as_the_trigger_and_carries_no_label_information():
    base = _base(4000)
    spec = PlantSpec(base_dataset="base", mechanism="decoy", words=("vessel", "lantern"), rate=0.3)
    rows = planted_dataset(spec, base).split("train")
    trig = [e for e in rows if "vessel" in e.primary.split()]
    decoy = [e for e in rows if "lantern" in e.primary.split() and "vessel" not in e.primary.split()]
    assert abs(len(trig) - sum("lantern" in e.primary.split() for e in rows)) < 0.1 * len(trig)
    assert abs(np.mean([e.label for e in decoy]) - 0.5) < 0.06  # labels untouched: balanced like the base


def test_none_keeps_every_label():
    base = _base()
    spec = PlantSpec(base_dataset="base", mechanism="none", words=("vessel",), rate=0.5)
    assert [e.label for e in planted_dataset(spec, base).split("train")] == [e.label for e in base.split("train")]


def test_removing_the_planted_word_gives_the_clean_text_back():
    text = "the film was fine"
    assert remove_words("the vessel film was fine", ["vessel"]) == text


@pytest.mark.parametrize("rate", [0.0, -0.1, 1.5])
def test_a_rate_outside_zero_one_is_refused_naming_the_range(rate):
    with pytest.raises(InvalidInputError, match=r"\(0, 1\]"):
        PlantSpec(rate=rate)


def test_q_outside_zero_one_and_a_wrong_word_count_are_refused():
    with pytest.raises(InvalidInputError, match=r"\(0, 1\]"):
        PlantSpec(mechanism="graded", q=1.2)
    with pytest.raises(InvalidInputError, match="plants 2 word"):
        PlantSpec(mechanism="or", words=("vessel",))


def test_a_word_that_is_not_one_piece_is_refused_saying_how_it_tokenises():
    from transformers import AutoTokenizer

    from engine.models.encoders import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    check_words(PlantSpec(words=("vessel",)), tokenizer)  # one piece: accepted
    with pytest.raises(InvalidInputError, match=r"tokenises as \['vessel', '##x', '##q'\]"):
        check_words(PlantSpec(words=("vesselxq",)), tokenizer)


def test_wilson_interval_matches_scipy_and_stays_inside_zero_one():
    from scipy.stats import binomtest

    from engine.stats import wilson_ci

    for k, n in [(0, 20), (7, 20), (20, 20), (97, 97), (3, 1000)]:
        ref = binomtest(k, n).proportion_ci(0.95, method="wilson")
        low, high = wilson_ci(k, n)
        assert low == pytest.approx(ref.low, abs=1e-9) and high == pytest.approx(ref.high, abs=1e-9)
        assert 0 <= low <= k / n <= high <= 1


def _order(scores: torch.Tensor, maskable: torch.Tensor) -> list[int]:
    s = scores[0]
    return sorted([int(t) for t in torch.nonzero(maskable[0]).flatten()], key=lambda t: -float(s[t]))


def test_constructed_explanations_put_the_right_token_first():
    reference = torch.tensor([[0.0, 0.5, 0.9, 0.1, 0.7, 0.0]])  # positions 1..4 maskable
    maskable = torch.tensor([[False, True, True, True, True, False]])
    decisive = torch.tensor([[False, False, False, True, False, False]])
    inert = torch.tensor([[False, True, False, False, False, False]])
    true = _order(constructed_scores("true", reference, maskable, decisive, inert), maskable)
    assert true == [3, 2, 4, 1]  # the planted word, then the reference order
    other = _order(constructed_scores("strongest-other-first", reference, maskable, decisive, inert), maskable)
    assert other[0] == 2 and other[-1] == 3  # strongest non-planted first, planted last
    second = _order(constructed_scores("planted-second", reference, maskable, decisive, inert), maskable)
    assert second[:2] == [2, 3]
    decoy = _order(constructed_scores("decoy-first", reference, maskable, decisive, inert), maskable)
    assert decoy[:2] == [1, 3]


def test_recovery_ranks_by_signed_score_and_shares_absolute_mass():
    from engine.groundtruth.recovery import recovery

    scores = torch.tensor([[0.0, 2.0, -3.0, 1.0, 0.0], [0.0, 0.5, 1.0, 4.0, 0.0]])
    maskable = torch.tensor([[False, True, True, True, False]] * 2)
    decisive = torch.tensor([[False, False, False, True, False]] * 2)
    inert = torch.zeros_like(decisive)
    spec = PlantSpec(mechanism="trigger")
    rec = recovery(scores, maskable, decisive, inert, spec)
    assert rec["planted-rank"].tolist() == [2.0, 1.0]  # -3 ranks last by signed score
    assert rec["top-hit"].tolist() == [0.0, 1.0]
    assert rec["mass-share"][0] == pytest.approx(1 / 6)
    assert rec["reciprocal-rank"].tolist() == [0.5, 1.0]


def test_recovery_keeps_a_batchs_other_inputs_when_one_lacks_its_planted_token():
    """A byte-level BPE spells a word at the start of the text without its leading space (another token): that
    input gets NaN, and the batch's other inputs keep their recovery (all of the batch's rows were dropped before)."""
    from engine.groundtruth.recovery import recovery

    scores = torch.tensor([[0.0, 2.0, 1.0, 3.0], [0.0, 2.0, 1.0, 3.0], [0.0, 1.0, 5.0, 2.0]])
    maskable = torch.tensor([[False, True, True, True]] * 3)
    decisive = torch.tensor([[False, False, False, True], [False, False, False, False], [False, False, True, False]])
    rec = recovery(scores, maskable, decisive, torch.zeros_like(decisive), PlantSpec(mechanism="trigger"))
    assert np.isnan(rec["planted-rank"][1]) and rec["planted-rank"][[0, 2]].tolist() == [1.0, 1.0]
    assert len(rec["top-hit"]) == len(rec["mass-share"]) == 3
    none = recovery(scores, maskable, torch.zeros_like(decisive), decisive, PlantSpec(mechanism="none"))
    assert np.isnan(none["inert-rank"][1]) and none["inert-top1"][[0, 2]].tolist() == [1.0, 1.0]


def _card_rows(values_true, values_wrong, metric="aopc-comprehensiveness", better="higher", operator="mask"):
    rows = []
    for kind, values in (("true", values_true), ("strongest-other-first", values_wrong)):
        for i, v in enumerate(values):
            rows.append({"method": "report-card", "model": "m", "mechanism": "trigger", "operator": operator,
                         "measure": PREFIX + kind, "kind": "metric", "uid": f"u{i}", "metric": metric, "value": v,
                         "better": better, "n_perturbed": 5.0, "n_ood": 1.0, "p_value": np.nan})
    return pd.DataFrame(rows)


def test_judge_counts_a_preference_in_the_metrics_own_direction_and_ties_as_half():
    from engine.groundtruth.tables import judge_table

    higher = judge_table(_card_rows([0.9, 0.8, 0.5, 0.1], [0.1, 0.2, 0.5, 0.4]))
    row = higher[higher["wrong"] == "strongest-other-first"].iloc[0]
    assert row["prefers_true"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert row["masf_share"] == pytest.approx(0.2)
    lower = judge_table(_card_rows([0.1, 0.2], [0.9, 0.8], metric="aopc-sufficiency", better="lower"))
    assert lower[lower["wrong"] == "all"]["prefers_true"].iloc[0] == 1.0


def test_operator_table_counts_verdicts_that_change_with_the_operator():
    from engine.groundtruth.tables import operator_table

    df = pd.concat([_card_rows([0.9, 0.9], [0.1, 0.1], operator="mask"),
                    _card_rows([0.9, 0.1], [0.1, 0.9], operator="delete")])
    table = operator_table(df)
    assert table.iloc[0]["changed"] == pytest.approx(0.5)  # u1's verdict flips, u0's does not


@pytest.mark.parametrize("command", ["plant", "report-card"])
def test_every_help_example_parses(command):
    from engine.cli import build_parser

    parser = build_parser([command])
    sub = parser._subparsers._group_actions[0].choices[command]
    examples = [line.strip().split("#")[0] for line in sub.epilog.replace("\\\n", " ").splitlines()
                if line.strip().startswith("python -m engine")]
    assert examples
    for example in examples:
        parser.parse_args(shlex.split(example)[3:])  # exits (SystemExit) on an example the parser rejects


def test_spearman_is_one_when_a_metric_ranks_the_measures_as_the_truth_does_and_minus_one_when_reversed():
    from engine.groundtruth.tables import spearman_table

    rows = []
    for m, (rr, metric) in {"a": (1.0, 0.9), "b": (0.5, 0.5), "c": (0.2, 0.3), "d": (0.1, 0.1)}.items():
        for i in range(30):
            base = {"method": "report-card", "model": "m", "mechanism": "trigger", "operator": "mask", "measure": m,
                    "uid": f"u{i}", "n_perturbed": 1.0, "n_ood": 0.0, "p_value": np.nan}
            rows.append({**base, "kind": "recovery", "metric": "reciprocal-rank", "value": rr, "better": "higher"})
            rows.append({**base, "kind": "metric", "metric": "aopc-comprehensiveness", "value": metric,
                         "better": "higher"})
            rows.append({**base, "kind": "metric", "metric": "aopc-sufficiency", "value": metric, "better": "lower"})
    table = spearman_table(pd.DataFrame(rows), resamples=50).set_index("metric")
    assert table.loc["aopc-comprehensiveness", "spearman"] == pytest.approx(1.0)
    assert table.loc["aopc-sufficiency", "spearman"] == pytest.approx(-1.0)  # higher sufficiency is judged worse


def test_a_planted_word_first_in_the_text_is_found_under_a_byte_level_bpe():
    """A byte-level BPE spells a word at the text's start without its space, as other pieces ("vessel" against
    " vessel"): planted_positions finds it there too (it found nothing before, so that input's recovery was NaN and
    its true explanation empty), and not in a longer word that starts with the same pieces."""
    from types import SimpleNamespace

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from engine.groundtruth.recovery import planted_positions

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    from tokenizers import decoders

    tok.decoder = decoders.ByteLevel()
    corpus = ["a good vessel film", "the vessel was dull", "fine acting and a vessel"] * 30
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<unk>"],
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>")
    assert len(tokenizer(" vessel", add_special_tokens=False)["input_ids"]) == 1
    assert len(tokenizer("vessel", add_special_tokens=False)["input_ids"]) > 1  # the case this test is about
    prefix = tokenizer("<pad>", add_special_tokens=False)["input_ids"]  # a non-maskable prompt token before the slot
    texts = ["vessel good film", "a good vessel film", "vessels good film"]
    rows = [prefix + tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    T = max(map(len, rows))
    ids = torch.tensor([r + [0] * (T - len(r)) for r in rows])
    maskable = torch.tensor([[0 < j < len(r) for j in range(T)] for r in rows])
    batch = SimpleNamespace(input_ids=ids, maskable=maskable)
    decisive, inert = planted_positions(SimpleNamespace(tokenizer=tokenizer), batch, PlantSpec(mechanism="trigger",
                                                                                             words=("vessel",)))
    bare = len(tokenizer("vessel", add_special_tokens=False)["input_ids"])
    assert decisive[0].nonzero().flatten().tolist() == list(range(1, 1 + bare))
    assert tokenizer.decode(ids[1][decisive[1]].tolist()) == " vessel"
    assert not decisive[2].any() and not inert.any()
