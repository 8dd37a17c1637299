"""A classifier whose class names are hostile text (markup, links, a spreadsheet formula), for the tests that the
dashboard shows such names as text (tests/app/test_hostile_text.py, tests/browser/test_browser_links.py)."""
from __future__ import annotations

from pathlib import Path

# each holds a bare address too: GFM (Streamlit's renderer) links those even inside escaped text
HOSTILE = ["[x](http://evil.example)", "![img](http://evil.example/x.png)", "<script>alert(1)</script> www.evil.example",
           '=HYPERLINK("http://evil.example")']


def build_hostile_model(models_cache: Path, tmp_path: Path, rows: int = 400) -> Path:
    """Into `models_cache`: one tiny (untrained) classifier whose four class names are hostile, built on a
    registered dataset with those labels (so MaSF can be calibrated on it). ENGINE_USER_DIR must be set."""
    import pandas as pd
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from engine.data.user import register_dataset
    from engine.models import save_classifier

    words = ["good", "bad", "fine", "dull", "great", "poor", "witty", "slow"]
    rows = [{"text": f"a {words[i % 8]} film number {i}", "label": HOSTILE[i % len(HOSTILE)]} for i in range(rows)]
    pd.DataFrame(rows).to_csv(tmp_path / "hostile.csv", index=False)
    register_dataset("hostile-data", tmp_path / "hostile.csv", "text", "label")
    from engine.models.classifier import Classifier
    from engine.models.encoders import resolve_encoder

    source = resolve_encoder("tiny")
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=len(HOSTILE), attn_implementation="eager")
    classes = sorted(HOSTILE)  # a registered dataset's classes, in its order
    classifier = Classifier(model, AutoTokenizer.from_pretrained(source), classes, 32, {}, torch.device("cpu"))
    classifier.metadata = {"classes": classes, "max_length": 32, "base_model": "tiny", "dataset": "hostile-data",
                           "strategy": "masked", "masked_fine_tuned": True, "metric": "accuracy",
                           "test": {"unmasked": 0.5, "masked_100": 0.5}}
    save_classifier(classifier, "hostile", cache_dir=models_cache)
    return models_cache
