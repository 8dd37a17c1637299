"""The dashboard frame and its first pages, driven by Streamlit's AppTest (no browser)."""
from __future__ import annotations

from pathlib import Path

from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from engine.models import save_classifier

MAIN = str(Path(__file__).resolve().parents[2] / "app" / "main.py")


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def results_store(tmp_path, monkeypatch):
    """A fresh results store under tmp_path that the dashboard reads (ENGINE_RESULTS_DIR points at it)."""
    from engine.results import ResultsStore

    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    return ResultsStore(tmp_path / "results")


def _explain_page(at: AppTest) -> AppTest:
    """The Explain page of a fresh session (the app opens on the home page)."""
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "explain.py"))
    return _run(at)


def test_empty_models_cache_offers_to_build_a_model(models_cache):
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    assert any("No model" in w.value for w in at.sidebar.warning)
    assert any("Models" in i.value for i in at.info), "the page points to where a model is built"


def test_explain_predicts_and_shows_user_text_as_text(cache_with_toy, toy_classifier):
    """Markup in a review is shown as its own text: every heatmap shows each of the engine's tokens of the
    review, in order, HTML-escaped (so `<script>` reads as text and never becomes an element), and no
    markdown carries it."""
    import html

    from engine.explain import explain_text

    at = _explain_page(AppTest.from_file(MAIN, default_timeout=120))
    assert at.sidebar.selectbox[0].value == "toy-app"
    hostile = 'the movie was great <script>alert(1)</script> <img src=x onerror=alert(2)> **bold**'
    at.text_area[0].input(hostile)
    at.button[0].click()
    _run(at)
    assert at.subheader[0].value.startswith("Prediction: ")
    heatmaps = [h.proto.body for h in at.get("html")]
    assert len(heatmaps) == len(at.multiselect(key="explain_measures").value) == 4, "one heatmap per selected measure"
    tokens = explain_text(toy_classifier, hostile, measures=[]).tokens
    assert {"<", "script", ">"} <= set(tokens), tokens  # the markup is explained (the toy model keeps 14 tokens)
    shown = [f">{html.escape(t, quote=True)}</span>" for t in tokens]
    for h in heatmaps:
        at_ = 0
        for piece in shown:  # each token, escaped, after the one before it
            at_ = h.find(piece, at_)
            assert at_ >= 0, f"{piece!r} is not shown (in order) in {h[:300]}"
        assert "<script" not in h and "<img" not in h
    assert all("<script" not in m.value and "alert(" not in m.value for m in at.markdown)


def test_explain_empty_text_is_a_message_not_a_crash(cache_with_toy):
    at = _explain_page(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input("   ")
    at.button[0].click()
    _run(at)
    assert any("empty" in w.value for w in at.warning)


def test_long_text_is_truncated_visibly(cache_with_toy):
    at = _explain_page(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input("good fun " * 2000)
    at.button[0].click()
    _run(at)
    assert any("truncated" in w.value for w in at.warning)


MIXED_SCRIPTS = "a wonderful film 😀🎬 — 素晴らしい映画 — фильм отличный — فيلم رائع — ταινία"


def test_emoji_and_non_latin_scripts_are_explained_not_crashed(cache_with_toy):
    at = _explain_page(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input(MIXED_SCRIPTS)
    at.button[0].click()
    _run(at)
    assert at.subheader[0].value.startswith("Prediction: ")
    heatmaps = [h.proto.body for h in at.get("html")]
    assert len(heatmaps) == 4
    assert all("wonderful" in h for h in heatmaps)
    # the tokenizer knows no emoji: they become [UNK] and are shown, never dropped silently
    assert all("фильм" in h or "[UNK]" in h for h in heatmaps), heatmaps[0][:2000]


def test_masking_page_takes_emoji_and_non_latin_scripts(cache_with_toy):
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "masking.py"))
    _run(at)
    at.text_area(key="masking_text").input(MIXED_SCRIPTS)
    at.selectbox(key="masking_measure").set_value("grad-l2")
    at.button(key="masking_run").click()
    _run(at)
    assert at.metric[0].value.startswith("0 /")
    at.slider(key="masking_slider").set_value(at.slider(key="masking_slider").max)
    _run(at)
    assert "line-through" in at.get("html")[0].proto.body


def test_masking_slider_changes_the_masked_text_and_p_value(cache_with_toy):
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "masking.py"))
    _run(at)
    at.text_area(key="masking_text").input("the movie was really good and fun and lovely")
    at.selectbox(key="masking_measure").set_value("loo-sign")
    at.button(key="masking_run").click()
    _run(at)
    first = ([m.value for m in at.metric], at.get("html")[0].proto.body)
    assert first[0][0].startswith("0 /")
    at.slider(key="masking_slider").set_value(5)
    _run(at)
    second = ([m.value for m in at.metric], at.get("html")[0].proto.body)
    assert second[0][0] != first[0][0], "the slider moves to another step"
    assert second[1].count("line-through") > first[1].count("line-through"), "more tokens are shown masked"
    assert second[0][2] != first[0][2], "the p-value is the step's own"


def test_masking_page_count_mode_masks_one_token_per_step(cache_with_toy):
    """Count mode on one input: step k has exactly k tokens masked (up to the input's length), and the slider's
    metric says how many were asked for."""
    at = _run(AppTest.from_file(MAIN, default_timeout=300))
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "masking.py"))
    _run(at)
    text = "the movie was good and fun"
    at.text_area(key="masking_text").input(text)
    at.selectbox(key="masking_measure").set_value("grad-l2")
    at.selectbox(key="masking_step").set_value("1 token (up to 10)")
    at.button(key="masking_run").click()
    _run(at)
    result = at.session_state["masking_result"]
    n = len(result.tokens)
    assert result.counts == list(range(11)) and result.ratios is None
    assert [int(s.n_masked[0]) for s in result.measure.steps] == [min(k, n) for k in range(11)]
    at.slider(key="masking_slider").set_value(3)
    _run(at)
    tokens_masked = next(m for m in at.metric if m.label == "Tokens masked")
    assert tokens_masked.value == f"3 / {n}" and "3 asked" in tokens_masked.proto.delta


def test_models_page_lists_checkpoints(cache_with_toy):
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "models.py"))
    _run(at)
    assert at.title[0].value == "Models"
    assert "toy-app" in at.dataframe[0].value["id"].tolist()
    # The dataset filter hides what it excludes, and says so when nothing is left.
    at.multiselect(key="models_datasets").set_value([])
    _run(at)
    assert not at.dataframe
    assert any("No checkpoint matches" in info.value for info in at.info)


def _tidy(measure, seed, drop):
    import pandas as pd

    return pd.DataFrame([{"model": f"tiny-rt-masked-s{seed}", "seed": seed, "dataset": "rt", "measure": measure,
                          "strategy": "masked", "step": i, "ratio": i / 10, "metric": "accuracy",
                          "value": 0.8 - drop * i / 10, "p_value": 0.4, "p_below_005": 0.05, "mean_probability": 0.7,
                          "base_model": "tiny"} for i in range(11)])


def test_benchmarks_page_filters_and_tabulates(models_cache, tmp_path, monkeypatch):
    store = results_store(tmp_path, monkeypatch)
    for seed in range(3):
        store.write_cell("demo", {"m": "random", "s": seed}, _tidy("random", seed, 0.2 + 0.01 * seed), {})
        store.write_cell("demo", {"m": "loo-sign", "s": seed}, _tidy("loo-sign", seed, 0.35 + 0.01 * seed), {})
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    table = at.dataframe[0].value
    assert list(table["measure"])[0] == "loo-sign", "the more faithful measure tops the RACU table"
    assert table.loc[table["measure"] == "random", "racu_pct"].iloc[0] == 0
    at.multiselect(key="bench_measures").set_value(["random"])
    _run(at)
    assert list(at.dataframe[0].value["measure"]) == ["random"], "the measure filter narrows the table"
    assert any("Published" in c.value for c in at.caption)
    # Another run starts from all of its measures, not from the previous run's narrowed choice.
    for seed in range(3):
        store.write_cell("second", {"m": "random", "s": seed}, _tidy("random", seed, 0.2), {})
        store.write_cell("second", {"m": "ig-sign", "s": seed}, _tidy("ig-sign", seed, 0.3), {})
    _run(at)  # the page lists the new run
    at.selectbox(key="bench_run").set_value("second")
    _run(at)
    assert set(at.dataframe[0].value["measure"]) == {"random", "ig-sign"}


def test_benchmarks_page_compares_two_measures_paired_over_seeds(models_cache, tmp_path, monkeypatch):
    """The paired comparison shows the mean RACU difference of A - B over the seeds, and says the smallest p-value
    three seeds can give (0.25), whatever the difference."""
    from engine.faithfulness.metrics import racu
    store = results_store(tmp_path, monkeypatch)
    drops = {"random": 0.2, "loo-sign": 0.5, "grad-l2": 0.3}
    for seed in range(3):
        for measure, drop in drops.items():
            store.write_cell("pair", {"m": measure, "s": seed}, _tidy(measure, seed, drop + 0.01 * seed), {})
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    at.selectbox(key="bench_pair_a").set_value("loo-sign")
    at.selectbox(key="bench_pair_b").set_value("grad-l2")
    _run(at)
    x = [i / 10 for i in range(11)]

    def curve(drop):
        return [0.8 - drop * r for r in x]

    expected = sum(100 * (racu(x, curve(0.5 + 0.01 * s), curve(0.2 + 0.01 * s)) - racu(x, curve(0.3 + 0.01 * s), curve(0.2 + 0.01 * s)))
                   for s in range(3)) / 3
    shown = next(m for m in at.metric if m.label == "RACU of loo-sign - grad-l2")
    assert shown.value == f"{expected:+.1f} points"
    assert any("cannot go below 0.25 with 3 seeds" in c.value for c in at.caption)


def test_benchmarks_page_shows_a_beam_subset_apart_from_the_whole_split(models_cache, tmp_path, monkeypatch):
    store = results_store(tmp_path, monkeypatch)
    for seed in range(2):
        for measure, n, drop in (("random", 100, 0.2), ("loo-sign", 100, 0.35), ("random", 20, 0.1), ("beam", 20, 0.4)):
            store.write_cell("mixed", {"m": measure, "s": seed, "n": n}, _tidy(measure, seed, drop).assign(n_examples=n), {})
    for measure, drop in (("random", 0.2), ("loo-sign", 0.3)):  # the whole split, one seed so far
        store.write_cell("mixed", {"m": measure, "s": 0, "n": 854}, _tidy(measure, 0, drop).assign(n_examples=854), {})
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    assert len(at.radio(key="bench_examples").options) == 3
    assert at.radio(key="bench_examples").value == 100, "the largest set with the most seeds is shown first"
    assert set(at.dataframe[0].value["measure"]) == {"random", "loo-sign"}
    at.radio(key="bench_examples").set_value(20)
    _run(at)
    table = at.dataframe[0].value.set_index("measure")
    assert set(table.index) == {"random", "beam"}
    # beam is compared with the random curve of its own 20 examples (random against itself gives 0).
    assert table.loc["random", "racu_pct"] == 0 and table.loc["beam", "racu_pct"] > 0


def test_benchmarks_page_switches_method_and_compares_roar_with_recursive_masking(models_cache, tmp_path, monkeypatch):
    store = results_store(tmp_path, monkeypatch)
    for seed in range(2):
        store.write_cell("masking", {"m": "random", "s": seed}, _tidy("random", seed, 0.2), {})
        store.write_cell("masking", {"m": "loo-sign", "s": seed}, _tidy("loo-sign", seed, 0.35), {})
        for method, drop in (("roar", 0.25), ("recursive-roar", 0.4)):
            for measure, d in (("random", 0.2), ("loo-sign", drop)):
                store.write_cell("masking", {"m": measure, "s": seed, "method": method},
                                 _tidy(measure, seed, d).assign(method=method, p_value=float("nan"),
                                                                p_below_005=float("nan")), {})
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    radio = at.radio(key="bench_method")
    assert set(radio.options) == {"recursive masking", "roar", "recursive-roar"}
    radio.set_value("roar")
    _run(at)
    roar_racu = at.dataframe[0].value.set_index("measure").loc["loo-sign", "racu_pct"]
    at.radio(key="bench_method").set_value("recursive-roar")
    _run(at)
    rroar_racu = at.dataframe[0].value.set_index("measure").loc["loo-sign", "racu_pct"]
    assert rroar_racu > roar_racu > 0, "each method's table is computed from its own curves"
    at.segmented_control(key="bench_part").set_value("masf")
    _run(at)
    assert not any("MaSF" in h.value for h in at.subheader), "retrained curves have no MaSF p-values to show"
    assert any("no MaSF p-values" in i.value for i in at.info), "the MaSF part says why it shows nothing"
    at.segmented_control(key="bench_part").set_value("roar")
    _run(at)
    assert any("ROAR vs Recursive ROAR" in h.value for h in at.subheader)
    assert at.selectbox(key="bench_compare_measure").value == "loo-sign"


def test_benchmarks_page_keeps_count_schedules_and_fine_tuning_strategies_apart(models_cache, tmp_path, monkeypatch):
    """A run with ROAR by quantile and by count, and checkpoints fine-tuned masked and plain: one schedule and one
    strategy at a time, the count view on an axis of k tokens, and no curve pooled across them."""
    import json

    store = results_store(tmp_path, monkeypatch)
    for seed in range(2):
        for measure, drop in (("random", 0.2), ("loo-sign", 0.35)):
            quantile = _tidy(measure, seed, drop).assign(method="roar", schedule="quantile")
            store.write_cell("roar", {"m": measure, "s": seed, "q": 1}, quantile, {})
            store.write_cell("roar", {"m": measure, "s": seed, "q": 1, "plain": 1},
                             quantile.assign(strategy="plain", value=quantile["value"] - 0.1), {})
            counted = _tidy(measure, seed, drop + 0.1).assign(method="roar", schedule="count 0..10", count=range(11))
            store.write_cell("roar", {"m": measure, "s": seed, "c": 1}, counted, {})
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "benchmarks.py"))
    _run(at)
    assert set(at.radio(key="bench_schedule").options) == {"count 0..10", "quantile"}
    at.radio(key="bench_schedule").set_value("quantile")
    _run(at)
    assert set(at.radio(key="bench_strategy").options) == {"masked", "plain"}
    table = at.dataframe[0].value
    assert len(table) == 2 and set(table["strategy"]) == {at.radio(key="bench_strategy").value}, \
        "one fine-tuning strategy per table, not both pooled"
    at.radio(key="bench_schedule").set_value("count 0..10")
    _run(at)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["xaxis"]["title"]["text"].startswith("tokens masked per input (k)")
    assert max(_plotted_x(t).max() for t in spec["data"] if "x" in t) == 10, "the count view plots k, not k / k_max"
    table = at.dataframe[0].value.set_index("measure")
    # The two seeds here are identical curves: the table says its interval is degenerate rather than calling it BCa.
    assert table.loc["loo-sign", "racu_pct"] > 0 and table.loc["loo-sign", "racu_ci"] == "degenerate: all equal"


def _plotted_x(trace: dict):
    """A trace's x values from Plotly's JSON (plain lists, or typed arrays as base64 `bdata`)."""
    import base64

    import numpy as np

    x = trace["x"]
    if isinstance(x, dict):
        return np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
    return np.asarray(x, dtype=float)


def test_attention_page_shows_the_diagnostics_and_an_inputs_attention(models_cache, tmp_path, monkeypatch):
    import json

    import pandas as pd

    from engine.models import TrainConfig, train_classifier

    bilstm = train_classifier(TrainConfig(base_model="bilstm", dataset="toy", strategy="plain", epochs=2, lr=3e-3, batch_size=16),
                              show_progress_bar=False)
    save_classifier(bilstm, "bilstm-toy-base")
    save_classifier(bilstm, "bilstm-toy-adv")
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    folder = tmp_path / "results" / "attention" / "demo"
    folder.mkdir(parents=True)
    m = {"accuracy": 0.9, "f1_positive": 0.9}
    (folder / "toy_summary.json").write_text(json.dumps({
        "dataset": "toy", "base_model": "bilstm-toy-base", "base": m, "uniform": m,
        "guided_mlp": {"uniform": m, "trained": m, "base_lstm": m},
        "best_adversary": {**m, "lambda": 0.1, "tvd": 0.05, "jsd": 0.5}, "provenance": {"code_version": "test"}}))
    pd.DataFrame([{"instance": 0, "seed": 1, "jsd": 0.1, "tvd": 0.02, "max_attention": 0.5, "predicted": 1, "label": 1}]
                 ).to_parquet(folder / "toy_seed_variance.parquet")
    pd.DataFrame([{"lambda": 0.1, "tvd": 0.05, "jsd": 0.5, "accuracy": 0.9, "f1_positive": 0.9, "model": "bilstm-toy-adv",
                   "final_loss": -0.1}]).to_parquet(folder / "toy_adversaries.parquet")
    at = AppTest.from_file(MAIN, default_timeout=120)
    _run(at)
    at.switch_page(str(Path(MAIN).parent.parent / "pages" / "attention.py"))
    _run(at)
    ours = at.dataframe[0].value
    assert list(ours["setting"])[:2] == ["base", "uniform"] and "adversary" in list(ours["setting"])
    at.text_input(key="attention_text").input("<b>the movie was great</b>")
    at.button(key="attention_show").click()
    _run(at)
    assert not at.exception


def test_explain_shows_krishna_agreement_between_the_measures_at_the_top_tokens(cache_with_toy, toy_classifier):
    """Beside the Spearman heatmap, the Explain page tables the disagreement-problem metrics for every pair of
    the chosen measures on this input, each in [-1, 1] (rank correlation) or [0, 1] (the top-k agreements), and
    each equal to the engine's value for the same model, text and measures."""
    import pandas as pd

    from engine.explain import explain_text
    from engine.faithfulness.measure_agreement import agreement_matrix

    at = _explain_page(AppTest.from_file(MAIN, default_timeout=120))
    at.text_area[0].input("the acting was truly bad and the story poor")
    at.button[0].click()
    _run(at)
    table = next(d.value for d in at.dataframe if "feature_agreement" in d.value.columns)
    assert len(table) == 6, "one row per pair of the four default measures"
    top_k = table[["feature_agreement", "rank_agreement", "sign_agreement", "signed_rank_agreement"]]
    assert ((top_k >= 0) & (top_k <= 1)).all().all()
    assert table["rank_correlation"].between(-1, 1).all()
    # the values are the engine's for this input at the page's default top share (20%)
    engine_view = explain_text(toy_classifier, "the acting was truly bad and the story poor")
    assert list(engine_view.scores) == at.multiselect(key="explain_measures").value
    expected = agreement_matrix({m: [s] for m, s in engine_view.scores.items()}, top_fraction=0.2).pivot_table(
        index=["measure_a", "measure_b"], columns="metric", values="mean")
    pd.testing.assert_frame_equal(table.sort_index(axis=0).sort_index(axis=1), expected.sort_index(axis=0).sort_index(axis=1),
                                  check_exact=False, atol=1e-6, rtol=0, check_names=False)
