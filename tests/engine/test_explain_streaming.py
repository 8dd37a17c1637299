"""The Explain page streams its measures cheapest first (engine.explain.by_cost, explain_text's on_measure), and
the built-in prompted language models are listed (CLI `models`, the dashboard's sidebar) without loading them."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
TEXT = "the acting was truly bad and the story poor"
GIVEN = ["loo-sign", "ig-sign", "x-grad-sign", "grad-l2"]  # dearest first: the page must not keep this order


def _run(at: AppTest) -> AppTest:
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    return at


@pytest.fixture()
def no_llm_loading(monkeypatch):
    """Converting or loading the packaged LLM fails the test; its package counts as installed wherever it runs."""
    from engine.models import llm_package, prompted_loading

    def refuse(*_args, **_kwargs):
        raise AssertionError("the packaged LLM was converted or loaded just to list it")

    monkeypatch.setattr(llm_package, "gguf_source", lambda key: Path("/nowhere") / f"{key}.gguf")
    monkeypatch.setattr(llm_package, "package_files", lambda key: [Path("/nowhere") / f"{key}.gguf"])
    monkeypatch.setattr(llm_package, "convert_gguf", refuse)
    monkeypatch.setattr(llm_package, "packaged_llm_folder", refuse)
    real_load = prompted_loading.load_prompted

    def load_only_folders(source, *args, **kwargs):  # a registered folder loads; the packaged LLM does not
        if str(source) in llm_package.PACKAGED_LLMS:
            refuse()
        return real_load(source, *args, **kwargs)

    monkeypatch.setattr(prompted_loading, "load_prompted", load_only_folders)


def test_by_cost_puts_gradients_before_ig_before_loo_before_sampling_and_keeps_ties_in_order():
    from engine.explain import by_cost

    assert by_cost(["lime", "loo-sign", "ig-sign", "x-grad-sign", "grad-l2", "occlusion", "attention-mean"]) == [
        "attention-mean", "x-grad-sign", "grad-l2", "ig-sign", "loo-sign", "occlusion", "lime"]


def test_on_measure_is_called_after_each_measure_with_its_scores_and_changes_nothing(toy_classifier):
    """explain_text(on_measure=...) reports each measure as soon as it is done, with every measure so far in the
    result; the result is the one computed without the callback."""
    from engine.explain import explain_text

    seen = []
    with_cb = explain_text(toy_classifier, TEXT, measures=GIVEN,
                           on_measure=lambda m, r: seen.append((m, list(r.scores), r.scores[m].copy())))
    assert [s[0] for s in seen] == GIVEN
    assert [s[1] for s in seen] == [GIVEN[: i + 1] for i in range(len(GIVEN))]
    plain = explain_text(toy_classifier, TEXT, measures=GIVEN)
    assert list(plain.scores) == GIVEN
    for measure, _, scores in seen:
        np.testing.assert_allclose(scores, plain.scores[measure], atol=1e-5)
        np.testing.assert_allclose(with_cb.scores[measure], plain.scores[measure], atol=1e-5)


def test_explain_page_shows_one_heatmap_per_measure_cheapest_first(models_cache, toy_classifier):
    """Measures chosen dearest first are computed and shown cheapest first: gradients, then IG, then LOO; the
    agreement table and the Cancel button's removal after the run leave the rest of the page as it was."""
    from engine.importance import describe

    save_classifier(toy_classifier, "toy-app")
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at = _run(at.switch_page(str(Path(MAIN).parent.parent / "pages" / "explain.py")))  # the app opens on the home page
    at.multiselect(key="explain_measures").set_value(GIVEN)
    at.text_area(key="explain_text").input(TEXT)
    at.button[0].click()
    _run(at)
    heatmaps = [h.proto.body for h in at.get("html")]
    assert len(heatmaps) == len(GIVEN), "one heatmap per measure"
    expected = ["x-grad-sign", "grad-l2", "ig-sign", "loo-sign"]
    titles = [html.escape(describe(m), quote=True) for m in expected]
    assert len(set(titles)) == len(titles)
    shown = [next(m for m, t in zip(expected, titles) if t in h) for h in heatmaps]
    assert shown == expected, shown
    # each heatmap is titled by its measure's name in words (and id); the formula is the title's tooltip only
    from engine.importance import measure_label
    for m, h in zip(expected, heatmaps):
        head = re.search(r'<div class="heatmap-title" title="([^"]*)"[^>]*>([^<]*)</div>', h)
        assert head and head.group(2) == html.escape(f"{measure_label(m)} ({m})"), h[:300]
        assert head.group(1) == html.escape(describe(m), quote=True) and head.group(1) not in head.group(2)
    assert any("feature_agreement" in d.value.columns for d in at.dataframe), "the agreement table is still shown"
    assert not [b for b in at.button if b.key == "explain_cancel"], "no Cancel button once the computation is done"


def test_sidebar_lists_registered_and_built_in_prompted_lms_without_loading_them(models_cache, toy_classifier, tmp_path,
                                                                              no_llm_loading, capsys):
    """A prompted LM registered with `models add --prompt` and the built-in `smollm2-rt-prompt` are in the
    sidebar's model list; the built-in is not chosen by default (nor converted or loaded); the registered
    one, chosen, is explained on the Explain page."""
    import copy

    from test_prompted import spec, tiny_lm
    from transformers import AutoTokenizer

    from engine.cli import main
    from engine.models.encoders import resolve_encoder

    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    folder = tmp_path / "tiny-gpt2"
    tiny_lm("gpt2", copy.deepcopy(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (tmp_path / "prompt.json").write_text(json.dumps(spec(replacement="redacted").to_dict()))
    assert main(["models", "add", str(folder), "--prompt", str(tmp_path / "prompt.json"), "--id", "tiny-prompt"]) == 0
    save_classifier(toy_classifier, "toy-app")

    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    box = at.sidebar.selectbox(key="model_id")
    assert {"toy-app", "tiny-prompt", "smollm2-rt-prompt"} <= set(box.options), box.options
    assert box.value == "toy-app", "a built-in LLM is never the default"
    box.set_value("smollm2-rt-prompt")
    at.run(timeout=120)  # selecting it only shows its caption here; loading it is refused by the fixture
    assert any("prompted LM, zero-shot" in c.value for c in at.sidebar.caption)
    at.sidebar.selectbox(key="model_id").set_value("tiny-prompt")
    at.session_state["explain_measures"] = ["loo-sign", "grad-l2"]
    _run(at.switch_page(str(Path(MAIN).parent.parent / "pages" / "explain.py")))  # the app opens on the home page
    assert any("prompted LM" in c.value for c in at.sidebar.caption)
    at.text_area(key="explain_text").input("a gripping , funny and moving film")
    at.button[0].click()
    _run(at)
    assert at.subheader[0].value.startswith("Prediction: ")
    assert len(at.get("html")) == 2


def test_models_cli_lists_the_built_in_prompted_lm_without_loading_it(models_cache, no_llm_loading, capsys):
    """`python -m engine models` names the built-in prompted id as a zero-shot prompted LM with the replacement
    masking writes, without converting or loading it (the fixture fails the test if it does), also as JSON."""
    from engine.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("smollm2-rt-prompt"))
    assert "prompted LM, zero-shot" in line and "replacement [REDACTED]" in line and "converted on first load" in line
    assert main(["models", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    builtin = {m["id"]: m for m in listing["builtin"]}
    assert "smollm2-rt-prompt" in builtin and builtin["smollm2-rt-prompt"]["masked_fine_tuned"] is False
    lora = [m for m in listing["builtin"] if m["masked_fine_tuned"]]  # the shipped masked-LoRA ids, listed first
    assert [m["id"] for m in listing["builtin"][:len(lora)]] == [m["id"] for m in lora]


def test_explain_page_estimates_the_time_of_each_measure_before_running_it(models_cache, toy_classifier):
    """'Estimate the time' says each chosen measure's cost in words (from its planned passes, cheapest first) and runs
    no measure: no heatmap is drawn. An empty text is refused in words, as Explain refuses it."""
    from engine.importance import measure_label

    save_classifier(toy_classifier, "toy-app")
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at = _run(at.switch_page(str(Path(MAIN).parent.parent / "pages" / "explain.py")))
    at.multiselect(key="explain_measures").set_value(GIVEN)
    at.button(key="explain_estimate").click()
    _run(at)
    assert at.error and not at.get("html"), "an empty text is refused before any pass"
    at.text_area(key="explain_text").input(TEXT)
    at.button(key="explain_estimate").click()
    _run(at)
    said = [c.value for c in at.caption if c.value.startswith("Estimated time on this machine")]
    assert said and not at.get("html"), "estimated, nothing explained"
    from app.text import md

    positions = [said[0].index(md(measure_label(m))) for m in ["x-grad-sign", "grad-l2", "ig-sign", "loo-sign"]]
    assert positions == sorted(positions), said[0]  # cheapest first
    assert "second" in said[0] or " s" in said[0]
