"""User strings on the pages (class names, model paths, error texts) are shown as the characters typed: no
link, remote image, script or formatting comes out of them. Checked by rendering what the page hands to
Streamlit's markdown with a CommonMark renderer, for a model whose class names are hostile."""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from hostile_models import HOSTILE, build_hostile_model
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

from app.text import md

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")
RENDER = MarkdownIt("commonmark")
# The patterns GFM's autolink-literal step (mdast-util-gfm-autolink-literal) finds in text, after escapes are
# resolved; CommonMark (the renderer above) has no such step.
GFM_BARE_LINKS = [re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.IGNORECASE),
                  re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)")]


def rendered(markdown: str) -> str:
    return RENDER.render(markdown)


def shown_text(markdown: str) -> str:
    """What a reader sees (and copies): the rendered HTML without its tags, entities decoded; nothing removed."""
    return html.unescape(re.sub(r"<[^>]+>", "", rendered(markdown)))


def linked(markdown: str) -> bool:
    """Whether a GFM renderer would turn part of the text into a link (CommonMark links, or bare addresses in
    text: GFM's autolink step never looks inside a code span)."""
    outside_code = re.sub(r"<code>.*?</code>", " ", rendered(markdown), flags=re.DOTALL)
    text = html.unescape(re.sub(r"<[^>]+>", "", outside_code))
    return "<a " in rendered(markdown) or any(p.search(text) for p in GFM_BARE_LINKS)


def code_spans(markdown: str) -> list[str]:
    return [html.unescape(c) for c in re.findall(r"<code>(.*?)</code>", rendered(markdown), flags=re.DOTALL)]


@pytest.mark.parametrize("text", HOSTILE + ["**bold** _it_ `code` # head", "1. list\n- item", "- item", "12. item",
                                            "# head", "> quote", "$x^2$ :red[red]", "a\\b [ref]: http://evil",
                                            "x &amp; y", "toy-app.v2, 'q' \"d\" 50% a/b?", "see http://evil.example",
                                            "HTTPS://evil.example/x", "www.evil.example", "mail me@evil.example"])
def test_md_shows_every_character_and_renders_no_link_image_or_html(text):
    out = rendered(md(text))
    assert not linked(md(text))
    assert "<a " not in out and "<img" not in out and "<script" not in out and "<strong" not in out and "<em" not in out
    assert "<h1" not in out and "<ol" not in out and "<ul" not in out and "<blockquote" not in out
    # a code span only around a word holding an address, showing exactly that word (never the user's backticks)
    words = " ".join(text.splitlines()).split()
    assert all(c in words and any(p.search(c) for p in GFM_BARE_LINKS) for c in code_spans(md(text)))
    assert shown_text(md(text)).strip() == " ".join(text.splitlines())


@pytest.fixture()
def hostile_cache(models_cache, tmp_path):
    return build_hostile_model(models_cache, tmp_path)


def _markdown_bodies(at: AppTest) -> list[str]:
    bodies = [e.value for kind in ("markdown", "caption", "subheader", "warning", "error", "info", "success")
              for e in getattr(at, kind)]
    bodies += [e.label for e in at.metric]
    return bodies


def test_explain_page_shows_hostile_class_names_as_text(hostile_cache):
    at = AppTest.from_file(MAIN, default_timeout=180).run()
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "explain.py")).run()  # the app opens on the home page
    assert not at.exception
    at.text_area[0].input("a fine film")
    at.button[0].click()
    at.run()
    assert not at.exception
    predicted = at.subheader[0].value
    assert predicted.startswith("Prediction: ")
    bodies = _markdown_bodies(at)
    for body in bodies:
        out = rendered(body)
        assert not linked(body) and "<img" not in out and "<script" not in out, body
    seen = " ".join(shown_text(b) for b in bodies)
    name = next(n for n in HOSTILE if n in shown_text(predicted))  # the predicted class, verbatim
    assert shown_text(predicted).strip().startswith(f"Prediction: {name} (")
    assert f"Explaining class {name} " in seen


def test_masking_page_metric_label_shows_a_hostile_class_name_as_text(hostile_cache):
    at = AppTest.from_file(MAIN, default_timeout=300).run()
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "masking.py")).run()
    at.text_area[0].input("a fine film")
    at.button[0].click()
    at.run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    p_label = next(label for label in labels if label.startswith("p"))
    assert not linked(p_label) and "<img" not in rendered(p_label)
    assert shown_text(p_label).strip()[2:-1] in HOSTILE


def test_sidebar_shows_a_registered_models_path_as_text(models_cache, tmp_path, monkeypatch):
    """A registered model's folder path (any characters a file system allows) is a sidebar caption."""
    from test_atomic import _untrained_tiny

    from engine.models import save_classifier
    from engine.models.registry import register_model

    folder = tmp_path / "[x](http:" / "evil.example)"
    folder.parent.mkdir()
    saved = save_classifier(_untrained_tiny("own"), "own", cache_dir=tmp_path / "elsewhere")
    saved.rename(folder)
    (folder / "metadata.json").unlink()
    register_model(folder, "own-model")
    at = AppTest.from_file(MAIN, default_timeout=180).run()
    captions = [c.value for c in at.sidebar.caption]
    path_caption = next(c for c in captions if "fine-tuned elsewhere" in shown_text(c))
    assert not linked(path_caption)
    assert str(folder) in shown_text(path_caption)


def test_masking_page_says_why_when_masf_cannot_be_calibrated(models_cache, tmp_path):
    """A dataset too small for MaSF (16 validation inputs; it needs 30) gives the page a message naming the
    cause, not a traceback."""
    build_hostile_model(models_cache, tmp_path, rows=160)
    at = AppTest.from_file(MAIN, default_timeout=300).run()
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "masking.py")).run()
    at.text_area[0].input("a fine film")
    at.button[0].click()
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("MaSF needs at least 30" in shown_text(w.value) for w in at.warning)
