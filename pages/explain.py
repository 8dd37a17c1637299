"""Explain: type or pick an input; see the prediction and, per importance measure, a heatmap of its tokens,
words or sentences, a sortable score table and how much the measures agree; take it away (JSON, CSV, HTML,
LaTeX), share it (the URL holds the view) or mask it step by step."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import plotly.express as px
import streamlit as st

from app import palette
from app.availability import ADMIN, current_role
from app.explain_compare import COMPARE_KEY, pick_second_model, render_side_by_side, second_explanation
from app.figure_export import chart
from app.figure_export import table as table_view
from app.follow_sidebar import follow_choice, sidebar_model
from app.heatmap import LEGEND_ABSOLUTE, LEGEND_SIGNED, token_heatmap_html
from app.ig_budget import URL_FIELDS as IG_URL_FIELDS
from app.ig_budget import StepReporter, ig_options, stopped_words
from app.ig_budget import url_view as ig_url_view
from app.input_check import check_batch, check_input
from app.interaction_view import show_pairs
from app.limits import PublicLimitError, admitted, capped
from app.lora_suggestion import suggest_masked_lora
from app.measure_standing import evidence_for, render_standing
from app.share import arrived_from_url, publish, split_list
from app.shared import offered_measures, selected_classifier
from app.text import md
from engine.data import dataset_names, get_dataset
from engine.errors import DataFileError, EngineError, UnknownDatasetError
from engine.explain import LIVE_MEASURES, by_cost, explain_text
from engine.export import FORMATS, MIME, SUFFIX, explanation_record, write
from engine.faithfulness.measure_agreement import agreement_matrix
from engine.importance import describe, measure_label
from engine.importance.attnlrp import conservation_note
from engine.importance.completeness import completeness_warning
from engine.importance.levels import AGGREGATIONS, LEVELS
from engine.models import EmptyInputError

MASKING_PAGE = Path(__file__).resolve().parent / "masking.py"
LEVEL_LABELS = {"token": "tokens (word pieces)", "word": "words", "sentence": "sentences"}
AGGREGATION_HELP = ("How a word's or sentence's score is made from its word pieces' scores: sum (the default; keeps "
                    "the total, so additive measures such as IG and LOO still add up), mean (long words do not "
                    "outweigh short ones), max-abs (the piece of largest magnitude, with its sign).")

st.title("Explain a prediction")
classifier = selected_classifier()
if classifier is None:
    st.stop()

suggest_masked_lora(classifier)  # a zero-shot prompted LM: offer its shipped masked-LoRA counterpart
meta = classifier.meta
paired = meta.paired
# Test examples to start from: the model's own dataset, or (a model fine-tuned elsewhere records none) any
# packaged or registered dataset the user picks.
source = meta.dataset or st.selectbox("Examples from", ["(none)", *dataset_names()], key="explain_source",
                                             help="This model was fine-tuned elsewhere: pick a dataset to draw test "
                                                  "examples from (register yours on the Your data page).")
examples, example_classes = [], []
if source and source != "(none)":
    try:
        dataset = get_dataset(source, meta.split_seed)
        examples, example_classes = dataset.split("test")[:50], list(dataset.classes)
    except DataFileError as err:  # a registered file that moved or changed: typing a text still works
        st.warning(f"No test examples to pick from: dataset {md(repr(source))} cannot be loaded.")
        st.code(str(err), language=None, wrap_lines=True)
    except UnknownDatasetError:  # e.g. a planted model's data, made when it was planted and not registered
        st.caption(f"No test examples to pick from: dataset {md(source)} is not registered here; type a text.")
available, not_here = offered_measures(classifier)
target_options = ["predicted"] + list(classifier.classes)

from_url = arrived_from_url("explain", {
    "text": ("explain_text", str), "aux": ("explain_aux", str),
    # one measure, as the masking page's `measure=` names it (links from a ranking); `measures=` wins when both are given
    "measure": ("explain_measures", lambda v: [v] if v in available else None),
    "measures": ("explain_measures", lambda v: [m for m in split_list(v) if m in available]),
    "target": ("explain_target", lambda v: v if v in target_options else None),
    "level": ("explain_level", lambda v: v if v in LEVELS else None),
    "agg": ("explain_aggregation", lambda v: v if v in AGGREGATIONS else None),
    "compare": (COMPARE_KEY, str),  # the second model of the side-by-side view (checked against the catalogue)
    **IG_URL_FIELDS,  # IG's step budget
})


def gold_label(example) -> str:
    """The example's gold label by name (its dataset's class), or its index where the dataset names none."""
    label = int(example.label)
    return example_classes[label] if 0 <= label < len(example_classes) else str(label)


def _use_example() -> None:
    pick = st.session_state["explain_example"]
    if pick != "(type your own)":
        example = examples[int(pick.split(":")[0])]
        st.session_state["explain_text"] = example.primary
        st.session_state["explain_aux"] = example.auxiliary or ""
        # the example's text and its gold label: shown while the text box still holds that text
        st.session_state["explain_gold"] = (example.primary, gold_label(example))


st.selectbox("Start from a test example (optional)",
             ["(type your own)"] + [f"{i}: [{gold_label(e)}] {e.primary[:80]}" for i, e in enumerate(examples)],
             key="explain_example", on_change=_use_example, help="Each test example shows its gold label in brackets.")
text = st.text_area("Text", height=120, max_chars=20000, placeholder="Type a review ...", key="explain_text")
gold = st.session_state.get("explain_gold")
gold = gold[1] if gold and gold[0] == text else None  # the picked example's label, until the text is edited
if gold is not None:
    st.caption(f"A test example of {md(source)}: its gold label is **{md(gold)}**.")
aux = st.text_input("Question (auxiliary sequence, never masked)", key="explain_aux") if paired else None
c1, c2 = st.columns([3, 1])
# on a first visit and after a sidebar model switch: what is still chosen of this model's measures, else the defaults
follow_choice("explain_measures", available, LIVE_MEASURES)
measures = c1.multiselect("Importance measures", available,
                          help="grad, x-grad, IG and LOO answer within a second; beam and the sampling-based captum "
                          "measures take longer. Only the measures this model supports are offered"
                          + (f" (not offered: {not_here})." if not_here else "."), key="explain_measures")
target_choice = c2.selectbox("Explain class", target_options, key="explain_target")
l1, l2 = st.columns([3, 1])
st.session_state.setdefault("explain_level", "token")
level = l1.segmented_control("Show", LEVELS, format_func=LEVEL_LABELS.get, key="explain_level",
                             help="Word pieces as the model sees them, or the words / sentences a reader reads, "
                                  "each scored from its pieces (see 'Word score').") or "token"
aggregation = l2.selectbox("Word score", AGGREGATIONS, key="explain_aggregation", help=AGGREGATION_HELP,
                           disabled=level == "token")
compare_id = pick_second_model(classifier.id, current_role() == ADMIN)  # two models side by side (app/explain_compare.py)
options = ig_options(measures)  # IG's step budget (app/ig_budget.py), shown while it runs


def _view() -> dict:
    return {"model": classifier.id, "text": text, "aux": aux if paired else None, "measures": ",".join(measures),
            "target": target_choice, "level": level, "agg": aggregation, "compare": compare_id, **ig_url_view(options)}


def _heatmap(col, result, measure: str, units, level_scores, scale: float | None = None) -> None:
    """One measure's heatmap with its legend (and IG's completeness gap) in `col`; `scale`: the |score| of the full
    colour (default: this heatmap's largest)."""
    col.html(token_heatmap_html([u.text for u in units], level_scores[measure], result.signed[measure],
                                title=f"{measure_label(measure)} ({measure})", title_tip=describe(measure),
                                scale=scale))
    col.caption(LEGEND_SIGNED if result.signed[measure] else LEGEND_ABSOLUTE)
    show_pairs(col, result, measure)  # shapley-interactions: its top pairs (app/interaction_view.py)
    extras = result.extras.get(measure, {})
    gap = extras.get("completeness_gap")
    if gap is not None:
        used = f", {extras['steps_used'][0]} {extras['rule_used'][0]} steps" if "steps_used" in extras else ""
        col.caption(f"Completeness gap: {gap[0]:+.4f} (sum of the scores minus f(x) - f(baseline){used})")
    note = conservation_note(extras)
    if note:  # AttnLRP: how far the relevance adds up to the explained output
        col.caption(md(note[0].upper() + note[1:]))
    warning = completeness_warning(measure, extras)
    if warning:  # the scores do not add up: say so next to the heatmap, with the fix
        col.warning(warning)


b1, b2 = st.columns([1, 5])
explain_clicked = b1.button("Explain", type="primary")
if b2.button("Estimate the time", key="explain_estimate",
             help="What each chosen measure will cost on this text here, before running it: its planned forward and "
                  "backward passes at this machine's speed, timed on the text now (one pass each). Useful before IG or "
                  "the sampling measures on a prompted LM.") and measures:
    try:
        check_input(classifier, text, aux if paired else None)
        from engine.explain import estimate_seconds

        estimates = estimate_seconds(classifier, by_cost(measures), text, aux if paired else None, options)
        st.caption("Estimated time on this machine: " + "; ".join(
            f"{md(measure_label(m))}: {md(e.words())}" for m, e in estimates.items()))
    except EngineError as err:
        st.error(md(str(err)))
if explain_clicked or from_url:
    target = None if target_choice == "predicted" else classifier.classes.index(target_choice)
    order = by_cost(measures)  # cheapest first, so the first heatmap shows as soon as possible
    st.session_state.pop("explanation", None)
    st.session_state["explanation_stopped"] = None
    cancel = st.empty()
    cancel.button("Cancel", key="explain_cancel", help="Stops the computation; the measures done so far stay shown.")
    # any click (Cancel or any other widget) reruns the page, which stops the running computation
    bar = st.progress(0.0, text=f"explaining with {', '.join(order)} ..." if order else "predicting ...")
    streamed = st.empty()

    def show(measure: str, partial) -> None:
        done = len(partial.scores) + len(partial.errors)
        # kept at once: a cancel reruns the page, which then shows what was computed until then
        st.session_state["explanation"] = partial
        st.session_state["explanation_stopped"] = (done, len(order)) if done < len(order) else None
        bar.progress(done / max(len(order), 1), text=f"{measure} done ({done}/{len(order)})"
                     + (f"; computing {order[done]} ..." if done < len(order) else ""))
        units, level_scores = partial.level_scores(level, aggregation)
        with streamed.container():
            for name in partial.scores:
                _heatmap(st, partial, name, units, level_scores)

    def measures_done() -> int:
        partial = st.session_state.get("explanation")
        return 0 if partial is None else len(partial.scores) + len(partial.errors)

    try:
        check_input(classifier, text, aux if paired else None)  # an empty text is refused in words, before any work
        # served to a network, a visitor's request is bounded (app/limits.py): a refusal, or the measures done
        # before the cap, each with a message
        with admitted("Explain"), capped(classifier, "Explain"):
            result_ = explain_text(classifier, text, aux if paired else None, order, target, options=options,
                                   on_measure=show, on_steps=StepReporter(bar, order, measures_done))
        st.session_state["explanation"] = result_
        st.session_state["explanation_stopped"] = None
        streamed.empty()  # the full view below takes over (same order)
        bar.empty()
        cancel.empty()
        publish("explain", _view())
    except (EmptyInputError, PublicLimitError) as err:
        st.session_state.pop("explanation", None)
        streamed.empty()
        bar.empty()
        cancel.empty()
        st.warning(md(err))
elif st.session_state.get("explanation") is not None and st.session_state.get("explain_url_applied", {}).get("text") == text:
    publish("explain", _view())  # a new level or word score keeps the URL in step with the view

result = st.session_state.get("explanation")
if result is None and stopped_words() and not explain_clicked:  # stopped before any measure was done
    st.info(f"Stopped: {md(stopped_words())}; press Explain to compute again.")
if result is not None:
    probs = result.probabilities
    predicted = int(probs.argmax())
    st.subheader(f"Prediction: {md(classifier.classes[predicted])} ({probs[predicted]:.1%})"
                 + (f" · gold label: {md(gold)}" if gold is not None and result.text == text else ""))
    st.dataframe(pd.DataFrame({"class": classifier.classes, "probability": probs}), hide_index=True)
    units, level_scores = result.level_scores(level, aggregation)
    shown = {"token": "maskable tokens", "word": "words", "sentence": "sentences"}[level]
    st.caption(f"Explaining class **{md(classifier.classes[result.target])}** ({result.target_source}); "
               f"{len(units)} {shown}" + (f" from {len(result.tokens)} tokens, each scored by the **{aggregation}** of its "
                                         "tokens' scores" if level != "token" else "")
               + "; scores use the logit of that class. The address bar holds this view: copy it to share it.")
    for message in check_batch(classifier, result.batch).warnings():  # mostly unknown tokens; truncated
        st.warning(message, icon=":material/warning:")
    for measure, why in result.errors.items():
        st.warning(f"{md(measure)}: {md(why)}")
    if not result.scores and not result.errors:
        st.text(" ".join(u.text for u in units))  # the units as text when no measure was chosen
    stopped = st.session_state.get("explanation_stopped")
    if stopped:
        ig_spent = stopped_words()
        st.info(f"Stopped after {stopped[0]} of {stopped[1]} measures" + (f" ({md(ig_spent)})" if ig_spent else "")
                + "; press Explain to compute them all.")
    names = list(result.scores)
    # how each shown measure fared on this model (its benchmark run's RACU rank, its own report card): app/trust.py
    evidence = evidence_for(sidebar_model()) if names else ()
    for row in range(0, len(names), 2):
        cols = st.columns(2)
        for col, measure in zip(cols, names[row : row + 2]):
            with col:
                _heatmap(col, result, measure, units, level_scores)
                render_standing(col, measure, evidence)
    if compare_id and result.text == text:
        try:
            second, second_result, notes = second_explanation(compare_id, classifier.classes, result.text,
                                                              aux if paired else None, names, target_choice)
            render_side_by_side(classifier, result, second, second_result, notes, level, aggregation, _heatmap)
        except (EngineError, PublicLimitError) as err:
            st.warning(f"{md(compare_id)}: {md(err)}")
    if names:
        st.subheader("Take it away")
        record = explanation_record(result, classifier, level=level, aggregation=aggregation,
                                    command=f"dashboard Explain page ({classifier.id})")
        stem = f"explanation-{classifier.id}-{level}"
        labels = {"json": "JSON", "csv": "CSV", "html": "HTML heatmap", "latex": "LaTeX figure"}
        for col, fmt in zip(st.columns(len(FORMATS)), FORMATS):
            col.download_button(f"Download {labels[fmt]}", write(record, fmt).encode("utf-8"), file_name=f"{stem}.{SUFFIX[fmt]}",
                                mime=MIME[fmt], key=f"explain_download_{fmt}", width="stretch", on_click="ignore")
        st.caption("JSON and CSV: tokens, words and sentences with every measure's scores, the prediction and the "
                   "provenance (model, weights hash, code version). HTML: this heatmap as a page of its own. LaTeX: "
                   "\\colorbox lines for a paper figure (needs \\usepackage{xcolor}).")
        h1, h2 = st.columns([1, 2])
        handoff = h1.selectbox("Measure to mask by", names, key="explain_handoff_measure")
        # the other shown measures go along: Masking draws their curves on the same input, against the random band
        compare = ",".join(m for m in names if m != handoff)
        if h2.button("Mask this text step by step", key="explain_to_masking", icon=":material/layers_clear:",
                     help="Masks the text by the chosen measure, and compares the other measures shown here on it."):
            st.switch_page(MASKING_PAGE, query_params={k: v for k, v in {
                "model": classifier.id, "text": result.text, "aux": aux if paired else None, "measure": handoff,
                "compare": compare, "target": target_choice, "level": level}.items() if v})
        st.subheader("Scores" + (f" per {level}" if level != "token" else ""))
        if level == "token":
            table = result.table()
        else:
            table = pd.DataFrame({"position": range(len(units)), level: [u.text for u in units], **level_scores})
        st.dataframe(table, hide_index=True, key="explain_table")
        if len(names) > 1:
            st.subheader("Agreement between measures (Spearman rank correlation)")
            agreement = result.agreement()
            # the heatmaps' signed scale (app/palette.py): orange +1 (agree), purple -1
            chart(px.imshow(agreement, zmin=-1, zmax=1, color_continuous_scale=palette.SIGNED_SCALE, text_auto=".2f",
                            title="Spearman rank correlation between the measures' scores (1: same order)"),
                  f"agreement-{classifier.id}", key="explain_agreement_chart")
            with st.expander("The disagreement problem (Krishna et al. 2022): agreement at the top tokens"):
                top = st.slider("Top share of the tokens", 0.05, 1.0, 0.2, 0.05, key="explain_agreement_top",
                                help="k = this share of the input's tokens (at least one). Feature agreement: the "
                                     "share of the top-k that both measures pick; rank: same tokens at the same "
                                     "ranks; sign: same tokens with the same sign; signed rank: both. 1 = full "
                                     "agreement.")
                pairs = agreement_matrix({m: [result.scores[m]] for m in names}, top_fraction=float(top))
                table_view(pairs.pivot_table(index=["measure_a", "measure_b"], columns="metric", values="mean"),
                           f"agreement-top-{classifier.id}", key="explain_agreement_table")

# A prompted language model can also be asked to explain itself (counterfactual, attribution, redaction).
from app.self_explain_view import self_explanation_section  # noqa: E402

self_explanation_section(classifier, text)
