"""Home's first run after a server start imports neither torch nor transformers: the measures' names in words come from
engine/measure_labels.py (torch-free), the one table the measure classes read their `label` from too, so Home and the
pages that load the measures say the same words; scipy is imported only where an interval is computed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import trust
from engine.measure_labels import MEASURE_LABELS, measure_words

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")

# Home run alone in a fresh interpreter (as the first page after a server start), for the shipped run's model
HOME_ALONE = """
import json, sys
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=300)
at.query_params["model"] = "tiny-rt-masked-s0"
at.run()
frames = [d.value for d in at.dataframe if "id" in d.value.columns and "rank" in d.value.columns]
print(json.dumps({"exceptions": [e.value for e in at.exception],
                  "loaded": sorted(m for m in ("torch", "transformers") if m in sys.modules),
                  "ranking": [[str(i), str(w)] for i, w in zip(frames[0]["id"], frames[0]["measure"])] if frames else [],
                  "links": [link.label for link in at.get("page_link")]}))
"""


def test_every_built_in_measure_reads_its_label_from_the_one_table():
    """Each registered measure but those read from a file is named in the table, and its class's label is the table's
    (the registry sets it): one home per label, and no built-in measure without one."""
    from engine.importance import MEASURES, builtin_measures, measure_label

    assert set(builtin_measures()) <= set(MEASURE_LABELS)
    for name in builtin_measures():
        assert MEASURES[name].label == MEASURE_LABELS[name] == measure_label(name) == measure_words(name) != name
    # a few of the words, unchanged by the move from the classes into the table
    assert measure_label("loo-sign") == "leave one out (signed)"
    assert measure_label("ig-sign") == "integrated gradients (signed)"
    assert measure_label("random") == "random (the baseline)"
    assert measure_label("self-attribution") == "the model's own attribution"
    assert measure_words("not-a-measure") == trust.measure_words("not-a-measure") == "not-a-measure"


def test_home_alone_imports_no_torch_and_names_the_measures_in_the_tables_words(models_cache, toy_classifier):
    """Home for the shipped run's model, in a fresh interpreter: no exception, neither torch nor transformers
    imported, the ranking's measures named as the measure classes name them (the same words Explain shows)."""
    from engine.importance import measure_label
    from engine.models import save_classifier

    folder = save_classifier(toy_classifier, "tiny-rt-masked-s0")
    folder = Path(folder) if folder is not None else models_cache / "tiny-rt-masked-s0"
    meta = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    (folder / "metadata.json").write_text(json.dumps({**meta, "dataset": "rt"}), encoding="utf-8")

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", HOME_ALONE, str(ROOT / "app" / "main.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["exceptions"] == []
    assert seen["loaded"] == []
    assert len(seen["ranking"]) >= 4
    for measure, words in seen["ranking"]:
        assert words == measure_label(measure) != measure
    assert any(label.endswith(measure_label(seen["ranking"][0][0])) for label in seen["links"])
