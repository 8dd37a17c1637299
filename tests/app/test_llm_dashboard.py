"""The dashboard's logic for prompted language models (app/prompt_editor.py, app/lora_form.py,
app/self_explain_view.py), on random-weight tiny Llamas with the packaged `tiny` BERT tokenizer (plain prompts):
the editor's fields make the spec the CLI takes, its preview is the engine's exact prompt, registration is the
CLI's, LoRA fine-tuning from the page saves a loadable masked-fine-tuned model, and a self-explanation asked twice
is generated once. The browser flow with the real SmolLM2 is tests/browser/test_browser_llm.py."""
from __future__ import annotations

import copy
import json

import pytest
from test_prompted import bert_tokenizer, spec, tiny_lm  # noqa: F401 (bert_tokenizer: the fixture)

from app.prompt_editor import (
    fields_of,
    parse_examples,
    parse_verbalizer,
    preview,
    preview_html,
    register_prompted,
    spec_from_fields,
    starting_point,
)
from engine.errors import InvalidInputError
from engine.models.prompt_spec import PromptSpec, sentiment_prompt
from engine.models.prompted import PromptedClassifier

pytestmark = pytest.mark.usefixtures("one_thread")
TEXT = "a gripping , funny film"


@pytest.fixture()
def llama_folder(tmp_path, bert_tokenizer):  # noqa: F811
    """A random-weight tiny Llama saved as a causal-LM folder with the BERT tokenizer."""
    folder = tmp_path / "tiny-llama"
    tiny_lm("llama", bert_tokenizer).save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("made", [
    sentiment_prompt(),
    spec(system="be brief", examples=[{"input": "a delight", "label": "positive"}, {"input": "a bore", "label": "negative"}]),
    spec(input_format="review : {input} question : {input2}", examples=[{"input": "a", "input2": "b", "label": "negative"}],
         mask_notice="words may be hidden", replacement="redacted"),
])
def test_editor_fields_give_back_the_same_spec(made):
    """fields_of then spec_from_fields is the identity on specs: what the editor shows is what it registers."""
    assert spec_from_fields(fields_of(made)) == made


def test_editor_text_errors_name_the_line_and_the_expected_form():
    with pytest.raises(InvalidInputError, match="line 2 must read 'class: word, word'"):
        parse_verbalizer("negative: bad\npositive good")
    with pytest.raises(InvalidInputError, match="twice"):
        parse_verbalizer("negative: bad\nnegative: awful")
    assert parse_verbalizer("negative: bad, awful\n\npositive: good") == {"negative": ["bad", "awful"], "positive": ["good"]}
    with pytest.raises(InvalidInputError, match="label \\| input \\| input2"):
        parse_examples("positive | a delight", paired=True)
    fields = fields_of(sentiment_prompt())
    with pytest.raises(InvalidInputError, match="{input}"):  # the engine's own message reaches the page
        spec_from_fields(dict(fields, input_format="Review:"))
    with pytest.raises(InvalidInputError, match="at least two class"):
        spec_from_fields(dict(fields, verbalizer="negative: negative"))


@pytest.mark.parametrize("replacement", ["special", "redacted", "pad"])
def test_preview_is_the_exact_prompt_and_slot_of_the_loaded_classifier(bert_tokenizer, replacement):  # noqa: F811
    """The preview (tokenizer only) equals PromptedClassifier.render of the real model: same string, same slot, same
    number of tokens and maskable tokens, same label-word tokens; the shared tokenizer is not changed (a 'special'
    replacement adds <|mask|> only when the model loads)."""
    made = spec(replacement=replacement, examples=[{"input": "a bore", "label": "negative"}])
    tokenizer = copy.deepcopy(bert_tokenizer)
    size = len(tokenizer)
    view = preview(tokenizer, made, TEXT)
    assert len(tokenizer) == size
    real = PromptedClassifier(tiny_lm("llama", bert_tokenizer), copy.deepcopy(bert_tokenizer), made, max_length=96)
    prompt, span, _ = real.render(TEXT)
    assert (view.prompt, view.span) == (prompt, span) and prompt[span[0]:span[1]] == TEXT
    batch = real.batch(TEXT)
    assert view.n_tokens == int(batch.attention_mask.sum()) and view.n_maskable == int(batch.maskable.sum())
    assert [(c, w) for c, w, _ in view.label_tokens] == [("negative", "bad"), ("positive", "good"), ("positive", "great")]
    assert [t for _, _, t in view.label_tokens] == [real.tokenizer.convert_ids_to_tokens(ids) for _, ids in real.label_word_tokens]


def test_preview_refuses_what_loading_would_refuse(bert_tokenizer):  # noqa: F811
    with pytest.raises(InvalidInputError, match="no chat template"):
        preview(bert_tokenizer, spec(template="chat"))
    with pytest.raises(InvalidInputError, match="prefix"):  # a label word glued to the answer prefix
        preview(bert_tokenizer, spec(answer_prefix="answer", verbalizer={"negative": ["s"], "positive": ["good"]}))


def test_preview_html_escapes_the_prompt_and_marks_only_the_slot(bert_tokenizer):  # noqa: F811
    hostile = 'fine <img src=x onerror="alert(1)"> & <script>x</script>'
    html_text = preview_html(preview(bert_tokenizer, spec(instruction="<b>is it</b> good ?"), hostile))
    assert "<img" not in html_text and "<script" not in html_text and "<b>" not in html_text
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html_text and "&lt;b&gt;is it&lt;/b&gt;" in html_text
    assert html_text.count("<mark") == 1
    marked = html_text.split('<mark class="prompt-slot"', 1)[1].split(">", 1)[1].split("</mark>", 1)[0]
    assert marked == "fine &lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;script&gt;x&lt;/script&gt;"


def test_register_from_the_editor_is_what_models_add_writes(llama_folder, tmp_path, models_cache, capsys):
    """The editor's Register and `python -m engine models add FOLDER --prompt SPEC.json` write the same manifest
    (but the id and the time); the id loads as a PromptedClassifier with the edited prompt, and the editor opens on
    it again when it is the sidebar's model."""
    from engine.cli import main
    from engine.models import load_classifier
    from engine.models.registry import read_manifest

    made = spec(replacement="redacted", instruction="is this review good or bad ?")
    page = register_prompted(str(llama_folder), made, "from-page")
    path = tmp_path / "prompt.json"
    path.write_text(json.dumps(made.to_dict()))
    assert main(["models", "add", str(llama_folder), "--prompt", str(path), "--id", "from-cli"]) == 0
    cli = read_manifest("from-cli")
    differ = {"id", "registered"}
    assert {k: v for k, v in page.items() if k not in differ} == {k: v for k, v in cli.items() if k not in differ}
    loaded = load_classifier("from-page")
    assert isinstance(loaded, PromptedClassifier) and loaded.spec == made
    assert starting_point("from-page") == (str(llama_folder.resolve()), made)
    with pytest.raises(InvalidInputError, match="already registered"):
        register_prompted(str(llama_folder), made, "from-page")


def test_opening_the_editor_never_converts_the_packaged_llm(models_cache):
    """The editor asks for the packaged SmolLM2's state without converting it (a minute of work on first use is
    the user's choice, behind a button): 'ready' only once the converted folder is there."""
    from app.prompt_editor import packaged_state
    from engine.models.llm_package import converted_dir

    folder = converted_dir("smollm2")
    assert packaged_state() in ("convert", "missing") and not folder.exists()
    folder.mkdir(parents=True)
    for name in ("model.safetensors", "tokenizer.json"):
        (folder / name).write_text("{}")
    assert packaged_state() == "ready"


def test_editor_opens_on_the_builtin_prompt_or_the_default(models_cache):
    assert starting_point("smollm2-rt-prompt") == ("smollm2", sentiment_prompt())
    assert starting_point(None) == ("smollm2", sentiment_prompt())
    assert starting_point("not-a-model") == ("smollm2", sentiment_prompt())


def test_lora_from_the_page_saves_a_masked_fine_tuned_prompted_model(llama_folder, models_cache):
    """The page's LoRA path (the CLI's train_lora and save_lora_classifier) on a registered tiny Llama and toy:
    progress reaches the page, and the saved id loads as a prompted model marked masked-fine-tuned, offered as a
    start for LoRA again."""
    from app.lora_form import lora_config, progress_text, prompted_ids, train_and_save
    from app.shared import usable_checkpoints
    from engine.models import load_classifier

    register_prompted(str(llama_folder), spec(replacement="special"), "tiny-llama-prompt")
    assert "tiny-llama-prompt" in prompted_ids(usable_checkpoints())
    config = lora_config("tiny-llama-prompt", "toy", lr=1e-3, train_limit=16, eval_limit=8, test_sample=8, lora_r=2)
    assert (config.lora_alpha, config.train_limit, config.strategy) == (4.0, 16, "masked")
    events = []
    trained = train_and_save(config, "tiny-lora", progress=events.append)
    stages = [e["stage"] for e in events]
    assert stages.count("train") == 2 and "validate" in stages and stages[-1] == "test"
    assert progress_text(events[0])[0] == 0.5 and "loss" in progress_text(events[0])[1]
    loaded = load_classifier("tiny-lora")
    assert isinstance(loaded, PromptedClassifier) and loaded.masked_fine_tuned
    assert loaded.metadata["lora"]["r"] == 2 and trained.metadata["test"]["n"] == 8
    assert "tiny-lora" in prompted_ids(usable_checkpoints())
    with pytest.raises(InvalidInputError, match="exists"):
        train_and_save(config, "tiny-lora")


def test_self_explanation_asked_twice_is_generated_once(bert_tokenizer, tmp_path, monkeypatch):  # noqa: F811
    """The Explain page's ask(): the answer streams to on_text in pieces that make it up, every intermediate text
    is kept, and asking again reads the SQLite cache (ENGINE_GENERATIONS_DB) instead of generating."""
    from app.self_explain_view import ask

    monkeypatch.setenv("ENGINE_GENERATIONS_DB", str(tmp_path / "generations.sqlite3"))
    clf = PromptedClassifier(tiny_lm("llama", bert_tokenizer), copy.deepcopy(bert_tokenizer), spec(), max_length=96)
    pieces = []
    first = ask(clf, "attribution", TEXT, 6, on_text=pieces.append)
    assert first.prompt and TEXT in first.prompt and not first.cached
    assert len(pieces) >= 1 and "".join(pieces).strip() == first.answer.strip()
    assert first.verdict in ("faithful", "unfaithful", "not parsable")
    again = []
    second = ask(clf, "attribution", TEXT, 6, on_text=again.append)
    assert second.cached and second.answer == first.answer and again == [first.answer]
    assert second.verdict == first.verdict and second.reprobabilities == first.reprobabilities


def test_masf_calibrates_a_zero_shot_prompted_model_on_unmasked_text(bert_tokenizer):  # noqa: F811
    """A zero-shot prompted LM (strategy 'zero-shot') saw unmasked text only: its MaSF is calibrated like a plain
    model's (the masking page once failed with "unknown strategy 'zero-shot'")."""
    from engine.ood import calibration_strategy, fit_masf, hidden_state_features

    clf = PromptedClassifier(tiny_lm("llama", bert_tokenizer), copy.deepcopy(bert_tokenizer), spec(), max_length=96)
    assert clf.metadata["strategy"] == "zero-shot" and calibration_strategy(clf) == "plain"
    masf = fit_masf(clf, limit=30, save=False, dataset="toy")
    p = masf.pvalues(hidden_state_features(clf, clf.batch(TEXT)))
    assert p.shape == (1,) and 0 < p[0] <= 1
    assert PromptSpec.from_dict(clf.metadata["prompt"]) == spec()


def test_models_page_editor_opens_on_the_sidebars_prompt_and_the_preview_follows_an_edit(llama_folder, models_cache):
    """In the running page (Streamlit's AppTest): with a registered prompted model in the sidebar the editor opens
    on its prompt, the preview shows it around the preview input, an edited instruction changes the preview, a
    broken verbalizer shows the engine's error instead of a preview, and Register registers the edited prompt."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine.models.registry import read_manifest

    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    register_prompted(str(llama_folder), spec(), "tiny-llama-prompt")
    at = AppTest.from_file(main, default_timeout=120)
    at.session_state["model_id"] = "tiny-llama-prompt"
    at.switch_page(str(Path(main).parent.parent / "pages" / "models.py"))
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]

    def shown() -> str:
        return " ".join(h.proto.body for h in at.get("html") if "prompt-preview" in h.proto.body)

    assert at.text_area(key="pe_instruction").value == spec().instruction
    assert "is the review positive or negative ?" in shown() and "prompt-slot" in shown()
    at.text_area(key="pe_instruction").set_value("is this film good or bad ?")
    at.run(timeout=120)
    assert "is this film good or bad ?" in shown() and "is the review positive" not in shown()
    at.text_area(key="pe_verbalizer").set_value("negative: bad")
    at.run(timeout=120)
    assert not shown() and any("at least two class" in e.value for e in at.error)
    at.text_area(key="pe_verbalizer").set_value("negative: bad\npositive: good")
    at.text_input(key="pe_id").set_value("tiny-llama-edited")
    at.run(timeout=120)
    at.button(key="pe_register").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    assert any("Registered tiny-llama-edited" in s.value for s in at.success)
    registered = read_manifest("tiny-llama-edited")["prompt"]
    assert registered["instruction"] == "is this film good or bad ?"
    assert registered["verbalizer"] == {"negative": ["bad"], "positive": ["good"]}


def test_explain_page_self_explanation_shows_every_text_and_a_rerun_comes_from_the_cache(llama_folder, models_cache,
                                                                                       tmp_path, monkeypatch):
    """In the running Explain page (AppTest) with a prompted model: asking shows the verdict, the exact request,
    the answer and the parsed explanation; asking again says the answer came from the generation cache."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ENGINE_GENERATIONS_DB", str(tmp_path / "generations.sqlite3"))
    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    register_prompted(str(llama_folder), spec(), "tiny-llama-prompt")
    at = AppTest.from_file(main, default_timeout=120)
    at.session_state["model_id"] = "tiny-llama-prompt"
    at.session_state["selfexplain_kind"] = "attribution"  # a random model may abstain: no counterfactual target
    at.session_state["selfexplain_max_new_tokens"] = 8
    at.run(timeout=120)
    at.switch_page(str(Path(main).parent.parent / "pages" / "explain.py")).run(timeout=120)  # the app opens on home
    at.text_area(key="explain_text").set_value(TEXT)
    at.run(timeout=120)
    at.button(key="selfexplain_ask").click()
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    verdicts = [b.value for b in [*at.success, *at.error, *at.warning] if "Verdict:" in b.value]
    assert len(verdicts) == 1 and any(v in verdicts[0] for v in ("faithful", "not parsable")), verdicts
    texts = [m.value for m in at.markdown]
    assert any("The model's answer** (generated now)" in t for t in texts), texts
    codes = [c.value for c in at.code]
    assert any("review : " + TEXT in c for c in codes), "the exact request string, with the input"
    at.button(key="selfexplain_ask").click()
    at.run(timeout=120)
    assert any("from the generation cache" in m.value for m in at.markdown)


def test_models_page_lora_form_trains_saves_and_offers_the_new_model(llama_folder, models_cache):
    """The running Models page's LoRA form (AppTest) on a registered tiny Llama and 16 rt sentences: the equivalent
    CLI command is shown, the model is saved under the id given, and the page offers to use it."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from engine.models import load_classifier

    main = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
    register_prompted(str(llama_folder), spec(), "tiny-llama-prompt")
    at = AppTest.from_file(main, default_timeout=180)
    at.switch_page(str(Path(main).parent.parent / "pages" / "models.py"))
    at.run(timeout=180)
    at.selectbox(key="lora_start").set_value("tiny-llama-prompt")
    at.selectbox(key="lora_dataset").set_value("rt")
    at.text_input(key="lora_id").set_value("tiny-llama-rt-lora")
    for key, value in (("lora_train_limit", 16), ("lora_eval_limit", 8), ("lora_test", 8), ("lora_r", 2)):
        at.number_input(key=key).set_value(value)
    at.button(key="FormSubmitter:lora_form-Fine-tune with LoRA").click()
    at.run(timeout=180)
    assert not at.exception, [e.message for e in at.exception]
    assert any("--from-classifier tiny-llama-prompt --dataset rt --lora" in c.value and "--train-limit 16" in c.value
               for c in at.code)
    assert (models_cache / "tiny-llama-rt-lora" / "adapter" / "adapter_model.safetensors").is_file()
    assert load_classifier("tiny-llama-rt-lora").masked_fine_tuned
    assert at.session_state["model_id_pending"] == "tiny-llama-rt-lora" and at.button(key="lora_use")
