"""IG completeness on a prompted LM as the number of steps grows: is the gap a quadrature (step-count) error, which
shrinks as the steps grow, or a mismatch between the function IG integrates and the one completeness compares
with, which does not? For each rule and step count: the sum of ig-sign scores over the input slot, f_c(x) - f_c(b)
(log-odds of the target class, b = the zero baseline on the slot's word embeddings) and the gap between them,
plus seconds per explanation. Also checks that f_c(x) from the embedding path equals the classifier's own
`explained_logits` on the same batch (a mismatch there would be a bug, not a step count).

    ENGINE_THREADS=1 python scripts/experiments/llm_ig_completeness.py --model smollm2-rt-prompt \\
        --text "a gripping , funny film , but far too long" --steps 20 60 --rules midpoint gausslegendre \\
        --out results/llm/ig-completeness-smollm2.json

With --dataset, the gap before and after the convergence check (engine.importance.completeness) on a seeded sample
of the split: for each sentence, ig-sign with its default options, recording the gap of the configured 20 midpoint
steps (`initial_gap`: what IG gave before the check), the final gap, the steps used and whether the scores add up.
One JSON line per sentence is appended to --jsonl (a rerun skips the sentences already there); --cpu-budget stops
after that many seconds of this process's CPU time; --table prints the summary table from the JSON lines.

    ENGINE_THREADS=1 python scripts/experiments/llm_ig_completeness.py --model smollm2-rt-prompt --dataset rt --n 100 --seed 0 \
        --cpu-budget 1200 --jsonl results/llm/ig-completeness/smollm2-rt-convergence.jsonl
    python scripts/experiments/llm_ig_completeness.py --table results/llm/ig-completeness/smollm2-rt-convergence.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.smoke import SMOKE_HELP, append_row, tiny_prompted, use_scratch_folders

DEFAULT_TEXT = "a gripping , funny film , but far too long"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-rt-prompt")
    parser.add_argument("--text", default=DEFAULT_TEXT)
    parser.add_argument("--steps", type=int, nargs="+", default=[20, 50, 100, 200, 400])
    parser.add_argument("--rules", nargs="+", default=["midpoint", "gausslegendre"])
    parser.add_argument("--alphas", type=float, nargs="+",
                        default=[0, 1e-4, 1e-3, 3e-3, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0],
                        help="points of the path where f_c is printed (forward only)")
    parser.add_argument("--target", type=int, default=None, help="class explained (default: the predicted one)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--dataset", default=None, help="measure the convergence check on a sample of this dataset")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=100, help="sentences sampled (seeded) from the split")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cpu-budget", type=float, default=None, help="stop after this many CPU seconds")
    parser.add_argument("--jsonl", default=None, help="one line per sentence (appended; resumable)")
    parser.add_argument("--table", default=None, help="print the summary table of this JSON-lines file and exit")
    args = parser.parse_args(argv)
    if args.table:
        print(convergence_table(args.table))
        return 0

    import torch

    from engine.importance import get_explainer
    from engine.importance.batching import explained

    if args.smoke:
        use_scratch_folders()
        classifier = tiny_prompted()
        args.steps, args.rules, args.out, args.alphas = [4, 16], ["midpoint"], None, [0.0, 0.5, 1.0]
    else:
        from engine.models import load_classifier

        classifier = load_classifier(args.model)
    if args.dataset:
        return measure_convergence(classifier, args, argv)
    batch = classifier.batch([args.text])
    with torch.no_grad():
        probs = torch.softmax(classifier.logits(batch).float(), -1)[0]
        direct = explained(classifier, classifier.logits(batch))[0]
    target = int(probs.argmax()) if args.target is None else args.target
    # f_c along IG's straight path b + alpha (e - b) (forward only): where the function changes tells whether a
    # uniform quadrature can resolve it (a change packed near alpha = 0 needs many steps or nodes near 0).
    ig = get_explainer("ig-sign", classifier)
    e = classifier.word_embeddings(batch.input_ids).detach()
    b = ig.baseline_embeddings(batch)
    slot = batch.maskable[0]
    rms = float(e[0, slot].pow(2).mean(-1).sqrt().mean())
    path = []
    with torch.no_grad():
        for a in args.alphas:
            f = explained(classifier, classifier.logits_from_embeddings(b + a * (e - b), batch))[0, target]
            path.append({"alpha": a, "f": float(f)})
    print(f"mean RMS of the slot's word embeddings {rms:.4f}; the model's RMSNorm eps "
          f"{getattr(classifier.model.config, 'rms_norm_eps', float('nan')):g}")
    print("f_c along the path: " + ", ".join(f"{p['alpha']:g}: {p['f']:+.3f}" for p in path), flush=True)
    rows = []
    for rule in args.rules:
        for k in args.steps:
            explainer = get_explainer("ig-sign", classifier, steps=k, rule=rule)
            started = time.perf_counter()
            imp = explainer.attribute(batch, [target])
            seconds = time.perf_counter() - started
            ex = imp.extras
            total = float(imp.token_scores(0).sum())
            rows.append({"rule": rule, "steps": k, "sum_ig": total, "f_input": float(ex["f_input"][0]),
                         "f_baseline": float(ex["f_baseline"][0]), "difference": float(ex["f_input"][0] - ex["f_baseline"][0]),
                         "gap": float(ex["completeness_gap"][0]), "relative_gap": float(ex["relative_gap"][0]),
                         "seconds": round(seconds, 2)})
            print(f"{rule:13s} steps {k:4d}: sum IG {total:+.4f}  f(x)-f(b) {rows[-1]['difference']:+.4f}  "
                  f"gap {rows[-1]['gap']:+.4f}  ({seconds:.1f} s)", flush=True)
    f_direct = float(direct[target])
    print(f"f_c(x) through the classifier: {f_direct:+.6f}; through IG's embedding path: {rows[0]['f_input']:+.6f}")
    if args.out:
        from engine.atomic import write_text
        from engine.runtime import code_version

        record = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
                  "code_version": code_version(), "model": classifier.id,
                  "weights_sha256": classifier.metadata.get("weights_sha256"), "text": args.text, "target": target,
                  "probabilities": probs.tolist(), "tokens": len(batch.input_ids[0]),
                  "slot_tokens": int(batch.maskable[0].sum()), "f_input_direct": f_direct,
                  "slot_embedding_rms": rms, "rms_norm_eps": getattr(classifier.model.config, "rms_norm_eps", None),
                  "path": path,
                  "torch_threads": torch.get_num_threads(), "dtype": str(next(classifier.model.parameters()).dtype),
                  "rows": rows, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        write_text(Path(args.out), json.dumps(record, indent=2))
    return 0


def measure_convergence(classifier, args, argv) -> int:
    """ig-sign with its default options on a seeded sample of a split, one JSON line per sentence."""
    import numpy as np
    import torch

    from engine.data import load_dataset
    from engine.importance import get_explainer
    from engine.runtime import code_version, runtime_record

    dataset = classifier.check_dataset(load_dataset(args.dataset))
    examples = dataset.split(args.split)
    pick = sorted(np.random.default_rng(args.seed).choice(len(examples), size=min(args.n, len(examples)),
                                                           replace=False).tolist())
    out = Path(args.jsonl) if args.jsonl else None
    done = set()
    if out is not None and out.exists():
        done = {json.loads(line)["index"] for line in out.read_text().splitlines() if line.strip()}
    command = "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])])
    explainer = get_explainer("ig-sign", classifier, memo=False)
    runtime = runtime_record(classifier.device)  # device, GPU name, versions: rows from a GPU say so
    for j, idx in enumerate(pick):
        if idx in done:
            continue
        if args.cpu_budget is not None and time.process_time() > args.cpu_budget:
            print(f"CPU budget of {args.cpu_budget:.0f} s spent after {j} of {len(pick)} sentences", flush=True)
            break
        ex = examples[idx]
        batch = classifier.batch([ex.primary])
        cpu, wall = time.process_time(), time.perf_counter()
        imp = explainer.attribute(batch)
        e = imp.extras
        row = {"index": idx, "text": ex.primary, "label": int(ex.label), "target": int(imp.target[0]),
               "slot_tokens": int(batch.maskable[0].sum()), "tokens": int(batch.attention_mask[0].sum()),
               "f_input": float(e["f_input"][0]), "f_baseline": float(e["f_baseline"][0]),
               "difference": float(e["f_input"][0] - e["f_baseline"][0]),
               "initial_gap": float(e["initial_gap"][0]), "final_gap": float(e["completeness_gap"][0]),
               "allowed_gap": float(e["allowed_gap"][0]), "complete": bool(e["complete"][0]),
               "steps_used": int(e["steps_used"][0]), "rule_used": e["rule_used"][0],
               "options": dict(imp.options), "cpu_seconds": round(time.process_time() - cpu, 2),
               "wall_seconds": round(time.perf_counter() - wall, 2), "torch_threads": torch.get_num_threads(),
               "model": classifier.id, "weights_sha256": classifier.metadata.get("weights_sha256"),
               "runtime": runtime, "code_version": code_version(), "command": command}
        print(f"{j + 1}/{len(pick)} #{idx}: gap {row['initial_gap']:+.3f} -> {row['final_gap']:+.3f} "
              f"(f(x)-f(b) {row['difference']:+.3f}, {row['steps_used']} {row['rule_used']}, "
              f"{row['cpu_seconds']:.0f} CPU s)", flush=True)
        if out is not None:
            append_row(out, row)
    return 0


def convergence_table(path: str) -> str:
    """The markdown summary of a --jsonl file: the gap at 20 midpoint steps (before) and after the check."""
    from engine.reports.ig_convergence_tables import convergence_markdown, read_rows

    return convergence_markdown(read_rows(path))


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())
