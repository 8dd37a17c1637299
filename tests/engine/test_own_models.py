"""The user's own classifiers: any Hugging Face sequence-classification folder loads as a
`Classifier`, every encoder family with a mask token works with every measure, MaSF and recursive masking,
decoder classifiers with a chosen replacement token, registration by reference, and masked fine-tuning that
starts from the user's classifier.

Each family is a random-weight configuration built here (hidden 32, 2 layers, 2 heads; no download), saved
with `save_pretrained` beside the packaged BERT tokenizer of the `tiny` encoder (no family's own tokenizer is
available offline), and loaded back through `load_classifier`, the one loading path.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.errors import CheckpointError, InvalidInputError, LabelMismatchError, NotApplicableError
from engine.importance import builtin_measures, get_explainer
from engine.models import load_classifier

TEXTS = ["the movie was really good and fun", "this film was so dull"]
CLASSES = ("negative", "positive")  # the toy dataset's, so MaSF can be calibrated on it
CHEAP = {"beam": {"beam_size": 2}, "kernel-shap": {"n_samples": 30}, "lime": {"n_samples": 30},
         "shapley-sampling": {"n_samples": 2}, "gradient-shap": {"n_samples": 4}, "ig-sign": {"steps": 8},
         "ig-abs": {"steps": 8}, "shapley-interactions": {"budget": 64}, "smoothgrad": {"n_samples": 4},
         "squaregrad": {"n_samples": 4}, "vargrad": {"n_samples": 4}}
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
FAMILIES = {
    "bert": dict(model_type="bert", **SMALL),
    # RoBERTa and XLM-R number positions from pad_token_id + 1: 66 position embeddings allow 64 tokens
    "roberta": dict(model_type="roberta", **{**SMALL, "max_position_embeddings": 66}, pad_token_id=1, type_vocab_size=1),
    "distilbert": dict(model_type="distilbert", dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64),
    "electra": dict(model_type="electra", embedding_size=16, **SMALL),
    "deberta-v2": dict(model_type="deberta-v2", **SMALL, relative_attention=True, position_biased_input=False,
                       pos_att_type=["p2c", "c2p"], position_buckets=16, type_vocab_size=0),
    "albert": dict(model_type="albert", embedding_size=16, **SMALL),
    "xlm-roberta": dict(model_type="xlm-roberta", **{**SMALL, "max_position_embeddings": 66}, pad_token_id=1,
                        type_vocab_size=1),
    "gpt2": dict(model_type="gpt2", n_embd=32, n_layer=2, n_head=2, n_positions=64),
    "llama": dict(model_type="llama", hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                  intermediate_size=64, max_position_embeddings=64),
}
DECODERS = ("gpt2", "llama")
# measures that explain only another kind of model (the BiLSTM's own additive attention; the words a prompted LM names;
# AttnLRP, offered for prompted LMs of the families lxt's rules cover)
NOT_FOR_TRANSFORMERS = {"attention", "self-attribution", "attnlrp"}
# measures of an encoder's attention layers (value zeroing reads each layer's value projection): not for decoders
ENCODERS_ONLY = {"value-zeroing", "value-zeroing-sign"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one torch thread (tests/conftest.py)


@pytest.fixture(scope="module")
def tokenizer_dir():
    from engine.models import resolve_encoder

    return resolve_encoder("tiny")


def build_folder(family: str, folder, tokenizer_dir, classes=CLASSES, seed: int = 0, **save_kwargs):
    """A random-weight `family` classifier saved with save_pretrained (+ the BERT tokenizer) into `folder`.
    Decoders are saved with a tokenizer that has no mask token, as theirs have none."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    kwargs = dict(FAMILIES[family])
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, **({"mask_token": None} if family in DECODERS else {}))
    config = AutoConfig.for_model(kwargs.pop("model_type"), vocab_size=len(tokenizer), num_labels=len(classes),
                                  id2label=dict(enumerate(classes)), label2id={c: i for i, c in enumerate(classes)},
                                  **kwargs)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(str(folder), **save_kwargs)
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def family_folders(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("families")
    return {family: build_folder(family, root / family, tokenizer_dir) for family in FAMILIES}


_LOADED: dict = {}


def classifier_of(family: str, folders):
    """The family's classifier through `load_classifier` (decoders: through the foreign loader with the pad token
    chosen as replacement, as `models add --replacement pad` does)."""
    if family not in _LOADED:
        if family in DECODERS:
            from engine.models.foreign import load_foreign

            _LOADED[family] = load_foreign(folders[family], model_id=family, replacement="pad")
        else:
            _LOADED[family] = load_classifier(str(folders[family]))
    return _LOADED[family]


def _target_logit(classifier, batch, ids, target):
    with torch.no_grad():
        return classifier.logits(batch, ids).gather(1, target[:, None]).squeeze(1)


# -- every family, every measure ---------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_every_applicable_measure_explains_the_family_and_scores_only_maskable_tokens(family, family_folders):
    """All measures but the BiLSTM's own attention (and `smat`, which needs head weights learned for the model
    first) apply to every family; their scores are finite, and zero on special tokens, padding and the
    auxiliary sequence."""
    classifier = classifier_of(family, family_folders)
    batch = classifier.batch(TEXTS, ["is it good?", "was it?"])
    assert batch.truncated.sum() == 0 and (batch.segments == 2).any()
    for name in builtin_measures():
        explainer = get_explainer(name, classifier, **CHEAP.get(name, {}))
        ok, why = explainer.supports()
        if name == "smat":  # needs head weights learned for this model (engine simulability): none here
            assert not ok and why, why
            continue
        assert ok == (name not in NOT_FOR_TRANSFORMERS and not (name in ENCODERS_ONLY and family in DECODERS)), (
            family, name, why)
        if not ok:
            continue
        imp = explainer.attribute(batch)
        assert torch.isfinite(imp.scores).all(), (family, name)
        assert (imp.scores[~batch.maskable.cpu()] == 0).all(), (family, name)
        assert (imp.scores[batch.maskable.cpu()] != 0).any(), (family, name)


@pytest.mark.parametrize("family", FAMILIES)
def test_ig_completeness_holds_for_the_family(family, family_folders):
    """sum_t IG_t = f_c(x) - f_c(baseline) up to a small quadrature gap, for the zero and the replacement baseline."""
    classifier = classifier_of(family, family_folders)
    batch = classifier.batch(TEXTS)
    for baseline in ("zero", "mask"):
        imp = get_explainer("ig-sign", classifier, steps=32, rule="gausslegendre", baseline=baseline).attribute(batch)
        delta = imp.extras["f_input"] - imp.extras["f_baseline"]
        torch.testing.assert_close(imp.scores.double().sum(1) - delta, imp.extras["completeness_gap"], atol=1e-5, rtol=0)
        assert (imp.extras["completeness_gap"].abs() <= 0.01 * delta.abs() + 1e-4).all(), (family, baseline, imp.extras)
        f_x = _target_logit(classifier, batch, batch.input_ids, imp.target.to(classifier.device)).double().cpu()
        torch.testing.assert_close(imp.extras["f_input"], f_x, atol=1e-5, rtol=0)  # embeddings path == ids path


@pytest.mark.parametrize("family", FAMILIES)
def test_loo_equals_the_actual_logit_drop_for_the_family(family, family_folders):
    """LOO_t = f_c(x) - f_c(x with t replaced by the model's replacement token), recomputed token by token."""
    classifier = classifier_of(family, family_folders)
    batch = classifier.batch(TEXTS)
    target = torch.tensor([1, 0])
    imp = get_explainer("loo-sign", classifier).attribute(batch, target)
    full = _target_logit(classifier, batch, batch.input_ids, target)
    for b in range(len(batch)):
        for t in batch.maskable[b].nonzero().flatten().tolist():
            masked = batch.input_ids.clone()
            masked[b, t] = classifier.mask_token_id
            drop = full[b] - _target_logit(classifier, batch, masked, target)[b]
            assert abs(float(imp.scores[b, t]) - float(drop)) < 1e-5, (family, b, t)


@pytest.mark.parametrize("family", FAMILIES)
def test_masf_and_recursive_masking_work_for_the_family(family, family_folders):
    """MaSF calibrates on the family's hidden states (plain: a model fine-tuned elsewhere saw no masks) and gives
    p-values in [0, 1] at every step of recursive masking, which masks floor(r N) tokens and never a special one."""
    from engine.faithfulness.recursive import recursive_masking
    from engine.ood import calibration_strategy, fit_masf

    classifier = classifier_of(family, family_folders)
    assert calibration_strategy(classifier) == "plain"
    masf = fit_masf(classifier, dataset="toy", limit=45, save=False)
    batch = classifier.batch(TEXTS)
    result = recursive_masking(classifier, get_explainer("x-grad-abs", classifier), batch, ratios=[0, 0.5, 1], masf=masf)
    n = batch.maskable.sum(1).cpu().numpy()
    for step in result.steps:
        assert ((step.p_value >= 0) & (step.p_value <= 1)).all()
        np.testing.assert_array_equal(step.n_masked, np.floor(n * step.ratio + 1e-9))
        fixed = ~batch.maskable.cpu()
        assert torch.equal(step.input_ids[fixed], batch.input_ids.cpu()[fixed])


# -- decoders ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", DECODERS)
def test_decoder_without_replacement_token_offers_gradient_ig_and_attention_only(family, family_folders):
    """A decoder loaded as it is (no mask token, none chosen): the gradient, IG (zero baseline) and attention
    measures work; the measures that replace tokens are not offered and say how to choose a token."""
    classifier = load_classifier(str(family_folders[family]))
    assert classifier.decoder and classifier.replacement_token_id is None
    batch = classifier.batch(TEXTS)
    offered = {n for n in builtin_measures() if get_explainer(n, classifier, **CHEAP.get(n, {})).supports()[0]}
    assert offered == {"random", "grad-l2", "grad-l1", "x-grad-sign", "x-grad-abs", "ig-sign", "ig-abs",
                       "attention-cls-last", "attention-mean", "attention-rollout", "smoothgrad", "squaregrad",
                       "vargrad"}
    for name in offered:
        get_explainer(name, classifier, **CHEAP.get(name, {})).attribute(batch)
    why = get_explainer("loo-sign", classifier).supports()[1]
    assert "--replacement" in why
    with pytest.raises(NotApplicableError, match="--replacement"):
        classifier.mask_token_id  # noqa: B018
    with pytest.raises(NotApplicableError):
        get_explainer("ig-sign", classifier, baseline="mask")


@pytest.mark.parametrize("family", DECODERS)
def test_decoder_reads_the_last_real_token_whatever_the_padding_or_replacement(family, family_folders):
    """Batched (right-padded) logits equal each row's own, also when the last token is the replacement (= pad)
    token, which the model's own pad-id rule would skip; the attention measures read that position's row."""
    classifier = classifier_of(family, family_folders)
    batch = classifier.batch(TEXTS)
    ids = batch.input_ids.clone()
    last = batch.maskable[1].nonzero().flatten()[-1]
    ids[1, last] = classifier.mask_token_id  # the pad token
    batch = batch.with_ids(ids)
    with torch.no_grad():
        together = classifier.logits(batch)
        for b in range(len(batch)):
            alone = classifier.batch(TEXTS[b])
            alone = alone.with_ids(batch.input_ids[b:b + 1, :alone.input_ids.shape[1]])
            torch.testing.assert_close(classifier.logits(alone)[0], together[b], atol=1e-5, rtol=1e-5)
        out = classifier.forward(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True)
    read = batch.attention_mask.sum(1) - 1
    imp = get_explainer("attention-cls-last", classifier).attribute(batch)
    expected = out.attentions[-1].mean(1)[torch.arange(len(batch)), read]
    torch.testing.assert_close(imp.scores, torch.where(batch.maskable, expected, torch.zeros(())).float())


def test_replacement_token_choices(family_folders):
    """pad, unk and a vocabulary token can be chosen; a token outside the vocabulary is refused with what to do;
    a model not masked-fine-tuned with it has its masked inputs marked out of distribution."""
    from engine.models.foreign import load_foreign

    folder = family_folders["gpt2"]
    unk = load_foreign(folder, replacement="unk")
    assert unk.mask_token_id == unk.tokenizer.unk_token_id
    word = load_foreign(folder, replacement="film")
    assert word.tokenizer.convert_ids_to_tokens(word.mask_token_id) == "film"
    assert not word.masked_fine_tuned and word.metadata["replacement_in_distribution"] is False
    declared = load_foreign(folder, replacement="unk", masked_fine_tuned=True)
    assert declared.metadata["replacement_in_distribution"] is True
    with pytest.raises(InvalidInputError, match="add_tokens"):
        load_foreign(folder, replacement="notatokenxyz")
    with pytest.raises(InvalidInputError, match="no mask token"):
        load_foreign(folder, replacement="mask")


# -- loading folders ------------------------------------------------------------------------------------------
def test_foreign_folder_provenance_is_synthesised(family_folders):
    """Class names from id2label, max length from the tokenizer capped by the position embeddings (RoBERTa: minus
    the pad offset), and provenance: folder, weights SHA-256, 'fine-tuned elsewhere', not masked-fine-tuned."""
    from engine.models.checkpoint import weights_sha256

    bert = classifier_of("bert", family_folders)
    assert bert.classes == CLASSES and bert.max_length == 64
    meta = bert.metadata
    assert meta["strategy"] == "elsewhere" and meta["masked_fine_tuned"] is False and not bert.masked_fine_tuned
    assert meta["folder"] == str(family_folders["bert"].resolve()) and "elsewhere" in meta["note"]
    assert meta["weights_sha256"] == weights_sha256(family_folders["bert"])
    assert meta["replacement_token"] == "[MASK]" and meta["dataset"] is None
    assert classifier_of("roberta", family_folders).max_length == 64
    assert bert.artifacts_dir is None  # an unregistered folder gets nothing written anywhere


def test_sharded_safetensors_load_with_the_same_logits(tmp_path, tokenizer_dir, family_folders):
    """A folder saved in shards (with model.safetensors.index.json) loads and gives the single file's logits."""
    folder = build_folder("bert", tmp_path / "sharded", tokenizer_dir, max_shard_size="200KB")
    assert (folder / "model.safetensors.index.json").is_file() and not (folder / "model.safetensors").exists()
    sharded = load_classifier(str(folder))
    single = classifier_of("bert", family_folders)
    assert len(sharded.metadata["weights_files"]) > 1
    batch = single.batch(TEXTS)
    with torch.no_grad():
        torch.testing.assert_close(sharded.logits(batch), single.logits(batch))
    shard = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    (folder / sorted(set(shard.values()))[0]).unlink()
    with pytest.raises(CheckpointError, match="shards that are missing"):
        load_classifier(str(folder))


def test_pickled_weights_are_refused_with_the_conversion_and_never_unpickled(tmp_path, tokenizer_dir, monkeypatch):
    """A folder with pytorch_model.bin only is refused, the message says how to convert it, and torch.load (the
    unpickler) is never called."""
    folder = build_folder("bert", tmp_path / "pickled", tokenizer_dir)
    from safetensors.torch import load_file

    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()

    def no_unpickling(*args, **kwargs):
        raise AssertionError("torch.load was called")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(CheckpointError, match="pickle") as err:
        load_classifier(str(folder))
    assert "save_pretrained" in str(err.value)


def test_a_folder_that_is_not_a_classifier_is_refused(tmp_path, tokenizer_dir):
    """A bare encoder (BertModel) is not a sequence classifier: refused, with the command that fine-tunes one."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    folder = tmp_path / "encoder"
    BertModel(BertConfig(vocab_size=30522, **SMALL)).save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(str(folder))
    with pytest.raises(CheckpointError, match="not a sequence classifier.*engine train"):
        load_classifier(str(folder))


# -- registration and the CLI -----------------------------------------------------------------------------------
@pytest.fixture()
def user_dir(tmp_path, monkeypatch, models_cache):
    folder = tmp_path / "user"
    monkeypatch.setenv("ENGINE_USER_DIR", str(folder))
    return folder


def test_registered_folder_is_explained_by_id_through_the_cli(tmp_path, tokenizer_dir, user_dir, capsys):
    """`models add` registers a save_pretrained folder by reference (nothing written into it), `explain --model
    <id>` explains it with a note that its masked inputs are out of distribution, `models` lists it, `models
    remove` forgets it and leaves the folder."""
    from engine.cli import main

    folder = build_folder("distilbert", tmp_path / "my-distilbert", tokenizer_dir)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    assert main(["models", "add", str(folder), "--id", "mine"]) == 0
    assert "registered mine" in capsys.readouterr().out
    manifest = json.loads((user_dir / "models" / "mine.json").read_text())
    assert manifest["path"] == str(folder.resolve()) and manifest["copied"] is False
    assert main(["explain", "--model", "mine", "--text", "a gripping, funny film", "--measure", "ig-sign", "loo-sign",
                 "attention-mean", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "model mine" in out and "gripping" in out and "completeness gap" in out
    assert "not masked-fine-tuned" in out
    assert main(["models"]) == 0
    assert "mine" in capsys.readouterr().out
    assert main(["models", "remove", "mine"]) == 0
    assert not (user_dir / "models" / "mine.json").exists()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before
    assert main(["explain", "--model", "mine", "--text", "x", "--measure", "ig-sign"]) == 2
    assert "no checkpoint or registered model 'mine'" in capsys.readouterr().err


def test_registration_refuses_clashing_ids_and_bad_folders(tmp_path, tokenizer_dir, user_dir):
    from engine.models.registry import register_model

    folder = build_folder("bert", tmp_path / "b", tokenizer_dir)
    register_model(folder, "one")
    with pytest.raises(InvalidInputError, match="already registered"):
        register_model(folder, "one")
    with pytest.raises(InvalidInputError, match="no folder"):
        register_model(tmp_path / "nowhere", "two")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="config.json"):
        register_model(tmp_path / "empty", "three")


# -- making it measurable --------------------------------------------------------------------------------------------
def test_masked_fine_tuning_starts_from_the_users_classifier(tmp_path, tokenizer_dir, user_dir):
    """`train --from-classifier` keeps the user's head and label names, records where it started (folder,
    weights hash), and the result is masked-fine-tuned (pages can tell it from the original); MaSF of the
    registered original is kept in the user folder, never in the user's model folder."""
    from engine.models import TrainConfig, save_classifier, train_classifier
    from engine.models.registry import register_model
    from engine.ood import fit_masf, load_masf

    folder = build_folder("bert", tmp_path / "mine", tokenizer_dir)
    manifest = register_model(folder, "mine")
    original = load_classifier("mine")
    assert not original.masked_fine_tuned
    fit_masf(original, dataset="toy", limit=45)
    assert load_masf(load_classifier("mine")) is not None
    assert list((user_dir / "models" / "mine").glob("masf-*.safetensors")) and not list(folder.glob("masf*"))

    head_before = original.model.classifier.weight.detach().clone()
    trained = train_classifier(TrainConfig(base_model="custom", from_classifier="mine", dataset="toy", epochs=1,
                                           batch_size=16, lr=1e-3, train_limit=64, eval_limit=32), show_progress_bar=False)
    meta = trained.metadata
    assert trained.classes == CLASSES and meta["strategy"] == "masked" and meta["masked_fine_tuned"] is True
    assert meta["from_classifier"]["weights_sha256"] == manifest["weights_sha256"]
    assert meta["from_classifier"]["masked_fine_tuned"] is False and meta["base_model"] == "mine"
    assert not torch.equal(trained.model.classifier.weight.detach().cpu(), head_before)  # trained further ...
    assert trained.model.classifier.weight.shape == head_before.shape  # ... the same head
    reloaded = load_classifier(str(save_classifier(trained, "mine-toy-masked")))
    assert reloaded.masked_fine_tuned and reloaded.metadata["from_classifier"]["id"] == "mine"


def test_fine_tuning_from_a_classifier_refuses_other_label_names_and_unmaskable_models(tmp_path, tokenizer_dir, user_dir):
    from engine.models import TrainConfig, train_classifier

    other = build_folder("bert", tmp_path / "other", tokenizer_dir, classes=("bad", "good"))
    with pytest.raises(LabelMismatchError, match="bad"):
        train_classifier(TrainConfig(base_model="custom", from_classifier=str(other), dataset="toy", epochs=1),
                         show_progress_bar=False)
    decoder = build_folder("gpt2", tmp_path / "decoder", tokenizer_dir)
    with pytest.raises(NotApplicableError, match="--replacement"):
        train_classifier(TrainConfig(base_model="custom", from_classifier=str(decoder), dataset="toy", epochs=1),
                         show_progress_bar=False)


# -- pages ------------------------------------------------------------------------------------------------------
def test_models_page_registers_a_folder_and_the_sidebar_offers_it_with_a_note(tmp_path, tokenizer_dir, user_dir):
    """The Models page registers a folder by path; the sidebar then lists it, says it was fine-tuned elsewhere and
    notes that it was not masked-fine-tuned."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    folder = build_folder("bert", tmp_path / "page-bert", tokenizer_dir)
    at = AppTest.from_file(main, default_timeout=120)
    at.run(timeout=120)
    at.switch_page(str(Path(main).parent.parent / "pages" / "models.py"))
    at.run(timeout=120)
    at.text_input[0].set_value(str(folder))
    at.text_input[1].set_value("page-bert")
    next(b for b in at.button if b.label == "Register").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert any("Registered page-bert" in s.value for s in at.success)
    at.run(timeout=120)
    assert "page-bert" in at.sidebar.selectbox[0].options
    at.sidebar.selectbox[0].set_value("page-bert")
    at.run(timeout=120)
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "fine-tuned elsewhere" in captions and "Not masked-fine-tuned" in captions


def test_masf_and_faithfulness_commands_take_a_registered_model_and_a_dataset(tmp_path, tokenizer_dir, user_dir, capsys):
    """`masf` and `faithfulness` on a registered model: the dataset is named (it has none recorded), MaSF is stored
    in the user folder, and a split is masked recursively with p-values at every step."""
    from engine.cli import main

    folder = build_folder("electra", tmp_path / "my-electra", tokenizer_dir)
    assert main(["models", "add", str(folder), "--id", "mine"]) == 0
    assert main(["mask", "--model", "mine", "--measure", "x-grad-abs", "--limit", "4"]) == 2
    assert "--dataset" in capsys.readouterr().err
    assert main(["masf", "--model", "mine", "--dataset", "toy"]) == 0
    assert list((user_dir / "models" / "mine").glob("masf-*.safetensors"))
    assert not list(folder.glob("masf*"))
    assert main(["mask", "--model", "mine", "--dataset", "toy", "--measure", "x-grad-abs", "--limit", "4",
                 "--ratios", "0,0.5,1"]) == 0
    out = capsys.readouterr().out
    assert "p<0.05" in out and len([line for line in out.splitlines() if line.strip().startswith(("0 ", "1 ", "2 "))]) >= 3


def test_train_from_classifier_command_saves_a_masked_fine_tuned_checkpoint(tmp_path, tokenizer_dir, user_dir, capsys):
    """`python -m engine train --from-classifier ID` saves a checkpoint that records where it started and loads as
    masked-fine-tuned, with the user's label names."""
    from engine.cli import main

    folder = build_folder("distilbert", tmp_path / "d", tokenizer_dir)
    assert main(["models", "add", str(folder), "--id", "d"]) == 0
    assert main(["train", "--from-classifier", "d", "--dataset", "toy", "--epochs", "1", "--train-limit", "32",
                 "--eval-limit", "32", "--lr", "1e-3", "--quiet"]) == 0
    assert "saved" in capsys.readouterr().out
    trained = load_classifier("d-toy-masked-s0")
    assert trained.masked_fine_tuned and trained.classes == CLASSES
    assert trained.metadata["from_classifier"]["folder"] == str(folder.resolve())
