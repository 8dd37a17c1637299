"""The dashboard frame and its first pages, driven by Streamlit's AppTest (no browser)."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

MAIN = str(Path(__file__).resolve().parent.parent / "app" / "main.py")


@pytest.fixture()
def cache_with_toy(models_cache, toy_classifier):
    save_classifier(toy_classifier, "toy-app")
    return models_cache


def _run(at: AppTest) -> AppTest:
    at.run(timeout=120)
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_empty_models_cache_offers_to_build_a_model(models_cache):
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    assert any("No model" in w.value for w in at.sidebar.warning)
    assert any("Models" in i.value for i in at.info), "the page points to where a model is built"


def test_explain_predicts_and_shows_user_text_as_text(cache_with_toy):
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    assert at.sidebar.selectbox[0].value == "toy-app"
    hostile = 'the movie was great <script>alert(1)</script> <img src=x onerror=alert(2)> **bold**'
    at.text_area[0].input(hostile)
    at.button[0].click(); _run(at)
    assert at.subheader[0].value.startswith("Prediction: ")
    # user text only ever reaches the page through st.text (rendered as text) and never through markdown
    assert all("<script>" not in m.value for m in at.markdown)
    assert any("script" in t.value for t in at.text)


def test_explain_empty_text_is_a_message_not_a_crash(cache_with_toy):
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input("   ")
    at.button[0].click(); _run(at)
    assert any("empty" in w.value for w in at.warning)


def test_long_text_is_truncated_visibly(cache_with_toy):
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input("good fun " * 2000)
    at.button[0].click(); _run(at)
    assert any("truncated" in w.value for w in at.warning)


def test_models_page_lists_checkpoints(cache_with_toy):
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "models.py"))
    _run(at)
    assert at.title[0].value == "Models"
    assert "toy-app" in at.dataframe[0].value["id"].tolist()
