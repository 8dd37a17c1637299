"""Apply the current reply rules (engine.selfexplain.replies) to the records of a stored self-explanation run,
without generating anything: a record judged faithful or unfaithful whose answer the rules no longer accept as the
object asked for (a counterfactual that is no rewrite of the input, a redaction that is no redacted copy, an
attribution naming every word) becomes "not parsable"; every other record stays as it is (its answer, texts and
re-classification are those stored). The shares and intervals are recomputed from the records and the cell is
written again, its provenance saying what was re-judged and by which code.

The field's tests (insertion, biased features, CC-SHAP: engine.selfexplain.field) get the same treatment with their
own rule, engine.selfexplain.replies.check_explanation, on each explained record (the source, labels and request as
the test passed them); their metrics are summarised again by the test's own summary.

    python scripts/experiments/rejudge_selfexplain.py --run smollm2-rt-selfexplain
    python scripts/experiments/rejudge_selfexplain.py --run gemma3-rt-field-insertion-100
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", help="the run under results/selfexplain/ to re-judge")
    parser.add_argument("--smoke", action="store_true", help="CI smoke mode: a scratch store holding one counterfactual "
                        "the old rule judged faithful (a bare label), re-judged: it must come out not parsable")
    args = parser.parse_args(argv)
    if args.smoke:
        args.run = _smoke_store()
    elif not args.run:
        parser.error("--run is required")

    import pandas as pd

    from engine.results.store import ResultsStore
    from engine.runtime import code_version
    from engine.selfexplain import SelfExplanation, summarise
    from engine.selfexplain.parsing import parse_attribution, parse_counterfactual, parse_redaction
    from engine.settings import results_dir

    store = ResultsStore(results_dir() / "selfexplain")
    cells = sorted((store.root / args.run / "cells").glob("*.json"))
    for path in cells:
        data = json.loads(path.read_text())
        prov = data["provenance"]
        if _field_kind(data["cell"]) is not None:
            _rejudge_field(store, args.run, path, data)
            continue
        records = [SelfExplanation(**r) for r in prov["records"]]
        changed = []
        for r in records:
            if r.verdict not in ("faithful", "unfaithful"):
                continue
            classes = [*r.probabilities]  # the judge's classes: the model's and the abstentions
            words = classes + [w.capitalize() for w in classes]
            mask = "[REDACTED]"
            if r.kind == "counterfactual":
                value, why = parse_counterfactual(r.answer, r.text, words)
            elif r.kind == "attribution":
                value, why = parse_attribution(r.answer, r.text)
            else:
                value, why = parse_redaction(r.answer, mask, r.text, words)
            if value is not None and value != r.explanation:
                # the stored re-classification is of the stored text: a changed reading would need the model
                raise SystemExit(f"{path.name} record {r.index}: the answer now reads {value!r}, not the stored "
                                 f"{r.explanation!r}; re-run the self-explanation instead")
            if value is None:
                changed.append({"index": r.index, "was": r.verdict, "answer": (r.answer or "")[:160], "reason": why})
                r.verdict, r.reason = "not parsable", why
                r.explanation = r.edited_text = r.reclassification = None
                r.reprobabilities, r.unchanged = {}, None
        summary = summarise(records)
        rows = pd.read_parquet(path.with_suffix(".parquet"))
        for i, metric in enumerate(rows["metric"]):
            lo, hi = summary[metric + "_ci"]
            rows.loc[i, ["value", "ci_low", "ci_high"]] = [summary[metric], lo, hi]
            rows.loc[i, "n_examples"] = summary["n"] if metric == "accuracy" else summary["n_explained"]
        prov.update(summary=summary, records=[r.to_dict() for r in records])
        prov.setdefault("rejudged", []).append({
            "code_version": code_version(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": "python scripts/experiments/rejudge_selfexplain.py --run " + args.run,
            "rule": "engine.selfexplain.replies (check_rewrite, check_attribution, check_redaction)", "now_not_parsable": changed})
        store.write_cell(args.run, data["cell"], rows, prov)
        print(f"{path.name}: {len(changed)} judged record(s) now not parsable "
              f"({sum(c['was'] == 'faithful' for c in changed)} were faithful)")
    if args.smoke:
        for path in (ResultsStore(results_dir() / "selfexplain").root / args.run / "cells").glob("*.json"):
            rec = json.loads(path.read_text())["provenance"]["records"][0]
            assert rec["verdict"] == "not parsable", rec
    return 0


def _field_kind(cell: dict) -> str | None:
    from engine.selfexplain.field import FIELD_TESTS

    kind = cell.get("measure", "").removeprefix("self-explanation ")
    return kind if kind in FIELD_TESTS else None


def _rejudge_field(store, run: str, path, data: dict) -> None:
    """check_free_text again on every explained record of a field-test cell; the metrics summarised again."""
    import pandas as pd

    from engine.runtime import code_version
    from engine.selfexplain.biased import BiasedRecord
    from engine.selfexplain.ccshap import CCShapRecord
    from engine.selfexplain.field import FIELD_TESTS
    from engine.selfexplain.free_text import check_free_text, why_request
    from engine.selfexplain.insertion import Insertion

    kind, prov = _field_kind(data["cell"]), data["provenance"]
    record_type = {"insertion": Insertion, "cc-shap": CCShapRecord}.get(kind, BiasedRecord)
    records = [record_type(**r) for r in prov["records"]]
    # what each test passed to the rule (engine/selfexplain/{insertion,biased,ccshap}.py): label_words of the judge
    # (its classes and verbalizer words, as the cell's prompt spec records them), the edited text and its request
    # for insertion, the input and its request for the others
    verbalizer = prov["prompt"]["verbalizer"]
    labels = [*verbalizer, *(w for ws in verbalizer.values() for w in ws)]
    changed = []
    for r in records:
        if r.verdict != "explained":
            continue
        source = r.edited_text if kind == "insertion" else r.text
        request = why_request(r.text, r.prediction) if kind == "cc-shap" else r.request
        ok, why = check_free_text(r.answer, source, labels, request=request or "")
        if not ok:
            changed.append({"index": r.index, "answer": r.answer[:160], "reason": why})
            r.verdict, r.reason = "not parsable", why
            if kind == "insertion":
                r.mention = None
            elif kind != "cc-shap":
                r.admits = None
    test = FIELD_TESTS[kind]
    summary = test.summarise(records)
    rows = pd.read_parquet(path.with_suffix(".parquet"))
    for m in test.metrics:
        at = rows.index[rows["metric"] == m.name]
        v = summary.get(m.key)
        lo, hi = summary.get(m.key + "_ci") or (float("nan"), float("nan"))
        rows.loc[at, ["value", "ci_low", "ci_high"]] = [float("nan") if v is None else float(v), lo, hi]
    prov.update(summary=summary, records=[r.to_dict() for r in records])
    prov.setdefault("rejudged", []).append({
        "code_version": code_version(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "python scripts/experiments/rejudge_selfexplain.py --run " + run,
        "rule": "engine.selfexplain.replies.check_explanation", "now_not_parsable": changed})
    store.write_cell(run, data["cell"], rows, prov)
    print(f"{path.name}: {len(changed)} explained record(s) now not parsable")


def _smoke_store() -> str:
    """A scratch results store with one stored cell whose counterfactual answer is a bare label judged faithful."""
    import pandas as pd

    from engine.results.store import ResultsStore
    from engine.selfexplain import SelfExplanation, summarise
    from engine.settings import results_dir
    from engine.smoke import use_scratch_folders

    use_scratch_folders()
    rec = SelfExplanation(index=0, kind="counterfactual", text="a gripping , funny film", label="positive",
                          prediction="positive", probabilities={"negative": 0.2, "positive": 0.8}, correct=True,
                          verdict="faithful", target="negative", answer="negative", edited_text="negative",
                          reclassification="negative", reprobabilities={"negative": 0.9, "positive": 0.1})
    summary = summarise([rec])
    rows = pd.DataFrame([{"model": "smoke", "seed": 0, "dataset": "toy", "split": "test", "measure":
                          "self-explanation counterfactual", "method": "self-explanation", "strategy": "zero-shot", "step": 0,
                          "ratio": float("nan"), "p_value": float("nan"), "metric": m, "value": summary[m],
                          "ci_low": summary[m + "_ci"][0], "ci_high": summary[m + "_ci"][1], "n_examples": 1}
                         for m in ("faithful", "unfaithful", "not parsable", "faithfulness", "accuracy")])
    cell = {"model": "smoke", "seed": 0, "dataset": "toy", "split": "test", "measure": "self-explanation counterfactual",
            "method": "self-explanation"}
    store = ResultsStore(results_dir() / "selfexplain")
    store.write_cell("smoke", cell, rows, {"records": [rec.to_dict()]})
    # a field-test cell (insertion) whose one explained reply is a loop with numbered lines
    from engine.selfexplain.field import FIELD_TESTS
    from engine.selfexplain.insertion import Insertion, summarise_insertions

    loop = "".join(f"{i}. The movie is a good movie.\n\n" for i in range(1, 8))
    ins = Insertion(index=0, text="a gripping , funny film", word="dull", position=0,
                    edited_text="dull a gripping , funny film", prediction="positive",
                    probabilities={"negative": 0.2, "positive": 0.8}, new_prediction="negative",
                    new_probabilities={"negative": 0.6, "positive": 0.4}, flip=True, effect=0.4, verdict="explained",
                    request="Text: dull a gripping , funny film", answer=loop, mention=False)
    summary = summarise_insertions([ins])
    rows = pd.DataFrame([{**{k: v for k, v in rows.iloc[0].items() if k not in ("metric", "value", "ci_low", "ci_high")},
                          "measure": "self-explanation insertion", "metric": m.name, "better": m.better,
                          "value": float(summary[m.key]), "ci_low": float("nan"), "ci_high": float("nan")}
                         for m in FIELD_TESTS["insertion"].metrics])
    store.write_cell("smoke", {**cell, "measure": "self-explanation insertion"}, rows,
                     {"records": [ins.to_dict()], "prompt": {"verbalizer": {"negative": [" negative"],
                                                                          "positive": [" positive"]}}})
    return "smoke"


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())
