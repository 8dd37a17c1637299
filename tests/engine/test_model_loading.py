"""How weights are loaded: safetensors only at every entry point,
the dtype and the attention kernel chosen by pure functions and recorded, token types never dropped silently,
and ids and run names checked whole.

The folders are the packaged `tiny` BERT written back with its weights pickled (`pytorch_model.bin`) or in half
precision; `torch.load` is replaced by a trap, so a test fails if anything unpickles them.
"""
from __future__ import annotations

import functools
import inspect

import pytest
import torch

from engine.errors import CheckpointError, InvalidInputError
from engine.models import Classifier, load_classifier, resolve_encoder
from engine.models.loading import choose_attention, choose_dtype

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

CLASSES = ("negative", "positive")  # the toy dataset's
PICKLE_REFUSAL = "only as a pickle"


@pytest.fixture(autouse=True)
def _dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(tmp_path / "models_cache"))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture()
def no_unpickling(monkeypatch):
    """torch.load (transformers' way into a pytorch_model.bin) fails the test if anything calls it."""
    def trap(*args, **kwargs):
        raise AssertionError(f"torch.load was called on {args[:1]}: a pickle was opened")
    monkeypatch.setattr(torch, "load", trap)


def tiny_classifier(classes=CLASSES):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)
    return AutoModelForSequenceClassification.from_pretrained(
        resolve_encoder("tiny"), use_safetensors=True, num_labels=len(classes), id2label=dict(enumerate(classes)),
        label2id={c: i for i, c in enumerate(classes)})


def save_folder(model, folder, pickled: bool = False):
    """`model` and tiny's tokenizer in `folder`; pickled: the weights only as pytorch_model.bin."""
    from transformers import AutoTokenizer

    if pickled:
        folder.mkdir(parents=True)
        model.config.architectures = [type(model).__name__]  # as save_pretrained writes it
        model.config.save_pretrained(str(folder))
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    else:
        model.save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(resolve_encoder("tiny")).save_pretrained(str(folder))
    return folder


@pytest.fixture()
def pickled_classifier(tmp_path):
    return save_folder(tiny_classifier(), tmp_path / "pickled-classifier", pickled=True)


@pytest.fixture()
def pickled_encoder(tmp_path):
    from transformers import AutoModel

    return save_folder(AutoModel.from_pretrained(resolve_encoder("tiny"), use_safetensors=True), tmp_path / "pickled-encoder",
                       pickled=True)


def refused(capsys, code: int, folder) -> bool:
    """The command failed with the pickle refusal and the command that converts the folder."""
    err = capsys.readouterr().err
    return code == 2 and PICKLE_REFUSAL in err and f"{folder}-safetensors" in err


# -- nothing unpickled, at every entry point ----------------------------------------------------------------------
def test_explain_and_models_add_refuse_a_pickled_classifier(pickled_classifier, no_unpickling, capsys):
    from engine.cli import main

    assert refused(capsys, main(["explain", "--model", str(pickled_classifier), "--text", "a fine film",
                                 "--measure", "grad-l2"]), pickled_classifier)
    assert refused(capsys, main(["models", "add", str(pickled_classifier), "--id", "p"]), pickled_classifier)


def test_train_from_a_pickled_encoder_folder_is_refused(pickled_encoder, no_unpickling, capsys):
    """`train --model DIR` with pytorch_model.bin only: refused before any training (it used to be unpickled)."""
    from engine.cli import main
    from engine.models import TrainConfig, train_classifier

    assert refused(capsys, main(["train", "--model", str(pickled_encoder), "--dataset", "toy", "--epochs", "1",
                                 "--train-limit", "8", "--eval-limit", "8", "--quiet"]), pickled_encoder)
    with pytest.raises(CheckpointError, match=PICKLE_REFUSAL):  # the library call, as the Models page makes it
        train_classifier(TrainConfig(base_model=str(pickled_encoder), dataset="toy", epochs=1, train_limit=8,
                                     eval_limit=8), show_progress_bar=False)


def test_simulability_with_a_pickled_student_folder_is_refused(tmp_path, pickled_encoder, no_unpickling, capsys):
    """`simulability --student DIR` with pytorch_model.bin only: refused (it used to be unpickled by the student)."""
    from engine.cli import main
    from engine.simulability.student import new_student

    teacher = save_folder(tiny_classifier(), tmp_path / "teacher")
    assert refused(capsys, main(["simulability", "--teacher", str(teacher), "--student", str(pickled_encoder),
                                 "--dataset", "toy", "--budgets", "8", "--seeds", "0", "--explainers", "none",
                                 "--max-epochs", "1", "--patience", "1", "--validation-limit", "8", "--test-limit", "8",
                                 "--quiet"]), pickled_encoder)
    with pytest.raises(CheckpointError, match=PICKLE_REFUSAL):
        new_student(str(pickled_encoder), 2, seed=0)


def test_pages_refuse_a_pickled_folder(pickled_classifier, no_unpickling):
    """The Models page's Register form shows the refusal; the loader every page uses (app.shared.get_classifier)
    raises it."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from app.shared import get_classifier

    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    at = AppTest.from_file(main, default_timeout=120)
    at.run(timeout=120)
    at.switch_page(str(Path(main).parent.parent / "pages" / "models.py"))
    at.run(timeout=120)
    at.text_input[0].set_value(str(pickled_classifier))
    next(b for b in at.button if b.label == "Register").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert any(PICKLE_REFUSAL in e.value for e in at.error), [e.value for e in at.error]
    with pytest.raises(CheckpointError, match=PICKLE_REFUSAL):
        get_classifier(str(pickled_classifier))


# -- dtype ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("stored", [torch.float16, torch.bfloat16, torch.float32, None])
def test_half_precision_is_upcast_on_every_device_unless_asked(device, stored):
    """'auto' runs float32 whatever is stored and wherever (CUDA used to keep float16/bfloat16), and says so."""
    dtype, why = choose_dtype(device, stored, None)
    assert dtype == torch.float32
    assert ("upcast" in why) == (stored in (torch.float16, torch.bfloat16))
    assert choose_dtype(device, stored, "bfloat16")[0] == torch.bfloat16
    if not (device == "cpu" and stored == torch.float16):  # refused, see below
        assert choose_dtype(device, stored, "stored")[0] == (stored or torch.float32)


def test_float16_is_refused_on_the_cpu_and_unknown_dtypes_list_the_choices():
    assert choose_dtype("cuda", torch.float32, "float16")[0] == torch.float16
    with pytest.raises(InvalidInputError, match="bfloat16"):
        choose_dtype("cpu", torch.float32, "float16")
    with pytest.raises(InvalidInputError, match="float16 was asked for on the CPU"):
        choose_dtype("cpu", torch.float16, "stored")  # stored float16, on the CPU
    with pytest.raises(InvalidInputError, match="auto, stored, float32, bfloat16, float16"):
        choose_dtype("cpu", None, "fp8")


def test_a_float16_checkpoint_runs_in_float32_and_records_its_stored_dtype(tmp_path, monkeypatch):
    """A folder saved in float16 loads as float32 (logits within float16's rounding of the float32 model), and
    the classifier's runtime record says float32, stored float16; bfloat16 is kept when asked for."""
    model = tiny_classifier()
    folder = save_folder(model.half(), tmp_path / "half")
    classifier = load_classifier(str(folder))
    assert {p.dtype for p in classifier.model.parameters()} == {torch.float32}
    assert classifier.runtime["dtype"] == "float32" and classifier.runtime["stored_dtype"] == "float16"
    assert "upcast" in classifier.runtime["dtype_reason"]
    batch = classifier.batch(["a fine and moving film"])
    # the reference on the loaded classifier's device (the tests' device), where the batch is
    reference = model.float().to(classifier.device)(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert torch.allclose(classifier.logits(batch), reference, atol=1e-5)  # the float16 values, exactly widened
    monkeypatch.setenv("ENGINE_DTYPE", "bfloat16")
    asked = load_classifier(str(folder))
    assert asked.runtime["dtype"] == "bfloat16" and asked.model.dtype == torch.bfloat16


# -- attention kernel -------------------------------------------------------------------------------------------
def test_attention_choice():
    """SDPA where the architecture has it and can switch back; eager when asked, when it has none, or when every
    use needs it (the student's double backward)."""
    assert choose_attention(True, True)[0] == "sdpa"
    assert choose_attention(True, True, "eager")[0] == "eager"
    assert choose_attention(False, False)[0] == "eager"  # DeBERTa-v2 has no SDPA path
    assert choose_attention(True, False)[0] == "eager"  # could not switch back for attention measures
    assert choose_attention(True, True, need_weights=True)[0] == "eager"
    with pytest.raises(InvalidInputError, match="no SDPA"):
        choose_attention(False, False, "sdpa")
    with pytest.raises(InvalidInputError, match="auto, sdpa, eager"):
        choose_attention(True, True, "flash")


def test_sdpa_changes_no_number_beyond_float_noise_and_attention_measures_get_eager(tmp_path, monkeypatch):
    """The same folder loaded with SDPA (the default) and with eager attention: logits and input gradients of a
    paired batch agree to 1e-5; attention measures run eager on the SDPA model (same scores) and leave it on SDPA;
    the choice is recorded."""
    from engine.importance import get_explainer

    folder = save_folder(tiny_classifier(), tmp_path / "clf")
    fast = load_classifier(str(folder))
    monkeypatch.setenv("ENGINE_ATTENTION", "eager")
    eager = load_classifier(str(folder))
    assert fast.runtime["attn_implementation"] == "sdpa" and eager.runtime["attn_implementation"] == "eager"
    batch = fast.batch(["the plot is thin but the acting is superb", "dull"], ["was it good?", "really?"])
    assert torch.allclose(fast.logits(batch), eager.logits(batch), atol=1e-5)
    grads = []
    for c in (fast, eager):
        e = c.word_embeddings(batch.input_ids).detach().requires_grad_()
        c.logits_from_embeddings(e, batch)[:, 1].sum().backward()
        grads.append(e.grad)
    assert torch.allclose(grads[0], grads[1], atol=1e-5)
    for measure in ("attention-mean", "attention-rollout"):
        got = get_explainer(measure, fast).attribute(batch).scores
        assert torch.allclose(got, get_explainer(measure, eager).attribute(batch).scores, atol=1e-5)
    assert fast.model.config._attn_implementation == "sdpa"


def test_the_student_runs_eager_attention():
    from engine.simulability.student import new_student

    assert new_student(resolve_encoder("tiny"), 2, seed=0).encoder.config._attn_implementation == "eager"


def test_training_records_its_runtime(tmp_path):
    from engine.models import TrainConfig, train_classifier

    trained = train_classifier(TrainConfig(base_model="tiny", dataset="toy", epochs=1, train_limit=16, eval_limit=8),
                               show_progress_bar=False)
    assert trained.metadata["runtime"]["attn_implementation"] == "sdpa"
    assert trained.metadata["runtime"]["dtype"] == "float32"


# -- token types ---------------------------------------------------------------------------------------------------
def test_token_types_are_kept_when_the_forward_cannot_be_inspected(tmp_path):
    """A forward whose signature cannot be read (compiled or wrapped) still gets a paired input's token types:
    the logits are those of the inspectable model, which dropping them would change."""
    import engine.models.classifier as module

    folder = save_folder(tiny_classifier(), tmp_path / "clf")
    plain = load_classifier(str(folder))
    batch = plain.batch(["the plot is thin but the acting is superb"], ["was it good?"])
    expected = plain.logits(batch)
    without = plain.forward(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    assert not torch.allclose(expected, without, atol=1e-4)  # the types matter for this input

    opaque = load_classifier(str(folder))
    wrapped = functools.partial(opaque.model.forward)
    # a signature inspect cannot read: TypeError on Python 3.11, ValueError on 3.12 (which parses a string
    # __signature__ as a text signature); uses_token_types catches both
    wrapped.__signature__ = "opaque"
    opaque.model.forward = wrapped
    with pytest.raises((TypeError, ValueError)):
        inspect.signature(opaque.model.forward)
    assert module.uses_token_types(opaque.model)
    assert torch.allclose(Classifier(opaque.model, opaque.tokenizer, CLASSES, 64).logits(batch), expected, atol=1e-6)


# -- names checked whole ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["model\n", "a/b", "", "modèle", ".hidden"])
def test_model_ids_and_run_names_are_checked_whole(name, tmp_path):
    """A trailing newline (which `re.match` with '$' let through), a slash, a non-ASCII letter: refused."""
    from engine.models.checkpoint import check_model_id
    from engine.results.store import ResultsStore

    with pytest.raises(InvalidInputError):
        check_model_id(name)
    with pytest.raises(InvalidInputError):
        ResultsStore(tmp_path).has_cell(name, {"model": "m"})
    assert check_model_id("tiny-rt-masked-s0") == "tiny-rt-masked-s0"


def test_default_ids_are_valid_ids(tmp_path):
    from engine.models.checkpoint import check_model_id
    from engine.models.registry import default_id
    from engine.models.training import TrainConfig, default_model_id

    assert check_model_id(default_id(tmp_path / "modèle français")) == "mod-le-fran-ais"
    assert check_model_id(default_model_id(TrainConfig(base_model="modèle", dataset="toy"))) == "custom-toy-masked-s0"
