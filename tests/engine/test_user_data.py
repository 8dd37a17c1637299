"""The user's own data: each file format registers and loads back unchanged, splits are stratified and seeded,
every bad input is refused whole with the file and the rows or column named (and nothing registered), and a
registered dataset is found by name by get_dataset, the CLI and training."""
from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from engine.cli import main
from engine.data import dataset_names, get_dataset, load_dataset
from engine.data.splits import stratified_sizes
from engine.data.user import (
    check_labels,
    check_upload_name,
    list_user_datasets,
    parse_rationale,
    register_dataset,
    remove_user_dataset,
    save_upload,
    summary_from_manifest,
    uploads_dir,
)
from engine.errors import DataFileError, DataLabelMismatchError, LabelMismatchError, UnknownDatasetError

WORDS = ("good", "bad", "plot", "acting", "film", "music", "ending", "story")


@pytest.fixture()
def user_dir(tmp_path, monkeypatch):
    folder = tmp_path / "user"
    monkeypatch.setenv("ENGINE_USER_DIR", str(folder))
    return folder


def manifests(user_dir: Path) -> list[Path]:
    return sorted((user_dir / "datasets").glob("*")) if (user_dir / "datasets").exists() else []


def frame(n: int = 60, seed: int = 0, labels=("neg", "pos")) -> pd.DataFrame:
    """n rows: a text, a second text, a label cycling through `labels`, a rationale on every other row
    (character spans of the first word) and an empty list elsewhere."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))) + f" {i}" for i in range(n)]
    return pd.DataFrame({
        "text": texts,
        "question": [f"is item {i} any good?" for i in range(n)],
        "label": [labels[i % len(labels)] for i in range(n)],
        "rationale": [[[0, len(t.split()[0])]] if i % 2 else [] for i, t in enumerate(texts)],
    })


def write(df: pd.DataFrame, folder: Path, fmt: str, class_names=None) -> Path:
    """`df` in the format; list columns become JSON text in CSV/TSV."""
    if fmt in ("csv", "tsv"):
        flat = df.copy()
        for column in flat.columns:
            if flat[column].map(lambda v: isinstance(v, list)).any():
                flat[column] = flat[column].map(json.dumps)
        path = folder / f"data.{fmt}"
        flat.to_csv(path, index=False, sep="," if fmt == "csv" else "\t")
        return path
    if fmt == "jsonl":
        path = folder / "data.jsonl"
        df.to_json(path, orient="records", lines=True)
        return path
    if fmt == "parquet":
        path = folder / "data.parquet"
        df.to_parquet(path, index=False)
        return path
    if fmt == "arrow":
        return write_saved(folder / "saved", {None: df}, class_names)
    if fmt == "arrow-dict":
        n = len(df)
        return write_saved(folder / "saved", {"train": df.iloc[: n * 8 // 10], "validation": df.iloc[n * 8 // 10: n * 9 // 10],
                                              "test": df.iloc[n * 9 // 10:]}, class_names)
    raise AssertionError(fmt)


def write_saved(root: Path, parts: dict, class_names=None) -> Path:
    """What `datasets`' save_to_disk writes (Arrow IPC streams + state.json + dataset_info.json; a DatasetDict
    adds dataset_dict.json and a folder per split), written with pyarrow so `datasets` is not needed."""
    root.mkdir(parents=True)
    if list(parts) != [None]:
        (root / "dataset_dict.json").write_text(json.dumps({"splits": list(parts)}))
    for split, df in parts.items():
        folder = root if split is None else root / split
        folder.mkdir(exist_ok=True)
        table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
        features = {c: {"dtype": "string", "_type": "Value"} for c in table.column_names}
        if class_names is not None:
            features["label"] = {"names": list(class_names), "_type": "ClassLabel"}
        with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=7)  # several record batches, as real files have
        (folder / "dataset_info.json").write_text(json.dumps({"citation": "", "description": "", "features": features}))
        (folder / "state.json").write_text(json.dumps({
            "_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_fingerprint": "test", "_format_columns": None,
            "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False, "_split": split}))
    return root


def rows_of(dataset) -> Counter:
    return Counter((e.primary, dataset.classes[e.label], e.auxiliary, e.rationale_spans)
                   for split in dataset.splits.values() for e in split)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet", "arrow", "arrow-dict"])
def test_each_format_round_trips(user_dir, tmp_path, fmt):
    """Every row comes back once with its text, label, second text and rationale, whatever the format."""
    df = frame(60)
    path = write(df, tmp_path, fmt)
    m = register_dataset("mine", path, "text", "label", pair_column="question", rationale_column="rationale")
    assert m["format"] == ("arrow" if fmt.startswith("arrow") else fmt) and m["rows"] == 60
    d = get_dataset("mine")
    expected = Counter((t, lab, q, tuple((a, b) for a, b in r)) for t, lab, q, r in
                       zip(df.text, df.label, df.question, df.rationale))
    assert rows_of(d) == expected
    assert d.paired and d.classes == ("neg", "pos") and m["rationale_rows"] == 30
    if fmt == "arrow-dict":  # a DatasetDict's folders are its splits
        assert m["split_source"] == "folders"
        assert sorted(e.primary for e in d.splits["test"]) == sorted(df.text[54:])


def test_saved_folder_class_label_keeps_its_names_and_order(user_dir, tmp_path):
    df = frame(40, labels=(1, 0))  # ints index the ClassLabel names
    path = write(df, tmp_path, "arrow", class_names=["positive", "negative"])
    register_dataset("hf", path, "text", "label")
    d = get_dataset("hf")
    assert d.classes == ("positive", "negative")
    assert Counter(d.classes[e.label] for s in d.splits.values() for e in s) == {"negative": 20, "positive": 20}


def test_label_order_by_number_when_whole_numbers_else_alphabetical(user_dir, tmp_path):
    (tmp_path / "a").mkdir()
    write(frame(60, labels=(10, 2, 3)), tmp_path / "a", "jsonl")
    assert register_dataset("ints", tmp_path / "a" / "data.jsonl", "text", "label")["classes"] == ["2", "3", "10"]
    (tmp_path / "b").mkdir()
    df = frame(60, labels=(1.0, 0.0))
    write(df, tmp_path / "b", "parquet")
    assert register_dataset("floats", tmp_path / "b" / "data.parquet", "text", "label")["classes"] == ["0", "1"]
    (tmp_path / "c").mkdir()
    write(frame(60, labels=("b", "C", "a")), tmp_path / "c", "csv")
    assert register_dataset("names", tmp_path / "c" / "data.csv", "text", "label")["classes"] == ["C", "a", "b"]


def test_splits_are_stratified_seeded_and_match_the_listing(user_dir, tmp_path):
    """Each split keeps each class's share (the sizes `stratified_sizes` gives); the same seed gives the same
    splits, another seed others; the listing's sizes and baseline, computed from counts alone, agree."""
    df = frame(300, labels=("a",) * 5 + ("b",) * 3 + ("c",) * 2)  # 150/90/60
    register_dataset("strat", write(df, tmp_path, "csv"), "text", "label")
    d = get_dataset("strat", 0)
    for k, c in enumerate(d.classes):
        n = int((df.label == c).sum())
        got = tuple(sum(e.label == k for e in d.splits[s]) for s in ("train", "validation", "test"))
        assert got == stratified_sizes(n)
    again, other = load_dataset("strat", 0), load_dataset("strat", 1)
    assert [e.uid for e in again.splits["test"]] == [e.uid for e in d.splits["test"]]
    assert {e.uid for e in other.splits["test"]} != {e.uid for e in d.splits["test"]}
    uids = [e.uid for s in d.splits.values() for e in s]
    assert len(uids) == len(set(uids)) == 300
    manifest = list_user_datasets()[0]
    for seed, dataset in ((0, d), (1, other)):
        listed, loaded = summary_from_manifest(manifest, seed), dataset.summary()
        assert listed["sizes"] == loaded["sizes"] and listed["majority_class"] == loaded["majority_class"]
        assert listed["majority_baseline_test"] == pytest.approx(loaded["majority_baseline_test"])


def test_split_column_with_aliases_and_a_carved_validation_split(user_dir, tmp_path):
    df = frame(200)
    df["part"] = ["Train"] * 150 + ["dev"] * 20 + ["TEST"] * 30
    register_dataset("given", write(df, tmp_path, "parquet"), "text", "label", split_column="part")
    d = get_dataset("given")
    assert sorted(e.primary for e in d.splits["validation"]) == sorted(df.text[150:170])
    assert sorted(e.primary for e in d.splits["test"]) == sorted(df.text[170:])
    # without a validation split in the column, 10% of each class of train is carved out (seeded)
    df["part"] = ["train"] * 170 + ["test"] * 30
    (tmp_path / "b").mkdir()
    m = register_dataset("carved", write(df, tmp_path / "b", "parquet"), "text", "label", split_column="part")
    assert m["carved_splits"] == ["validation"]
    d = get_dataset("carved")
    assert Counter(e.label for e in d.splits["validation"]) == {0: 8, 1: 8}  # round(0.1 * 85) per class
    assert sorted(e.primary for e in d.splits["test"]) == sorted(df.text[170:])
    assert m["split_sizes"] == {s: len(v) for s, v in d.splits.items()}
    assert {e.uid for e in load_dataset("carved", 1).splits["validation"]} != {e.uid for e in d.splits["validation"]}


def test_metric_is_accuracy_when_balanced_and_macro_f1_when_not(user_dir, tmp_path):
    for name, labels, metric in (("even", ("a", "b"), "accuracy"), ("skewed", ("a",) * 5 + ("b",) * 2, "macro_f1")):
        (tmp_path / name).mkdir()
        m = register_dataset(name, write(frame(140, labels=labels), tmp_path / name, "csv"), "text", "label")
        assert m["metric"] == metric and get_dataset(name).metric == metric
    assert "40/100 = 0.40 < 0.5" in m["metric_reason"]
    m = register_dataset("forced", tmp_path / "skewed" / "data.csv", "text", "label", metric="accuracy")
    assert m["metric"] == "accuracy" and "chosen by the user" in m["metric_reason"]


def test_rationales_in_characters_or_words_become_character_spans():
    text = "the  plot was dull"
    assert parse_rationale("[[5, 9]]", text, "char") == ((5, 9),)
    assert parse_rationale([[1, 2], [3, 4]], text, "token") == ((5, 9), (14, 18))  # 'plot', 'dull'
    assert parse_rationale("", text, "token") == ()


def test_rationale_spans_reach_the_model_tokens(user_dir, tmp_path):
    """A registered rationale maps to the tokens of those words, as the plausibility metrics use it."""
    from transformers import AutoTokenizer

    from engine.models import resolve_encoder
    from engine.plausibility.rationales import rationale_token_indices

    df = pd.DataFrame({"text": ["the plot was dull", "a lovely film"] * 10, "label": ["neg", "pos"] * 10,
                       "why": ["[[3, 4]]", "[[1, 2]]"] * 10})
    register_dataset("why", write(df, tmp_path, "csv"), "text", "label", rationale_column="why", rationale_unit="token")
    example = next(e for s in get_dataset("why").splits.values() for e in s if e.primary.startswith("the plot"))
    tokenizer = AutoTokenizer.from_pretrained(resolve_encoder("tiny"))
    encoded = tokenizer(example.primary, return_offsets_mapping=True)
    tokens = encoded.tokens()
    maskable = [t not in ("[CLS]", "[SEP]") for t in tokens]
    picked = rationale_token_indices(encoded["offset_mapping"], maskable, example.rationale_spans)
    words = [t for t, keep in zip(tokens, maskable) if keep]
    assert [words[i] for i in picked] == ["dull"]


def _bad_files(tmp_path: Path) -> dict:
    """name -> (path, columns, expected message parts); each file is wrong in one way."""
    good = frame(40)
    out = {}

    def csv_text(name: str, text: str | bytes) -> Path:
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return path

    rows = "".join(f'"text {i}",{"pos" if i % 2 else "neg"}\n' for i in range(1, 30))
    out["misspelt column"] = (csv_text("m.csv", "text,label\n" + rows), {"label_column": "lable"}, ["m.csv", "'lable'", "did you mean 'label'"])
    out["empty texts"] = (csv_text("e.csv", "text,label\n" + rows.replace('"text 3"', '"  "').replace('"text 7"', '""')),
                          {}, ["e.csv", "column 'text'", "rows 3, 7"])
    out["empty label"] = (csv_text("l.csv", "text,label\n" + rows.replace('"text 5",pos', '"text 5",')), {}, ["column 'label'", "row 5"])
    out["single class"] = (csv_text("s.csv", "text,label\n" + rows.replace(",neg", ",pos")), {}, ["s.csv", "single class", "'pos'"])
    out["not utf-8"] = (csv_text("u.csv", b"text,label\n" + rows.encode() + b'"caf\xe9",pos\n'), {}, ["u.csv", "row 30", "UTF-8"])
    out["truncated csv"] = (csv_text("t.csv", "text,label\n" + rows + '"an unfinished quo'), {}, ["t.csv", "row 30", "truncated"])
    out["ragged row"] = (csv_text("r.csv", "text,label\n" + rows.replace('"text 4",neg', '"text 4",neg,extra')), {}, ["r.csv", "row 4", "3 field"])
    out["unknown split"] = (csv_text("p.csv", "text,label,split\n" + rows.replace("\n", ",train\n").replace("neg,train\n", "neg,holdout\n", 1)),
                            {"split_column": "split"}, ["p.csv", "'holdout'", "row 2", "column 'split'"])
    out["bad rationale"] = (csv_text("b.csv", "text,label,why\n" + rows.replace("\n", ',""\n').replace('"text 6",neg,""', '"text 6",neg,"[[0, 99]]"')),
                            {"rationale_column": "why"}, ["b.csv", "column 'why'", "row 6", "outside the text"])
    out["fraction label"] = (tmp_path / "f.parquet", {}, ["f.parquet", "not whole", "row 2"])
    pd.DataFrame({"text": good.text, "label": [0.0, 0.5] + [float(i % 2) for i in range(38)]}).to_parquet(out["fraction label"][0])
    out["text is label"] = (csv_text("x.csv", "text,label\n" + rows), {"text_column": "label"}, ["x.csv", "same column"])
    out["too few rows"] = (csv_text("few.csv", "text,label\na,pos\nb,neg\nc,pos\n"), {}, ["few.csv", "split would be empty"])
    out["too many classes"] = (csv_text("c.csv", "text,label\n" + "".join(f"t{i},t{i}\n" for i in range(1100))), {},
                               ["c.csv", "more than 1,000 distinct labels", "column 'label'"])
    out["missing file"] = (tmp_path / "nope.csv", {}, ["nope.csv", "no such file"])
    out["unknown suffix"] = (csv_text("data.xlsx", "x"), {}, ["data.xlsx", "unknown file type"])

    jsonl = tmp_path / "j.jsonl"
    good.head(30).to_json(jsonl, orient="records", lines=True)
    jsonl.write_bytes(jsonl.read_bytes()[:-25])
    out["truncated jsonl"] = (jsonl, {}, ["j.jsonl", "line 30", "truncated"])
    parquet = tmp_path / "cut.parquet"
    good.to_parquet(parquet)
    parquet.write_bytes(parquet.read_bytes()[:-40])
    out["truncated parquet"] = (parquet, {}, ["cut.parquet", "not a readable Parquet file"])
    arrow = write_saved(tmp_path / "cutarrow", {None: good})
    data = arrow / "data-00000-of-00001.arrow"
    data.write_bytes(data.read_bytes()[:-300])
    out["truncated arrow"] = (arrow, {}, ["data-00000-of-00001.arrow", "cannot be read"])
    outside = write_saved(tmp_path / "outside", {None: good})
    (tmp_path / "secret.arrow").write_bytes(data.read_bytes())
    (outside / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../secret.arrow"}]}))
    out["state.json leads outside"] = (outside, {}, ["outside", "../secret.arrow"])
    linked = write_saved(tmp_path / "linked", {None: good})
    (linked / "data-00000-of-00001.arrow").unlink()
    (linked / "data-00000-of-00001.arrow").symlink_to(tmp_path / "secret.arrow")
    out["link leads outside"] = (linked, {}, ["linked", "outside the folder"])
    dict_outside = write_saved(tmp_path / "dictout", {"train": good, "test": good})
    (dict_outside / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "../outside"]}))
    out["split folder leads outside"] = (dict_outside, {}, ["dictout", "outside"])
    return out


BAD_CASES = ["misspelt column", "empty texts", "empty label", "single class", "not utf-8", "truncated csv", "ragged row",
             "unknown split", "bad rationale", "fraction label", "text is label", "too few rows", "too many classes",
             "missing file", "unknown suffix", "truncated jsonl", "truncated parquet", "truncated arrow",
             "state.json leads outside", "link leads outside", "split folder leads outside"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_is_refused_whole_naming_where_and_nothing_is_registered(user_dir, tmp_path, case):
    path, columns, parts = _bad_files(tmp_path)[case]
    kwargs = {"text_column": "text", "label_column": "label", **columns}
    with pytest.raises(DataFileError) as caught:
        register_dataset("bad", path, kwargs.pop("text_column"), kwargs.pop("label_column"), **kwargs)
    message = str(caught.value)
    for part in parts:
        assert part in message, (part, message)
    folder = user_dir / "datasets"
    assert not folder.exists() or not any(folder.iterdir()), "no manifest, nor a temporary file, is left"
    with pytest.raises(UnknownDatasetError):
        get_dataset("bad")


def test_every_bad_row_is_listed_with_its_row_across_chunk_boundaries(user_dir, tmp_path):
    """Reading in chunks of 7 rows finds the same rows and the same counts as one chunk."""
    df = frame(50)
    df.loc[[8, 20, 41], "text"] = ""
    path = write(df, tmp_path, "parquet")
    messages = []
    for chunk_rows in (7, 1000):
        with pytest.raises(DataFileError) as caught:
            register_dataset("chunks", path, "text", "label", chunk_rows=chunk_rows)
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "3 rows (rows 9, 21, 42)" in messages[0]
    df.loc[[8, 20, 41], "text"] = "fixed"
    write(df, tmp_path, "parquet")
    small = register_dataset("chunks", path, "text", "label", chunk_rows=7)
    large = register_dataset("chunks", path, "text", "label", overwrite=True)
    assert {k: v for k, v in small.items() if k not in ("registered_at", "validation_seconds")} == \
           {k: v for k, v in large.items() if k not in ("registered_at", "validation_seconds")}


def test_names_are_checked_and_a_failed_overwrite_keeps_the_old_registration(user_dir, tmp_path):
    path = write(frame(40), tmp_path, "csv")
    for name, message in (("rt", "packaged"), ("../evil", "not allowed"), ("Big", "not allowed")):
        with pytest.raises(DataFileError, match=message):
            register_dataset(name, path, "text", "label")
    register_dataset("keep", path, "text", "label")
    with pytest.raises(DataFileError, match="registered already"):
        register_dataset("keep", path, "text", "label")
    before = (user_dir / "datasets" / "keep.json").read_bytes()
    (tmp_path / "bad").mkdir()
    bad = write(frame(40, labels=("x",)), tmp_path / "bad", "csv")
    with pytest.raises(DataFileError, match="single class"):
        register_dataset("keep", bad, "text", "label", overwrite=True)
    assert (user_dir / "datasets" / "keep.json").read_bytes() == before
    assert [p.name for p in manifests(user_dir)] == ["keep.json"]


def test_a_changed_file_is_detected_and_a_touched_one_is_not(user_dir, tmp_path):
    path = write(frame(40), tmp_path, "csv")
    register_dataset("watch", path, "text", "label", command="python -m engine datasets add watch ...")
    assert len(get_dataset("watch").splits["train"]) == 32
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # same bytes, new time: still usable
    assert len(get_dataset("watch").splits["train"]) == 32
    path.write_text(path.read_text() + '"one more row",pos\n')
    with pytest.raises(DataFileError, match="changed since it was registered as 'watch'.*register it again"):
        get_dataset("watch")
    assert list_user_datasets()[0]["state"] == "modified"
    path.unlink()
    with pytest.raises(DataFileError, match="cannot be found"):
        get_dataset("watch")


def test_re_registering_a_name_replaces_what_get_dataset_returns(user_dir, tmp_path):
    first = write(frame(40), tmp_path, "csv")
    register_dataset("swap", first, "text", "label")
    assert get_dataset("swap").num_classes == 2
    (tmp_path / "b").mkdir()
    register_dataset("swap", write(frame(60, labels=("a", "b", "c")), tmp_path / "b", "csv"), "text", "label", overwrite=True)
    assert get_dataset("swap").num_classes == 3


def test_labels_checked_against_a_model(user_dir, tmp_path):
    """check_labels maps the data's classes onto a model's (order, case, LABEL_k), and refuses labels the
    model lacks naming them, the column and their first row."""
    register_dataset("lab", write(frame(60, labels=("neg", "pos", "neutral")), tmp_path, "csv"), "text", "label")
    d = get_dataset("lab")
    assert d.classes == ("neg", "neutral", "pos")
    assert check_labels(d, ["POS", "neutral", "Neg"]) == (2, 1, 0)
    assert check_labels(d, {0: "pos", 1: "neg", 2: "neutral"}) == (1, 2, 0)
    with pytest.raises(DataLabelMismatchError) as caught:
        check_labels(d, ["neg", "pos"])
    assert isinstance(caught.value, DataFileError) and isinstance(caught.value, LabelMismatchError)
    message = str(caught.value)
    assert "'neutral' (20 rows)" in message and "column 'label'" in message and "row 3 for 'neutral'" in message
    (tmp_path / "ints").mkdir()
    register_dataset("ints", write(frame(40, labels=(0, 1)), tmp_path / "ints", "jsonl"), "text", "label")
    assert check_labels(get_dataset("ints"), {0: "LABEL_0", 1: "LABEL_1"}) == (0, 1)


def test_unknown_names_list_the_registered_ones(user_dir, tmp_path):
    register_dataset("mine", write(frame(40), tmp_path, "csv"), "text", "label")
    assert dataset_names()[-1] == "mine" and dataset_names()[0] == "rt"
    with pytest.raises(UnknownDatasetError, match="known datasets: rt, imdb.*mine"):
        get_dataset("theirs")


def test_cli_adds_lists_and_removes(user_dir, tmp_path, capsys):
    path = write(frame(60), tmp_path, "tsv")
    assert main(["datasets", "add", "cli-set", "--file", str(path), "--text-column", "text", "--label-column", "label",
                 "--pair-column", "question", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "registered 'cli-set': 60 rows" in out and "metric accuracy" in out
    manifest = json.loads((user_dir / "datasets" / "cli-set.json").read_text())
    assert manifest["command"].startswith("python -m engine datasets add cli-set") and len(manifest["sha256"]) == 64
    assert main(["datasets"]) == 0
    listing = capsys.readouterr().out
    assert "cli-set" in listing and "train/val/test=48/6/6" in listing and "paired" in listing
    assert main(["datasets", "add", "cli-bad", "--file", str(path), "--text-column", "txt", "--label-column", "label"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "did you mean 'text'" in err and "Traceback" not in err
    assert not (user_dir / "datasets" / "cli-bad.json").exists()
    assert main(["datasets", "columns", str(path)]) == 0 and "'question'" in capsys.readouterr().out
    assert main(["datasets", "remove", "cli-set"]) == 0
    assert "cli-set" not in dataset_names() and path.exists()


def test_cli_trains_on_a_registered_dataset(user_dir, tmp_path, models_cache, capsys):
    df = pd.DataFrame({"review": [f"a {w} film {i}" for i, w in enumerate(["great", "awful"] * 60)],
                       "stars": ["5", "1"] * 60})
    path = write(df.rename(columns={"review": "text", "stars": "label"}), tmp_path, "csv")
    assert main(["datasets", "add", "stars", "--file", str(path), "--text-column", "text", "--label-column", "label", "--quiet"]) == 0
    assert main(["train", "--model", "tiny", "--dataset", "stars", "--epochs", "1", "--train-limit", "64",
                 "--eval-limit", "32", "--quiet", "--id", "tiny-stars"]) == 0
    meta = json.loads((models_cache / "tiny-stars" / "metadata.json").read_text())
    assert meta["dataset"] == "stars"
    assert "saved" in capsys.readouterr().out
    # the Explain page offers the registered dataset's test examples to start from
    from streamlit.testing.v1 import AppTest

    root = Path(__file__).resolve().parents[2]
    at = AppTest.from_file(str(root / "app" / "main.py"), default_timeout=120)
    at.run()
    at.switch_page(str(root / "pages" / "explain.py")).run()  # the app opens on the home page
    assert not at.exception, [e.message for e in at.exception]
    test_texts = {e.primary for e in get_dataset("stars").splits["test"]}
    picker = next(b for b in at.main.selectbox if b.label.startswith("Start from a test example"))
    # each option reads "<index>: [<gold label>] <text>"
    offered = [o.split(": ", 1)[1] for o in picker.options[1:]]
    assert offered and all(o.startswith(("[1] ", "[5] ")) for o in offered), offered[:3]
    assert {o.split("] ", 1)[1] for o in offered} <= test_texts


def test_uploads_are_saved_by_content_under_plain_names(user_dir, tmp_path):
    for name in ("../x.csv", "a/b.csv", "..\\x.csv", ".hidden.csv", "x.exe", "", "a\x00.csv"):
        with pytest.raises(DataFileError):
            check_upload_name(name)
    data = write(frame(40), tmp_path, "csv").read_bytes()
    saved = save_upload("my reviews (1).csv", data)
    assert saved.parent == uploads_dir() and saved.read_bytes() == data and saved.name.endswith("-my reviews (1).csv")
    assert save_upload("my reviews (1).csv", data) == saved  # the same content lands on the same file
    register_dataset("up", saved, "text", "label")
    assert get_dataset("up").num_classes == 2
    remove_user_dataset("up")
    assert not saved.exists(), "an upload no registration uses goes with its registration"


PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "data.py")
REGISTER = "FormSubmitter:data_register-Register"  # the form's submit button


def _page():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_data_page_uploads_previews_and_registers(user_dir, tmp_path):
    """The page saves the upload under uploads/, previews it with guessed columns and registers it; a
    bad upload is refused with its rows named, leaving neither a manifest nor the uploaded file."""
    at = _page()
    df = frame(60)
    df["text"] = df["text"].str.cat(["<script>alert(1)</script>"] * 60, sep=" ")
    data = write(df, tmp_path, "csv").read_bytes()
    at.file_uploader(key="data_upload").upload("My Reviews.csv", data, "text/csv")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.text_input(key="data_name").value == "my-reviews"
    assert at.selectbox(key="data_text_column").value == "text" and at.selectbox(key="data_label_column").value == "label"
    assert all("<script>" not in m.value for m in at.markdown), "user text is never rendered as markdown"
    at.button(key=REGISTER).click()
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("Registered" in s.value and "my-reviews" in s.value for s in at.success)
    assert get_dataset("my-reviews").num_classes == 2
    assert len(list(uploads_dir().iterdir())) == 1

    bad = _page()
    (tmp_path / "bad").mkdir()
    single = write(frame(40, labels=("pos",)), tmp_path / "bad", "csv").read_bytes()
    bad.file_uploader(key="data_upload").upload("one class.csv", single, "text/csv")
    bad.run()
    bad.button(key=REGISTER).click()
    bad.run()
    assert not bad.exception, [e.message for e in bad.exception]
    assert any("single class" in c.value for c in bad.code)
    assert [p.name for p in manifests(user_dir)] == ["my-reviews.json"]
    assert len(list(uploads_dir().iterdir())) == 1, "the refused upload was deleted"


def test_a_stray_file_with_a_name_no_registration_can_have_is_listed_as_broken_not_a_crash(user_dir):
    """A file in the registrations folder whose name is not an allowed dataset name ('My Data.json', copied there
    by hand) is listed with an error, and the dataset names still resolve (reading it used to recurse without end:
    its 'unknown dataset' message listed the known names, which read the folder again)."""
    from engine.data import PACKAGED_DATASETS
    from engine.data.user import datasets_dir, list_user_datasets

    datasets_dir().mkdir(parents=True, exist_ok=True)
    (datasets_dir() / "My Data.json").write_text("{}", encoding="utf-8")
    assert dataset_names() == PACKAGED_DATASETS
    [entry] = list_user_datasets()
    assert entry["name"] == "My Data" and "not a registration" in entry["error"]
