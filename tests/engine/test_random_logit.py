"""The random-logit test (engine/sanity/random_logit.py, Sixt et al. 2020): each input explained for another class
on the same model, compared by Spearman with the explanation of its own class. On hand-built models whose logits
are known: with logit_0 = -logit_1 a signed measure gives exactly -1 (same tokens, opposite signs) and its absolute
value +1; with logit_0 = 0 the other class's explanation is constant, so there is no ranking to compare (NaN, not a
pass)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from handbuilt_models import HandBuilt, _Tokenizer, batch_of, handbuilt

from engine.models import Classifier
from engine.sanity import random_logit, sanity_summary
from engine.sanity.random_logit import other_classes

TEXTS = ["good bad fine good", "bad fine good bad bad", "fine good fine bad good", "good good bad fine"]


class _Mirrored(torch.nn.Module):
    """A hand-built linear model with logit_0 = -logit_1: explaining class 0 is explaining class 1 negated."""

    def __init__(self):
        super().__init__()
        self.inner = HandBuilt("linear")
        self.config = self.inner.config

    def get_input_embeddings(self):
        return self.inner.get_input_embeddings()

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        z1 = out.logits[:, 1]
        return SimpleNamespace(logits=torch.stack([-z1, z1], dim=1), attentions=None, hidden_states=out.hidden_states)


def _mirrored() -> Classifier:
    classifier = Classifier(_Mirrored(), _Tokenizer(), ("neg", "pos"), max_length=64)
    classifier.metadata["id"] = "handbuilt-mirrored"
    return classifier


def test_the_other_class_is_never_the_target_and_is_seeded():
    target = torch.tensor([0, 1, 2, 3, 4] * 20)
    other = other_classes(target, 5, seed=3)
    assert (other != target).all() and ((other >= 0) & (other < 5)).all()
    assert torch.equal(other, other_classes(target, 5, seed=3))
    assert len(set(other[target == 0].tolist())) > 1  # uniform over the others, not always the next class
    assert torch.equal(other_classes(torch.tensor([0, 1]), 2, seed=0), torch.tensor([1, 0]))


def test_a_signed_measure_of_mirrored_logits_gives_minus_one_and_its_magnitude_plus_one():
    rows = random_logit(_mirrored(), ["x-grad-sign", "x-grad-abs"], batch_of(TEXTS), target=[1, 1, 1, 1])
    signed = rows[rows["measure"] == "x-grad-sign"]
    assert np.allclose(signed["spearman"], -1.0) and np.allclose(signed["spearman_abs"], 1.0)
    magnitude = rows[rows["measure"] == "x-grad-abs"]
    assert np.allclose(magnitude["spearman"], 1.0)  # |scores| do not say for which class: fails the test
    summary = sanity_summary(rows)
    verdict = summary.set_index("measure")["passes"]
    assert verdict["x-grad-sign"] and not verdict["x-grad-abs"]
    assert (rows["other_class"] == 0).all()


def test_a_class_whose_logit_ignores_the_input_gives_no_ranking_to_compare():
    rows = random_logit(handbuilt("linear"), ["x-grad-sign"], batch_of(TEXTS), target=[1, 1, 1, 1])
    assert rows["spearman"].isna().all()  # class 0's logit is the constant 0: every score 0


def test_the_sanity_command_offers_the_check_and_its_help_example_parses():
    import shlex

    from engine.cli import build_parser
    from engine.faithfulness.evaluation import SANITY_CHECKS, SanityCell

    argv = ["sanity", "--model", "tiny-rt-masked-s0", "--dataset", "rt", "--measures", "ig-sign", "ig-abs",
            "--checks", "logit"]
    args = build_parser(argv).parse_args(argv)
    assert args.checks == ["logit"]
    assert SanityCell("m", "rt", "ig-sign", 0, check="logit").key()["kind"] == SANITY_CHECKS["logit"]
    sub = build_parser(["sanity"])._subparsers._group_actions[0].choices["sanity"]
    example = next(line for line in sub.epilog.splitlines() if "--checks logit" in line)
    words = shlex.split(example.strip())[3:]  # drop "python -m engine"
    assert build_parser(words).parse_args(words).checks == ["logit"]
