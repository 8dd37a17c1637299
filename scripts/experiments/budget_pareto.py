"""RACU and NAOPC against forward passes for LOO, recursive (greedy) LOO, beam 2/5/10/20 and the anytime search at
several budgets (docs/budgeted-search.md#faithfulness-against-forward-passes).

For each of the first `--limit` test inputs of at most `--max-tokens` maskable tokens (the gold label explained,
as recursive masking does), every method runs through its registered measure (`loo-sign`, `greedy-loo`,
`beam-budget` width B unbounded, `anytime-aopc` at budgets of c x G passes, G = N(N+1)/2 + 1 = greedy's cost),
and its order is scored on
- full-curve AOPC of p_gold and NAOPC = (AOPC - L) / (U - L), with L and U exact (dynamic programming over
  the 2^N masked sets) up to `--max-exact` tokens; beyond, U is the best AOPC any search found (a width-20 beam
  among them) and L a minimising width-20 beam's (bounds inside the true ones: flagged `bounds_exact` = 0);
- the recursive-masking curve of a computed-once measure: the input masked at its first floor(r N) tokens for
  r = 0, 0.1, ..., 1, correct or not (binary: p_gold > 0.5); RACU against the mean curve of `--random-draws`
  uniformly random orders per input is computed over the inputs by `engine.results.budget_pareto`.
All searches on one input share one cache of masked-set scores (`shared_cache`), so a set is computed once,
while each search still counts every set it asks for: the passes reported are those it spends alone.

Writes results/<run>/points.csv (one row per input and method point) and provenance.json; an interrupted run
resumes from the inputs already in points.csv (same configuration only).

    python scripts/experiments/budget_pareto.py --model tiny-rt-masked-s0 --limit 40 --max-tokens 24 --run tiny-rt-budget
    python scripts/experiments/budget_pareto.py --smoke
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

RATIOS = tuple(i / 10 for i in range(11))
WIDTHS = (2, 5, 10, 20)
MULTIPLES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
RANDOM_SEED = 0


def method_points(multiples=MULTIPLES, widths=WIDTHS) -> list[tuple[str, str, dict, float]]:
    """(method label, registered measure, options, budget multiple of G or 0 = unbounded)."""
    points = [("loo", "loo-sign", {}, 0.0), ("greedy-loo", "greedy-loo", {}, 0.0)]
    points += [(f"beam-{w}", "beam-budget", {"width": w}, 0.0) for w in widths]
    points += [("anytime", "anytime-aopc", {}, float(c)) for c in multiples]
    return points


def greedy_cost(n: int) -> int:
    return n * (n + 1) // 2 + 1


def _order(scores: torch.Tensor, positions: list[int]) -> list[int]:
    """Local indices of `positions` by score, highest first, ties by position (as the erasure metrics rank)."""
    keys = [float(scores[p]) for p in positions]
    return sorted(range(len(positions)), key=lambda t: (-keys[t], t))


def _curve(oracle, order: list[int], gold: int) -> list[float]:
    """Correct (1) or not (0) at each ratio with the first floor(r N) tokens of `order` masked (binary: p_gold > 0.5;
    p = 0.5 exactly goes to class 0, as argmax does)."""
    n = oracle.n
    masks, m = [0], 0
    for p in order:
        m |= 1 << p
        masks.append(m)
    ks = [int(np.floor(r * n + 1e-9)) for r in RATIOS]
    oracle.fetch([masks[k] for k in ks if k])
    out = []
    for k in ks:
        p = oracle.s0 if k == 0 else oracle.s[masks[k]]
        out.append(float(p > 0.5 or (p == 0.5 and gold == 0)))
    return out


def run_input(clf, example, points, max_exact: int, random_draws: int, rng: np.random.Generator, cache: dict) -> list[dict]:
    from engine.importance import get_explainer
    from engine.importance.aopc_search import (
        SetScores,
        beam_search,
        curve_weights,
        exact_bounds,
        order_value,
        prefix_masks,
    )
    from engine.importance.budgeted_search import BudgetedBeam
    from engine.importance.types import Call

    batch = clf.batch_of([example]).to(clf.device)
    gold = int(example.label)
    target = torch.tensor([gold], device=clf.device)
    mask_id = clf.mask_token_id
    positions = (batch.maskable[0] & (batch.input_ids[0] != mask_id)).nonzero().flatten().tolist()
    n = len(positions)
    w = curve_weights(n, "full")
    scorer = BudgetedBeam(clf, memo=False)
    scorer.shared_cache = cache
    call = Call(batch=batch, target=target, logits=None, progress=None, should_stop=None)
    oracle = SetScores(n, scorer.set_evaluator(call, 0, positions))  # unlimited: the metrics' own look-ups
    rows, values = [], []
    for label, measure, options, multiple in points:
        budget = 0 if not multiple else max(n + 1, int(round(multiple * greedy_cost(n))))
        opts = dict(options)
        if measure != "loo-sign":
            opts["budget"] = budget
        explainer = get_explainer(measure, clf, memo=False, **opts)
        if measure != "loo-sign":
            explainer.shared_cache = cache
        started = time.perf_counter()
        imp = explainer.attribute(batch, target)
        seconds = time.perf_counter() - started
        forwards = int(imp.extras["forwards"][0]) if "forwards" in imp.extras else n + 1  # LOO: N masked + x
        order = _order(imp.scores[0], positions)
        oracle.fetch(prefix_masks(order, w))
        aopc = order_value(oracle, order, w)
        values.append(aopc)
        rows.append({"method": label, "measure": measure, "width": options.get("width", 1 if label == "greedy-loo" else 0),
                     "multiple": multiple, "budget": budget, "forwards": forwards, "aopc": aopc,
                     "seconds": round(seconds, 4), "complete": int(bool(imp.extras["complete"][0])) if "complete" in imp.extras else 1,
                     **{f"correct_{k}": v for k, v in enumerate(_curve(oracle, order, gold))}})
    # AOPC bounds of this input
    rand_curves, rand_aopc = [], []
    for _ in range(random_draws):
        order = [int(t) for t in rng.permutation(n)]
        oracle.fetch(prefix_masks(order, w))
        rand_aopc.append(order_value(oracle, order, w))
        rand_curves.append(_curve(oracle, order, gold))
    if n <= max_exact:
        upper, _, lower, _ = exact_bounds(oracle, w)
        exact = True
    else:
        upper = max(beam_search(oracle, w, 20).value, *values)
        lower = min(beam_search(oracle, w, 20, sign=-1.0).value, *values, *rand_aopc)
        exact = False
    common = {"n_tokens": n, "gold": gold, "upper": upper, "lower": lower, "bounds_exact": int(exact)}
    rows.append({"method": "random", "measure": "random", "width": 0, "multiple": 0.0, "budget": 0, "forwards": 0,
                 "aopc": float(np.mean(rand_aopc)), "seconds": 0.0, "complete": 1,
                 **{f"correct_{k}": float(v) for k, v in enumerate(np.mean(rand_curves, axis=0))}})
    return [{**common, **r} for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="tiny-rt-masked-s0")
    ap.add_argument("--dataset", default="rt")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=40, help="inputs (the first of the split within --max-tokens)")
    ap.add_argument("--max-tokens", type=int, default=24, help="only inputs of at most this many maskable tokens")
    ap.add_argument("--max-exact", type=int, default=12, help="exact AOPC bounds up to this many tokens")
    ap.add_argument("--random-draws", type=int, default=10, help="random orders per input for RACU's baseline")
    ap.add_argument("--multiples", type=float, nargs="+", default=list(MULTIPLES),
                    help="anytime budgets, in multiples of greedy LOO's cost N(N+1)/2 + 1")
    ap.add_argument("--run", default="tiny-rt-budget", help="folder under the results root")
    ap.add_argument("--smoke", action="store_true", help="CI: the real code on 2 short toy inputs of a barely trained model")
    args = ap.parse_args()
    command = "python scripts/experiments/budget_pareto.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    torch.set_num_threads(int(os.environ.get("ENGINE_THREADS", "1")))
    if args.smoke:
        from engine.smoke import smoke_checkpoint, use_scratch_folders

        use_scratch_folders()
        args.model, args.dataset, args.limit, args.max_tokens = smoke_checkpoint("toy"), "toy", 2, 8
        args.multiples, args.random_draws, args.max_exact = [0.5, 2.0], 2, 6
    from engine.data import get_dataset
    from engine.models import load_classifier
    from engine.results.budget_pareto import POINTS, PROVENANCE, summarise
    from engine.runtime import code_version
    from engine.settings import results_dir

    version = code_version()  # read once: files edited while the run goes on must not mark it dirty half-way
    clf = load_classifier(args.model)
    if clf.num_classes != 2:
        raise SystemExit(f"this run scores correctness as p_gold > 0.5: binary tasks only ({clf.num_classes} classes)")
    dataset = clf.check_dataset(get_dataset(args.dataset))
    chosen = []
    for index, e in enumerate(dataset.split(args.split)):
        if int(clf.batch_of([e]).maskable[0].sum()) <= args.max_tokens:
            chosen.append((index, e))
        if len(chosen) == args.limit:
            break
    out = Path(results_dir()) / args.run
    out.mkdir(parents=True, exist_ok=True)
    config = {"model": args.model, "dataset": args.dataset, "split": args.split, "limit": args.limit,
              "max_tokens": args.max_tokens, "max_exact": args.max_exact, "random_draws": args.random_draws,
              "multiples": list(args.multiples), "widths": list(WIDTHS), "ratios": list(RATIOS),
              "random_seed": RANDOM_SEED}
    points_file, prov_file = out / POINTS, out / PROVENANCE
    done, earlier = pd.DataFrame(), {}
    if points_file.exists() and prov_file.exists():
        earlier = json.loads(prov_file.read_text())
        # resume: the same configuration but for --limit (the inputs are a prefix of one list: a run stopped early
        # is finished with a smaller --limit); the inputs already there are kept, those past the limit dropped
        if {k: v for k, v in earlier["config"].items() if k != "limit"} == {k: v for k, v in config.items() if k != "limit"}:
            done = pd.read_csv(points_file)
            done = done[done["input"].isin([index for index, _ in chosen])]
        else:
            earlier = {}
    points = method_points(args.multiples)
    started = time.time()
    frames = [done] if not done.empty else []
    have = set(done["input"]) if not done.empty else set()
    for i, (index, e) in enumerate(chosen):
        draws_rng = np.random.default_rng([RANDOM_SEED, index])  # per input: a resumed run draws the same orders
        if index in have:
            continue
        t0 = time.time()
        rows = run_input(clf, e, points, args.max_exact, args.random_draws, draws_rng, cache={})
        frames.append(pd.DataFrame([{"input": index, **r} for r in rows]))
        table = pd.concat(frames, ignore_index=True)
        tmp = points_file.with_suffix(".tmp")
        table.to_csv(tmp, index=False)
        os.replace(tmp, points_file)
        _write_provenance(prov_file, config, command, clf, version, started, len(set(table["input"])),
                          final=False, earlier=earlier)
        print(f"input {i + 1}/{len(chosen)} (test #{index}, {rows[0]['n_tokens']} tokens): {time.time() - t0:.1f} s",
              flush=True)
    if not frames:
        raise SystemExit(f"no {args.dataset} {args.split} input of at most {args.max_tokens} tokens")
    table = pd.concat(frames, ignore_index=True)
    table.to_csv(points_file, index=False)
    _write_provenance(prov_file, config, command, clf, version, started, len(set(table["input"])),
                      final=True, earlier=earlier)
    print(summarise(table).to_string(index=False))


def _write_provenance(path, config, command, clf, version, started, n_inputs, final, earlier=None):
    earlier = earlier or {}
    record = {
        "config": config, "command": command, "code_version": version, "checkpoint": clf.id,
        "checkpoint_sha256": clf.weights_sha256, "checkpoint_code_version": clf.metadata.get("code_version"),
        "checkpoint_config": clf.metadata.get("config"), "target": "gold label", "n_inputs": n_inputs,
        "finished": final, "seconds": round(time.time() - started, 1),  # this invocation's (a resumed run: the last)
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {clf.device}, torch threads {torch.get_num_threads()}",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if earlier:  # a resumed run: what computed the rows kept from before
        record["resumed_from"] = {k: earlier.get(k) for k in ("command", "code_version", "machine", "seconds", "n_inputs",
                                                              "created", "resumed_from") if earlier.get(k) is not None}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()
