"""Studies (admin): create a plausibility study, invite annotators (links to copy), follow each annotator's
progress and quality, exclude annotators, see every task's answer count, the ratings with bootstrap CIs and the
agreement, export, close. The engine does the work (engine.annotation.studies and its results module); this page
only draws forms and tables. User text (names, instructions, labels) reaches the page as text."""
from __future__ import annotations

import json
from collections import Counter
from urllib.parse import urlsplit

import pandas as pd
import streamlit as st

from app.admin import ensure_admin, require_admin
from app.figure_export import table as table_view
from app.follow_sidebar import follow
from app.progress import ThrottledProgress
from app.shared import get_classifier, usable_checkpoints
from app.text import md
from engine.annotation.studies import (
    CHECK_KINDS,
    DEFAULT_CONSENT,
    DEFAULT_INSTRUCTIONS,
    KINDS,
    MAX_TEXT_LENGTH,
    StudyConfig,
    StudyStore,
    build_study_tasks,
)
from engine.annotation.studies.results import answers_csv, export_records, study_results
from engine.annotation.task_words import SHOWN_AS
from engine.data import dataset_names
from engine.errors import EngineError
from engine.importance import measure_availability

require_admin()  # served to a network, only the admin may use this page (app/admin.py)

SELECTED_KEY = "studies_selected"
LINKS_KEY = "studies_links"  # {study id: [(label, url)]}: raw tokens exist only here and in the links sent
PREFERRED = ("random", "grad-l2", "loo-sign", "ig-sign", "x-grad-sign", "attention")
N_BOOT = 200
SHOWN_AS_LABELS = {"word": "words", "token": "word pieces"}


def fmt(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def base_url() -> str:
    """This server's address as the browser reached it (where annotators' links point), e.g. http://host:8501/."""
    try:
        parts = urlsplit(st.context.url or "")
    except Exception:
        return "http://localhost:8501/"
    return f"{parts.scheme}://{parts.netloc}/" if parts.scheme and parts.netloc else "http://localhost:8501/"


def act(action, done: str | None = None) -> bool:
    """Run an action that changes the server (checked again here, not only at the top of the page)."""
    try:
        ensure_admin("changing a study")
        action()
    except (EngineError, PermissionError) as err:
        st.error(md(err))
        return False
    if done:
        st.success(md(done))
    return True


st.title("Studies")
st.caption("Many annotators rank anonymised explanations; every task is answered by exactly `overlap` of them, "
           "with attention checks. Annotators open their link and see only the study (docs/studies.md).")
try:
    store = StudyStore()
except EngineError as err:
    st.error(md(err))
    st.stop()

# -- create -----------------------------------------------------------------------------------------------
studies = store.studies()
with st.expander("New study", icon=":material/add:", expanded=not studies):
    models = [m.id for m in usable_checkpoints() if not m.builtin]
    if not models:
        st.info("No model yet: build one on the Models page.")
    else:
        follow("study_model", models)  # the sidebar's model, and again when the sidebar's model changes
        model_id = st.selectbox("Model", models, key="study_model")
        try:
            classifier = get_classifier(model_id)
        except EngineError as err:
            st.error(md(err))
            classifier = None
        if classifier is not None:
            measures = [m for m, why in measure_availability(classifier).items() if not why]
            names = dataset_names()
            own = classifier.meta.dataset
            with st.form("study_create"):
                name = st.text_input("Study name (annotators see it)", max_chars=200, key="study_name")
                c1, c2 = st.columns(2)
                dataset = c1.selectbox("Dataset", names, index=names.index(own) if own in names else 0, key="study_dataset")
                chosen = c2.multiselect("Measures to compare", measures, key="study_measures",
                                        default=[m for m in PREFERRED if m in measures][:3] or measures[:2])
                c3, c4, c5 = st.columns(3)
                n_examples = c3.number_input("Examples (first N of the test split)", 1, 10_000, 10, key="study_n")
                per = c4.number_input("Tasks per annotator", 1, 10_000, 5, key="study_per")
                overlap = c5.number_input("Overlap (annotators per task)", 1, 100, 2, key="study_overlap")
                c6, c7, c8 = st.columns(3)
                checks = c6.number_input("Attention checks per annotator", 0, 100, 1, key="study_checks")
                check_kind = c7.selectbox("Check kind", CHECK_KINDS, key="study_check_kind",
                                          help="instructed: the item says which explanation to put first; gold: the "
                                               "gold rationale against a random one (datasets with rationales)")
                kinds = c8.multiselect("Each task asks for", KINDS, default=["ranking"], key="study_kinds")
                shown_as = st.radio("Annotators see", SHOWN_AS, horizontal=True, key="study_shown_as",
                                    format_func=SHOWN_AS_LABELS.get,
                                    help="words: the text's words as typed, each coloured by the sum of its pieces' "
                                         "scores, and a marked word marks all of its pieces; word pieces: the model's "
                                         "tokens (me ##hta), for annotators who know them. Recorded with the study.")
                instructions = st.text_area("Instructions", DEFAULT_INSTRUCTIONS, max_chars=MAX_TEXT_LENGTH,
                                            key="study_instructions")
                consent = st.text_area("Consent text", DEFAULT_CONSENT, max_chars=MAX_TEXT_LENGTH, key="study_consent")
                limit = st.number_input("Time limit per annotator, minutes (0: none)", 0.0, 10_000.0, 0.0,
                                        key="study_limit")
                create = st.form_submit_button("Create study", type="primary")
            if create:
                config = StudyConfig(name=name, model_id=model_id, measures=tuple(chosen), dataset=dataset,
                                     n_examples=int(n_examples), kinds=tuple(kinds), tasks_per_annotator=int(per),
                                     overlap=int(overlap), attention_checks=int(checks), check_kind=check_kind,
                                     instructions=instructions, consent=consent,
                                     time_limit_minutes=float(limit) if limit > 0 else None, shown_as=shown_as)
                bar = ThrottledProgress(0.0, text="Explaining the examples ...")
                made = {}

                def make():
                    tasks = build_study_tasks(config, classifier, progress=lambda done, total: bar.update(
                        done / max(total, 1), f"Explained {done}/{total}"))
                    made["study"] = store.create(config, tasks, command_line="dashboard: Studies page")

                if act(make):
                    st.session_state[SELECTED_KEY] = made["study"].id
                    st.rerun()

studies = store.studies()
if not studies:
    st.stop()

# -- the selected study -----------------------------------------------------------------------------------
ids = [s.id for s in studies]
if st.session_state.get(SELECTED_KEY) not in ids:
    st.session_state[SELECTED_KEY] = ids[-1]
labels = {s.id: f"{s.name} ({s.id}, {s.state})" for s in studies}
study_id = st.selectbox("Study", ids, key=SELECTED_KEY, format_func=labels.get)  # options are plain text
study = store.study(study_id)
c = study.config
st.subheader(md(study.name), anchor=False)
st.caption(f"{md(study.id)} · {study.state} · model {md(c.model_id)} on {md(c.dataset or 'its dataset')} · measures "
           f"{md(', '.join(c.measures))} · {study.n_tasks} tasks, overlap {c.overlap}, {c.tasks_per_annotator} per "
           f"annotator + {c.attention_checks} {c.check_kind} checks · {study.annotators_needed} annotators needed · "
           f"annotators see {SHOWN_AS_LABELS[c.shown_as]}")

# -- invite -----------------------------------------------------------------------------------------------
st.markdown("#### Invite")
if study.state != "open":
    st.info("The study is closed: reopen it to invite or to let annotators continue.")
else:
    with st.form("study_invite", clear_on_submit=True):
        names_text = st.text_area("Annotators, one name per line (each gets a personal link)", key="study_invite_names")
        i1, i2 = st.columns(2)
        single = i1.checkbox("Single-use links (no resuming)", key="study_single_use")
        base = i2.text_input("Address annotators open", base_url(), key="study_base_url")
        invite = st.form_submit_button("Create links")
    if invite:
        names = [n.strip() for n in names_text.splitlines() if n.strip()]
        made = {}
        if act(lambda: made.update(links=store.invite(study_id, names, single_use=single))):
            st.session_state.setdefault(LINKS_KEY, {}).setdefault(study_id, []).extend(
                (link.label, link.url(base)) for link in made["links"])
    if st.button("Make the open link (crowd workers)", key="study_open_link",
                 help=f"One link for everyone; the platform adds the worker's id as {c.worker_param}. A new open link "
                      "withdraws the previous one."):
        made = {}
        if act(lambda: made.update(link=store.open_link(study_id))):
            st.session_state.setdefault(LINKS_KEY, {}).setdefault(study_id, []).append(
                ("open link (crowd)", made["link"].url(st.session_state.get("study_base_url") or base_url())))
links = st.session_state.get(LINKS_KEY, {}).get(study_id, [])
if links:
    st.caption("Copy these now: only a hash of each link is stored, so they cannot be shown again.")
    for label, url in links:
        st.text(label)
        st.code(url, language=None)

# -- status -----------------------------------------------------------------------------------------------
st.markdown("#### Status")
exclude = st.radio("Leave out of the results", ("marked", "flagged", "none"), horizontal=True, key="study_exclude",
                   format_func={"marked": "annotators marked excluded", "flagged": "marked and flagged annotators",
                                "none": "nobody"}.get)
try:
    results = study_results(store, study_id, exclude=exclude, n_boot=N_BOOT)
except EngineError as err:
    st.error(md(err))
    st.stop()
cov = results["coverage"]
m1, m2, m3, m4, m5 = st.columns(5)
m1.metric("Tasks", cov["tasks"])
m2.metric("Overlap", cov["overlap"])
m3.metric("Tasks complete", f"{cov['complete']} of {cov['tasks']}")
m4.metric("Answers (checks included)", cov["answers"])
# a metric's value is cut to its column's width: the short value here, what it counts in the label
m5.metric("Annotators (of needed)", f"{cov['annotators']} of {cov['annotators_needed']}")
counts = Counter(cov["per_task"].values())
st.text("Answers per task: " + ", ".join(f"{n} answers: {k} tasks" for n, k in sorted(counts.items()))
        + (f" · {cov['over']} tasks over the overlap" if cov["over"] else ""))

annotators = results["annotators"]
if annotators:
    table = pd.DataFrame([{
        "annotator": a["annotator"], "link": a["invitation"], "answered": f"{a['answered']} of {a['total']}",
        "finished": a["finished"], "checks failed": f"{a['checks_failed']} of {a['checks']}",
        "median s": a["median_seconds"], "same answer share": a["straightline_share"],
        "flags": "; ".join(a["flags"]), "excluded": a["excluded"], "left out": a["left_out"]} for a in annotators])
    st.dataframe(table, hide_index=True)
    for a in annotators:
        if a["flags"]:
            st.text(f"Flagged: {a['annotator']}: {'; '.join(a['flags'])}")  # st.text: a name stays text
    with st.form("study_exclusions"):
        chosen = st.multiselect("Excluded annotators (their answers stay stored)", [a["annotator"] for a in annotators],
                                default=[a["annotator"] for a in annotators if a["excluded"]], key="study_excluded")
        save = st.form_submit_button("Save exclusions")
    if save:
        before = {a["annotator"] for a in annotators if a["excluded"]}

        def apply():
            for label in sorted(set(chosen) ^ before):
                store.set_excluded(study_id, label, label in chosen, reason="excluded on the Studies page")

        if act(apply):
            st.rerun()
else:
    st.info("No annotator has opened a link yet.")

tasks, assigned = store.tasks(study_id), store.status(study_id).assigned
with st.expander(f"Every task's answers ({len(tasks)} tasks)"):
    st.dataframe(pd.DataFrame([{"task": tid, "text": t.primary[:120], "answers": cov["per_task"].get(tid, 0),
                                "assigned now": assigned.get(tid, 0)} for tid, t in tasks.items()]), hide_index=True)

comments = [(a.annotator, a.comment) for a in store.answers(study_id) if a.comment]
if comments:
    st.markdown(f"#### Comments ({len(comments)})")
    for who, text in comments:
        st.text(f"{who}: {text}")  # st.text: free text stays text (no markdown, no HTML)

# -- results ----------------------------------------------------------------------------------------------
st.markdown("#### Ratings and agreement")
ratings = results["ratings"]
if ratings["trueskill"]:
    level = f"{ratings['level']:.0%}"
    st.caption(f"From {ratings['annotators']} annotators; {level} intervals by bootstrap over annotators "
               f"({ratings['n_boot']} draws; none with fewer than two annotators).")
    table_view(pd.DataFrame([{
        "rank": r["rank"], "measure": r["measure"], "TrueSkill mu": r["mu"], "sigma": r["sigma"],
        f"mu {level} CI": f"{fmt(r['mu_low'])} to {fmt(r['mu_high'])}", "conservative": r["conservative"],
        "matches": r["matches"]} for r in ratings["trueskill"]]), f"study-{study_id}-trueskill", key="study_trueskill",
        hide_index=True)
    table_view(pd.DataFrame([{
        "rank": r["rank"], "measure": r["measure"], "Bradley-Terry strength": r["strength"],
        f"strength {level} CI": f"{fmt(r['strength_low'])} to {fmt(r['strength_high'])}",
        "P(beats average)": r["p_beats_average"], "comparisons": r["comparisons"]} for r in ratings["bradley_terry"]]),
        f"study-{study_id}-bradley-terry", key="study_bradley_terry", hide_index=True)
else:
    st.info("No rankings yet.")
agreement = results["agreement"]
a1, a2, a3 = st.columns(3)
a1.metric("Krippendorff's alpha (rankings)", fmt(agreement["krippendorff_alpha_rankings"]))
a2.metric("Kendall's W", fmt(agreement["kendalls_w"]), help=f"mean over {agreement['kendalls_w_tasks']} tasks "
                                                              "ranked by two or more")
a3.metric("Rationale alpha", fmt(agreement["rationale"]["alpha"]))

# -- export and close -------------------------------------------------------------------------------------
st.markdown("#### Export")
d1, d2 = st.columns(2)
# built on click, in another thread (the store opens a connection per call)
d1.download_button("Download the study (JSONL)", lambda: "".join(
    json.dumps(r, ensure_ascii=False, sort_keys=True, default=str) + "\n"
    for r in export_records(store, study_id, exclude=exclude, n_boot=N_BOOT)).encode(),
    file_name=f"{study_id}.jsonl", mime="application/jsonl", key="study_export_jsonl")
d2.download_button("Download the answers (CSV, formula-safe)", lambda: answers_csv(store, study_id).encode(),
                   file_name=f"{study_id}-answers.csv", mime="text/csv", key="study_export_csv")

st.markdown("#### Close")
if study.state == "open":
    if st.button("Close the study", key="study_close", help="Links, tasks and answers are refused from now on; "
                                                            "stored answers stay."):
        if act(lambda: store.close(study_id)):
            st.rerun()
elif st.button("Reopen the study", key="study_reopen"):
    if act(lambda: store.reopen(study_id)):
        st.rerun()
