"""Your data: upload a file, preview it, choose its columns and register it; the registered datasets
are then usable by name everywhere (training, benchmarks, the Explain page's examples)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from app.admin import require_admin
from app.progress import ThrottledProgress
from app.text import md
from engine.data.files import detect_format, list_columns, preview
from engine.data.user import (
    METRIC_CHOICES,
    RATIONALE_UNITS,
    guess_columns,
    is_registered_file,
    list_user_datasets,
    prune_uploads,
    register_dataset,
    remove_user_dataset,
    save_upload,
    suggest_dataset_name,
    summary_from_manifest,
)
from engine.errors import DataFileError

require_admin()  # served to a network, only the admin may use this page (app/admin.py)

UPLOAD_KEY = "data_upload"  # the file_uploader widget
SAVED_KEY = "data_upload_saved"  # (uploaded file id, saved path): an upload is saved once, not on every rerun
NONE = "(none)"


def refusal(err: DataFileError) -> None:
    # messages quote the user's columns and values: shown as plain text, never as markdown
    st.error("Not registered: the file was refused as a whole.")
    st.code(str(err), language=None, wrap_lines=True)


st.title("Your data")
st.caption("Register a CSV, TSV, JSON Lines or Parquet file of texts and labels. It is read where it is saved, "
           "validated row by row, and then found by name on every page and command. For files too large to upload "
           "and for folders written by save_to_disk (the datasets library), use `python -m engine datasets add` "
           "(docs/own-data.md).")

registered = list_user_datasets()
if registered:
    st.subheader("Registered datasets")
    rows = []
    for m in registered:
        if "error" in m:
            rows.append({"name": m["name"], "problem": m["error"]})
            continue
        s = summary_from_manifest(m)
        rows.append({"name": m["name"], "rows": m["rows"], "classes": ", ".join(m["classes"]), "metric": m["metric"],
                     "train / validation / test": " / ".join(str(s["sizes"][k]) for k in ("train", "validation", "test")),
                     "paired": m["paired"], "rationales": m["rationale_rows"], "file": m["path"],
                     "problem": {"ok": "", "missing": "file missing", "modified": "file modified: register it again"}[m["state"]]})
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    c1, c2 = st.columns([3, 1])
    to_remove = c1.selectbox("Forget a registration (your file stays)", [m["name"] for m in registered], key="data_remove_name")
    if c2.button("Forget", key="data_remove"):
        remove_user_dataset(to_remove)
        st.rerun()

st.subheader("Register a file")
prune_uploads()
uploaded = st.file_uploader("Data file", type=["csv", "tsv", "tab", "jsonl", "ndjson", "json", "parquet", "pq"], key=UPLOAD_KEY,
                            help="The upload is saved as a copy under the user folder (uploads/), deleted when no "
                                 "registration uses it. To use a file where it is, register it by path: "
                                 "python -m engine datasets add.")
if uploaded is None:
    st.stop()
try:
    saved = st.session_state.get(SAVED_KEY)
    if not saved or saved[0] != uploaded.file_id or not saved[1].exists():
        st.session_state[SAVED_KEY] = saved = (uploaded.file_id, save_upload(uploaded.name, uploaded.getbuffer()))
    path = saved[1]
    fmt = detect_format(path)
    columns = list_columns(path, fmt)
    head = preview(path, rows=20, fmt=fmt)
except DataFileError as err:
    refusal(err)
    st.stop()

st.caption(f"First {len(head)} rows of {md(uploaded.name)} ({fmt}; rows are numbered from 1, as in error messages)")
st.dataframe(head)
guess = guess_columns(columns)


def pick(container, label: str, role: str, optional: bool = False, help: str | None = None):
    options = ([NONE] if optional else []) + columns
    default = guess[role] if guess[role] in columns else options[0]
    return container.selectbox(label, options, index=options.index(default), key=f"data_{role}_column", help=help)


with st.form("data_register"):
    name = st.text_input("Dataset name", value=suggest_dataset_name(uploaded.name), key="data_name",
                         help="lower-case letters, digits, '.', '_' or '-'; use it as --dataset NAME")
    c1, c2 = st.columns(2)
    text_column = pick(c1, "Text column", "text", help="the text that is classified, masked and explained")
    label_column = pick(c2, "Label column", "label", help="class names or whole numbers")
    c3, c4, c5 = st.columns(3)
    pair_column = pick(c3, "Second text (paired task)", "pair", optional=True, help="a question or hypothesis: never masked")
    split_column = pick(c4, "Split column", "split", optional=True,
                        help="train / validation (val, dev) / test per row; none: seeded stratified 80/10/10")
    rationale_column = pick(c5, "Rationale column", "rationale", optional=True,
                            help="[[start, end], ...] per row: ground truth for the plausibility metrics")
    c6, c7, c8 = st.columns(3)
    unit = c6.selectbox("Rationale spans count", RATIONALE_UNITS, key="data_rationale_unit",
                        format_func={"char": "characters", "token": "words (whitespace-separated)"}.get)
    metric = c7.selectbox("Metric", METRIC_CHOICES, key="data_metric",
                          help="auto: macro-F1 when the smallest class has fewer than half the rows of the largest, else accuracy")
    overwrite = c8.checkbox("Replace a dataset of the same name", key="data_overwrite")
    submitted = st.form_submit_button("Register", type="primary")

if submitted:
    bar = ThrottledProgress(0.0, text="validating ...")

    def report(done: int, total: int) -> None:
        bar.update(done / max(total, 1), f"validating ... {done / 1e6:.1f} of {total / 1e6:.1f} MB")

    try:
        m = register_dataset(name, path, text_column, label_column,
                             pair_column=None if pair_column == NONE else pair_column,
                             split_column=None if split_column == NONE else split_column,
                             rationale_column=None if rationale_column == NONE else rationale_column,
                             rationale_unit=unit, metric=metric, overwrite=overwrite,
                             command=f"dashboard Data page: upload of {uploaded.name}", progress=report)
    except DataFileError as err:
        bar.empty()
        refusal(err)
        if not is_registered_file(path):  # nothing half-registered stays behind, not even the upload
            path.unlink(missing_ok=True)
            st.session_state.pop(SAVED_KEY, None)
        st.stop()
    bar.empty()
    sizes = m["split_sizes"]
    st.success(f"Registered **{md(m['name'])}**: {m['rows']:,} rows, {len(m['classes'])} classes; train {sizes['train']:,} / "
               f"validation {sizes['validation']:,} / test {sizes['test']:,}; metric {m['metric']}. Build a model on it "
               "on the Models page, or `python -m engine train --dataset NAME`.".replace("NAME", m["name"]))
    with st.expander("Registration (manifest)"):
        st.json(m)
