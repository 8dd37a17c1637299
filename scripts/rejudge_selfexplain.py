"""Apply the current reply rules (engine.selfexplain.replies) to the records of a stored self-explanation run,
without generating anything: a record judged faithful or unfaithful whose answer the rules no longer accept as the
object asked for (a counterfactual that is no rewrite of the input, a redaction that is no redacted copy, an
attribution naming every word) becomes "not parsable"; every other record stays as it is (its answer, texts and
re-classification are those stored). The shares and intervals are recomputed from the records and the cell is
written again, its provenance saying what was re-judged and by which code.

    python scripts/rejudge_selfexplain.py --run smollm2-rt-selfexplain
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
            if value is None:
                changed.append({"index": r.index, "was": r.verdict, "reason": why})
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
            "command": "python scripts/rejudge_selfexplain.py --run " + args.run,
            "rule": "engine.selfexplain.replies", "now_not_parsable": changed})
        store.write_cell(args.run, data["cell"], rows, prov)
        print(f"{path.name}: {len(changed)} judged record(s) now not parsable "
              f"({sum(c['was'] == 'faithful' for c in changed)} were faithful)")
    if args.smoke:
        rec = json.loads(next((ResultsStore(results_dir() / "selfexplain").root / args.run / "cells").glob("*.json"))
                         .read_text())["provenance"]["records"][0]
        assert rec["verdict"] == "not parsable", rec
    return 0


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
    ResultsStore(results_dir() / "selfexplain").write_cell("smoke", cell, rows, {"records": [rec.to_dict()]})
    return "smoke"


if __name__ == "__main__":
    sys.exit(main())
