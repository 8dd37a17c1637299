"""IG completeness on a prompted LM as the number of steps grows: is the gap a quadrature (step-count) error, which
shrinks as the steps grow, or a mismatch between the function IG integrates and the one completeness compares
with, which does not? For each rule and step count: the sum of ig-sign scores over the input slot, f_c(x) - f_c(b)
(log-odds of the target class, b = the zero baseline on the slot's word embeddings) and the gap between them,
plus seconds per explanation. Also checks that f_c(x) from the embedding path equals the classifier's own
`explained_logits` on the same batch (a mismatch there would be a bug, not a step count).

    ENGINE_THREADS=1 python scripts/llm_ig_completeness.py --model smollm2-rt-prompt \\
        --text "a gripping , funny film , but far too long" --steps 20 60 --rules midpoint gausslegendre \\
        --out results/llm/ig-completeness-smollm2.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from engine.smoke import SMOKE_HELP, tiny_prompted, use_scratch_folders

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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
