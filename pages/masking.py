"""Step-by-step masking: recursively mask the typed input by a measure, and watch the probability of
the explained class fall (or not) against random masking, with MaSF's in-distribution p-value; every
step at a glance, the curve data to download, and the view in the URL."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app import palette
from app.figure_export import chart
from app.heatmap import LEGEND_ABSOLUTE, LEGEND_SIGNED, token_heatmap_html
from app.input_check import check_input
from app.limits import admitted, capped
from app.progress import ThrottledProgress
from app.results_cache import state_of
from app.share import arrived_from_url, publish, split_list
from app.shared import note_if_not_masked_fine_tuned, offered_measures, selected_classifier
from app.text import md
from engine import PACKAGED_DATASETS, EngineError, dataset_names, load_or_fit_masf, mask_single_input
from engine.csv_safe import frame_to_csv
from engine.faithfulness.shipped_ranking import first_measure, ranked_measures, stored_rows_for
from engine.importance import MEASURES
from engine.importance.levels import LEVELS, aggregate
from engine.ood import MASF_FIT_VERSION, calibration_key, stored_calibrations
from engine.results import ResultsStore
from engine.runtime import code_version

MASF_AXIS_TITLE = "MaSF p-value (log)"
LEVEL_LABELS = {"token": "tokens (word pieces)", "word": "words", "sentence": "sentences"}
# Ratio mode masks a share of the input's tokens per step (FMM); count mode one token per step, up to 10.
SCHEDULES = {"10% of the tokens": ("ratios", 0.1), "20% of the tokens": ("ratios", 0.2),
             "25% of the tokens": ("ratios", 0.25), "1 token (up to 10)": ("counts", 10)}



@st.cache_data(show_spinner="Reading which measures the stored results rank best ...", max_entries=16)
def _ranked(root: str, state: str, model_id: str, base_model: str | None, dataset: str | None,
            strategy: str | None) -> list[str]:
    """The measures the results store ranks most faithful for this checkpoint (or its family), best first; kept per
    state of the store (app.results_cache.state_of is in the key)."""
    return ranked_measures(stored_rows_for(ResultsStore(root), model_id, dataset), model_id, base_model, dataset, strategy)


def _opening_measure(classifier, offered: list[str]) -> str | None:
    """The measure the page opens on: the one the shipped results rank best for this model (the first measure in
    the list, attention-cls-last, sits on random masking and reads "no better than random"), else loo-sign."""
    store = ResultsStore()
    meta = classifier.meta
    ranked = _ranked(str(store.root), state_of(store), classifier.id, meta.base_model, meta.dataset, meta.strategy)
    return first_measure(offered, ranked)


st.title("Step-by-step masking")
classifier = selected_classifier()
if classifier is None:
    st.stop()

paired = classifier.meta.paired
offered, not_here = offered_measures(classifier)
target_options = ["predicted"] + list(classifier.classes)
from_url = arrived_from_url("masking", {
    "text": ("masking_text", str), "aux": ("masking_aux", str),
    "measure": ("masking_measure", lambda v: v if v in offered else None),
    "target": ("masking_target", lambda v: v if v in target_options else None),
    "level": ("masking_level", lambda v: v if v in LEVELS else None),
    "step": ("masking_step", lambda v: v if v in SCHEDULES else None),
    "words": ("masking_whole_words", lambda v: v == "1"),
    # the other measures Explain showed (or a shared view's): drawn on the same input against the random band
    "compare": ("masking_compare", lambda v: [m for m in split_list(v) if m in offered]),
})
if st.session_state.get("masking_measure") not in offered:  # first visit, or a model without the measure held
    st.session_state["masking_measure"] = _opening_measure(classifier, offered)
if "masking_text" not in st.session_state:
    st.session_state["masking_text"] = st.session_state.get("explain_text", "")

text = st.text_area("Text", height=100, max_chars=20000, key="masking_text")
aux = st.text_input("Question (never masked)", key="masking_aux") if paired else None
c1, c2, c3, c4 = st.columns(4)
measure = c1.selectbox("Measure", offered, key="masking_measure",
                       help="Only the measures this model supports" + (f" (not offered: {not_here})." if not_here else "."))
step_choice = c2.selectbox("Mask per step", list(SCHEDULES), key="masking_step")
mode, size = SCHEDULES[step_choice]
n_seeds = c3.number_input("Random baseline seeds", 2, 20, 5, key="masking_seeds")
target_choice = c4.selectbox("Explain class", target_options, key="masking_target")
compare_options = [m for m in offered if m != measure]
# a kept choice (another model's measures, or the measure now masked by) is filtered before the widget is drawn
st.session_state["masking_compare"] = [m for m in st.session_state.get("masking_compare", []) if m in compare_options]
compare = st.multiselect("Compare with", compare_options, key="masking_compare",
                         help="Other measures, each masking the same input by its own ranking, drawn beside the "
                              "chosen one against the random band (their steps are not shown one by one).")
st.session_state.setdefault("masking_level", "token")
w1, w2 = st.columns([3, 2])
whole_words = w2.checkbox("Mask whole words", key="masking_whole_words",
                          help="Each step masks every piece of its chosen words at once, and the share or count per "
                               "step counts words; a word ranks by the sum of its pieces' scores (the random baseline "
                               "by one draw per word). Each step still gets its MaSF p-value.")
level = w1.segmented_control("Show", LEVELS, format_func=LEVEL_LABELS.get, key="masking_level",
                             help="Masking works on word pieces; at word or sentence level a unit is struck through "
                                  "once any of its pieces is masked, and coloured by the sum of its pieces' scores.") or "token"


note_if_not_masked_fine_tuned(classifier)
# MaSF is calibrated on the model's validation split; a model fine-tuned elsewhere records none: the user names one
# (every time: a fit stored for one dataset is never used for another).
calibration = classifier.meta.dataset
if calibration is None:
    # Datasets with a stored fit first, then the user's own: a model fine-tuned elsewhere is most likely paired with them.
    fitted = {k.dataset for k in stored_calibrations(classifier) if k.fit_version == MASF_FIT_VERSION}
    names = sorted(dataset_names(), key=lambda n: (n not in fitted, n in PACKAGED_DATASETS))
    calibration = st.selectbox("Calibrate MaSF on", names, key="masking_calibration",
                               help="This model was fine-tuned elsewhere: MaSF needs in-distribution examples of its "
                                    "task to compare masked inputs with (the validation split of this dataset).")


@st.cache_resource(show_spinner="Fitting MaSF on the validation split (once per model and calibration data) ...")
def _masf_for_key(model_id: str, folder: str, key_digest: str, calibration: str | None):
    return load_or_fit_masf(classifier, calibration)


def masf_for(model_id: str, calibration: str | None):
    """The model's MaSF for `calibration`, kept for the process under what calibrates it (the key's digest covers
    the calibration rows themselves) and the model's folder: a name alone is not the data."""
    key = calibration_key(classifier, calibration)
    return _masf_for_key(model_id, str(classifier.artifacts_dir), key.digest, calibration)


def _view() -> dict:
    return {"model": classifier.id, "text": text, "aux": aux if paired else None, "measure": measure,
            "compare": ",".join(compare), "target": target_choice, "level": level, "step": step_choice, "words": "1" if whole_words else None}


run = st.button("Mask step by step", type="primary", key="masking_run")
if run or from_url:
    # any click reruns the page, which stops the running computation; the button goes once the run ends
    cancel = st.empty()
    cancel.button("Cancel", key="masking_cancel")
    bar = ThrottledProgress(0.0, text="starting ...")

    def report(name: str, done: int, total: int) -> None:
        bar.update(done / max(total, 1), f"{name}: {done}/{total}")

    try:
        # the input first: an empty text is refused in words before MaSF is fitted (a fit can take minutes)
        checked = check_input(classifier, text, aux if paired else None)
        if mode == "counts":
            levels = {"counts": list(range(0, size + 1))}
        else:
            levels = {"ratios": list(np.round(np.arange(0, 1 + 1e-9, size), 4))}
        target = None if target_choice == "predicted" else classifier.classes.index(target_choice)
        # served to a network, a visitor's request is bounded (app/limits.py); MaSF's fit, once per model and
        # calibration data, is outside the per-request cap (every later request reuses it)
        with admitted("Step-by-step masking"):
            masf = masf_for(classifier.id, calibration)
            with capped(classifier, "Step-by-step masking"):
                st.session_state["masking_result"] = main = mask_single_input(
                    classifier, text, measure, aux if paired else None, random_seeds=range(int(n_seeds)),
                    masf=masf, progress=report, target=target, whole_words=whole_words, **levels)
                # each compared measure on the same input and class, on the same levels; no random seeds of its own
                # (the band above is shared) and no p-values (only the chosen measure's steps are shown)
                explained = int(main.measure.target[0])
                st.session_state["masking_compared"] = {
                    other: mask_single_input(classifier, text, other, aux if paired else None, random_seeds=(),
                                             progress=report, target=explained, whole_words=whole_words,
                                             **levels).curves()["measure"]
                    for other in compare}
        # What calibrated these p-values, kept with the result (the selection may change before it is shown again),
        # and what the reader should know of the input (truncated, mostly unknown tokens).
        st.session_state["masking_masf_calibration"] = masf.provenance["calibration"]
        st.session_state["masking_input_warnings"] = checked.warnings()
        bar.update(1.0, "done")
        publish("masking", _view())
    except EngineError as err:  # an empty input, or a MaSF that cannot be calibrated (too few inputs): a message
        st.session_state.pop("masking_result", None)
        st.session_state.pop("masking_compared", None)
        bar.empty()  # a bar left at "starting ..." reads as still running
        st.warning(md(err))
    finally:
        cancel.empty()  # nothing left to cancel
elif st.session_state.get("masking_result") is not None and st.session_state.get("masking_url_applied", {}).get("text") == text:
    publish("masking", _view())  # another level keeps the URL in step with the view

result = st.session_state.get("masking_result")
if result is not None:
    steps = result.measure.steps
    target = classifier.classes[int(result.measure.target[0])]
    for message in st.session_state.get("masking_input_warnings", []):
        st.warning(message, icon=":material/warning:")
    units = result.units(level)

    def unit_view(step: int) -> tuple[list[str], np.ndarray | None, list[bool]]:
        """The units' texts, their scores choosing the next step (summed over pieces), and which are masked."""
        flags = result.masked_flags(step)
        scores = result.step_scores(step)
        unit_scores = None if scores is None else aggregate(scores, units, "sum")
        return [u.text for u in units], unit_scores, [any(flags[i] for i in u.tokens) for u in units]

    # a signed measure (LOO, IG, x-grad-sign) is drawn on the signed scale: orange supports, purple against
    signed = bool(getattr(MEASURES.get(result.measure.measure), "signed", False))
    index = st.slider("Step", 0, len(steps) - 1, 0, key="masking_slider",
                      help="0 = nothing masked; each step masks the measure's top tokens of the partly masked input")
    current = steps[index]
    m1, m2, m3 = st.columns(3)
    counted = result.counts is not None
    asked = f"{result.counts[index]} asked" if counted else f"{result.ratios[index]:.0%}"
    if result.whole_words:
        words_masked = sum(all(result.masked_flags(index)[i] for i in u.tokens) for u in result.units("word"))
        m1.metric("Words masked", f"{words_masked} / {len(result.units('word'))}",
                  f"{asked} · {int(current.n_masked[0])} of {len(result.tokens)} tokens")
    else:
        m1.metric("Tokens masked", f"{int(current.n_masked[0])} / {len(result.tokens)}", asked)
    m2.metric(f"p({md(target)})", f"{float(current.probability[0]):.3f}",
              f"{float(current.probability[0]) - float(steps[0].probability[0]):+.3f}")
    p_value = float(current.p_value[0]) if current.p_value is not None else float("nan")
    m3.metric("MaSF p-value", f"{p_value:.3f}", "in distribution" if p_value >= 0.05 else "out of distribution",
              delta_color="off")
    st.caption("MaSF p-values calibrated on " + st.session_state.get("masking_masf_calibration", "?"))
    texts, scores, masked = unit_view(index)
    st.html(token_heatmap_html(texts, scores, signed=signed, masked=masked,
                               title=f"step {index}: struck-through {level}s are [MASK]; colour = {result.measure.measure} "
                                     "scores that choose the next step's tokens"))
    st.caption(LEGEND_SIGNED if signed else LEGEND_ABSOLUTE)
    curves = result.curves()
    x = list(result.levels)
    x_title, x_format = ("tokens masked (k)", None) if counted else ("fraction masked", ".0%")
    # compared measures (Explain's other shown ones, or "Compare with") of this result: same input, class and levels
    compared = {m: c for m, c in (st.session_state.get("masking_compared") or {}).items() if len(c) == len(x)}
    drawn = {result.measure.measure: curves["measure"], **compared}
    colours = palette.measure_colours([palette.RANDOM, *drawn])
    fig = go.Figure()
    # the random baseline is a baseline, grey (app/palette.py): its spread over the seeds a band, its mean dotted
    fig.add_trace(go.Scatter(x=x + x[::-1], y=list(curves["random"].max(0)) + list(curves["random"].min(0))[::-1],
                             fill="toself", line={"width": 0}, fillcolor=palette.band(palette.BASELINE, 0.25),
                             name=f"random (min-max of {len(result.random)} seeds)", hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=curves["random"].mean(0), name="random (mean)",
                             line=palette.line_style(palette.RANDOM, palette.BASELINE, width=2)))
    for name, curve in drawn.items():
        main_line = name == result.measure.measure
        fig.add_trace(go.Scatter(x=x, y=curve, name=name, mode="lines+markers" if main_line else "lines",
                                 line=palette.line_style(name, colours[name], width=3 if main_line else 2)))
    fig.add_vline(x=x[index], line_dash="dot")
    fig.update_layout(title=f"p({target}) as tokens are masked" + (" (lower sooner: more faithful)" if compared else ""),
                      xaxis_title=x_title, yaxis_title=f"p({target})", xaxis_tickformat=x_format, height=380)
    chart(fig, f"masking-{classifier.id}-{result.measure.measure}", key="masking_curve_chart")
    if compared:
        # the finding in a sentence: the mean probability over the levels (the area under the curve, up to the x
        # scale) is lowest for the measure whose top tokens the prediction rests on most
        area = {name: float(np.mean(curve)) for name, curve in drawn.items()}
        best = min(area, key=area.get)
        st.caption(f"{len(drawn)} measures on this input, each masking by its own ranking. Lowest mean p({md(target)}) "
                   f"over the levels: **{md(best)}** ({area[best]:.3f}; random {float(curves['random'].mean()):.3f}); "
                   "below the grey band: its top tokens matter more than random ones.")
    if steps[0].p_value is not None:
        pfig = go.Figure()
        pfig.add_trace(go.Scatter(x=x, y=[float(s.p_value[0]) for s in steps], name=result.measure.measure, mode="lines+markers"))
        pfig.add_hline(y=0.05, line_dash="dash")
        # placed by hand: on a log axis, add_hline's own label lands at 10^0.05 (plotly reads its y as a log)
        pfig.add_annotation(x=1, xref="paper", xanchor="right", y=np.log10(0.05), yref="y", yanchor="top",
                            text="below 0.05: out of distribution", showarrow=False, font={"size": 11})
        # A log axis with plotly's default ticks reads "2, 1, 5, 2, 1": name the decades and the 0.05 line. The
        # axis title fits the chart's height (a longer one is cut at both ends); the line's label says the rest.
        ticks = [0.001, 0.01, 0.05, 0.1, 0.5, 1.0]
        pfig.update_layout(xaxis_title=x_title, yaxis_title=MASF_AXIS_TITLE,
                           yaxis_type="log", yaxis_tickvals=ticks, yaxis_ticktext=[f"{t:g}" for t in ticks],
                           yaxis_range=[-3.2, 0.05], height=300, xaxis_tickformat=x_format)
        chart(pfig, f"masking-masf-{classifier.id}-{result.measure.measure}", key="masking_masf_chart")

    st.subheader("Every step at a glance")
    st.caption(f"Each row is one step: struck-through, outlined {level}s are [MASK]; colour = the {result.measure.measure} "
               "scores that choose the next step's tokens.")
    rows = []
    for i, step in enumerate(steps):
        texts, scores, masked = unit_view(i)
        p = f" · MaSF p {float(step.p_value[0]):.3f}" if step.p_value is not None else ""
        level_text = f"k={result.counts[i]}" if counted else f"{result.ratios[i]:.0%}"
        rows.append(token_heatmap_html(texts, scores, signed=signed, masked=masked, scale_bar=False,
                                       title=f"step {i} · {level_text} · {int(step.n_masked[0])} masked · "
                                             f"p({target}) {float(step.probability[0]):.3f}{p}"))
    st.html('<div class="masking-steps">' + "".join(rows) + "</div>")
    # the curve rows with what they came from, so a downloaded file still says which model and code made it
    curve_csv = frame_to_csv(result.curve_table().assign(
        **{f"p_target_{name}": curve for name, curve in compared.items()}, model_id=classifier.id,
        code_version=code_version(), masf_calibration=st.session_state.get("masking_masf_calibration"))).encode("utf-8")
    st.download_button("Download the curve data (CSV)", curve_csv,
                        file_name=f"masking-{classifier.id}-{result.measure.measure}.csv", mime="text/csv",
                        key="masking_download", on_click="ignore")
