"""AOPC objective against forward passes for the budgeted searches (engine/importance/aopc_search.py,
the measures in engine/importance/budgeted_search.py).

Trains (or loads) a tiny masked-fine-tuned model on rt, takes the first `--inputs` test inputs of at most
`--max-tokens` tokens, and for every budget in `--budgets` (multiples of each input's N^2/2) runs greedy-loo,
beam-budget at widths 2, 5, 10, 20 and anytime-aopc, scoring every returned order by the same full-curve AOPC
(one cache per input, so scoring costs nothing extra). Prints a table of the mean AOPC and the mean passes spent.

    ENGINE_THREADS=1 python bench/budgeted_search.py --inputs 8 --max-tokens 24
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _smoke import SMOKE_HELP, use_scratch_folders

from engine.data import get_dataset
from engine.importance import get_explainer
from engine.models import TrainConfig, train_classifier


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--train-limit", type=int, default=2000)
    ap.add_argument("--multiples", type=float, nargs="+", default=[0.25, 0.5, 1, 2, 4, 8])
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    if args.smoke:  # CI: the real searches on 2 short inputs of a barely trained model; the numbers mean nothing
        use_scratch_folders()
        args.inputs, args.max_tokens, args.train_limit, args.multiples = 2, 8, 64, [1.0]
    torch.manual_seed(0)
    clf = train_classifier(TrainConfig(base_model="tiny", dataset="rt", strategy="masked", epochs=1, lr=3e-4,
                                       batch_size=32, train_limit=args.train_limit,
                                       eval_limit=32 if args.smoke else 200, seed=0),
                           show_progress_bar=False)
    rows = [e for e in get_dataset("rt").split("test")
            if int(clf.batch_of([e]).maskable[0].sum()) <= args.max_tokens][: args.inputs]
    methods = [("greedy-loo", {}), *[("beam-budget", {"width": w}) for w in (2, 5, 10, 20)],
               ("anytime-aopc", {"exact_tokens": 0}), ("anytime-aopc", {"exact_tokens": 0, "start": "loo-sign"})]
    print(f"{len(rows)} rt test inputs of <= {args.max_tokens} tokens; budget = multiple x N^2/2 per input")
    print("multiple  " + "  ".join(f"{n}{o.get('width', '')}{'-' + o['start'] if 'start' in o else ''}".ljust(14) for n, o in methods))
    for mult in args.multiples:
        line = [f"{mult:<8g}"]
        for name, opts in methods:
            values, spent = [], []
            t0 = time.time()
            for e in rows:
                batch = clf.batch_of([e])
                n = int(batch.maskable[0].sum())
                budget = max(n + 1, int(mult * n * n / 2))
                imp = get_explainer(name, clf, budget=budget, memo=False, **opts).attribute(batch)
                # score every order on the same objective: J of the returned order (full AOPC)
                scorer = get_explainer("beam-budget", clf, width=1, memo=False)
                values.append(_aopc(scorer, batch, imp))
                spent.append(int(imp.extras["forwards"][0]) / budget)
            line.append(f"{np.mean(values):.4f}/{np.mean(spent):.2f}".ljust(14))
            del t0
        print("  ".join(line), flush=True)


def _aopc(scorer, batch, imp) -> float:
    from engine.importance.aopc_search import SetScores, curve_weights, order_value, prefix_masks
    from engine.importance.types import Call

    target = imp.target.to(batch.input_ids.device)
    call = Call(batch=batch, target=target, logits=None, progress=None, should_stop=None)
    pos = batch.maskable[0].nonzero().flatten().tolist()
    s = SetScores(len(pos), scorer.set_evaluator(call, 0, pos))
    order = sorted(range(len(pos)), key=lambda t: -float(imp.scores[0, pos[t]]))
    w = curve_weights(len(pos), "full")
    s.fetch(prefix_masks(order, w))
    return order_value(s, order, w)


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()
