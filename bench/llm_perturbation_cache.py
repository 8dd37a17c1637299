"""Perturbation measures on a prompted LLM at the cached limit, beside captum's `LLMAttribution`, in one process on
the same prompt and inputs (docs/llm.md#perturbations-at-the-cached-limit).

For each prompt (the model's own, zero-shot; and the same with k few-shot examples from the training split) and each
input, it times:
  ours, cached      leave-one-out, occlusion (3-token windows), KernelSHAP, LIME, Shapley sampling through the
                    engine, with the prompt before the slot computed once (engine/models/prefix_cache.py)
  ours, uncached    the same with ENGINE_PREFIX_CACHE off (every row runs the whole prompt)
  captum            `LLMAttribution` over FeatureAblation, KernelShap, Lime, ShapleyValueSampling with the slot's
                    pieces as the features of a `TextTemplateInput` (baseline " [REDACTED]" per piece, the engine's
                    replacement), and `LLMGradientAttribution` over LayerIntegratedGradients beside our ig-sign
and the **cached limit**: the suffix tokens a measure ran (rows x padded suffix length) divided by the peak batched
throughput of suffix tokens over a cached prefix (the best batch size tried). Targets: every perturbation measure within 1.3x of the cached
limit, and faster than captum by at least the prefix share (captum time / ours >= T / (T - P)).

Scores: captum explains the label word's log-probability under the LM; the engine explains the log-odds of the class
over the label set. Where the definitions meet (FeatureAblation = leave-one-out of the label word's
log-probability of the first label word, `PromptedClassifier.class_scores` with that word alone), the table gives
the median difference and the pieces that differ: captum formats the string and tokenises it again, so a piece
whose replacement " [REDACTED]" merges differently with the text before it (e.g. the newline before the slot)
reads other tokens than the engine's, which writes the replacement's tokens in place. The sampling measures
draw other coalitions in captum (its own random state) and IG's baseline differs (captum: zero embeddings over the
whole prompt, one target token; ours: the replacement on the slot only, the log-odds): their times are comparable,
their scores are not (stated in the table).

Clock: this process's CPU time with one torch thread (other jobs on a shared machine do not inflate it).

    ENGINE_THREADS=1 python bench/llm_perturbation_cache.py --model smollm2-rt-prompt --inputs 2 --shots 0 4
    ENGINE_THREADS=1 python bench/llm_perturbation_cache.py --model gemma3-rt-prompt --inputs 1 --shots 0 \
        --measures loo-sign kernel-shap lime      # Gemma's own prompt is 4-shot already
    python bench/llm_perturbation_cache.py --smoke      # CI: a random-weight 2-layer Llama, one input
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import torch
from _llm_smoke import start_bench, tiny_prompted
from _smoke import SMOKE_HELP

from engine.faithfulness.cost import counting_rows
from engine.importance import get_explainer
from engine.runtime import code_version

CLOCK = time.process_time
OURS_TO_CAPTUM = {"loo-sign": "FeatureAblation", "kernel-shap": "KernelShap", "lime": "Lime",
                  "shapley-sampling": "ShapleyValueSampling", "occlusion": None}


def timed(fn):
    t = CLOCK()
    out = fn()
    return out, CLOCK() - t


def with_shots(classifier, k: int, seed: int = 0):
    """The classifier with k few-shot examples drawn (seeded) from the training split of rt, half per class."""
    if k == 0:
        return classifier
    import random

    from engine.data import get_dataset
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    train = get_dataset("rt").split("train")
    rng = random.Random(seed)
    by_label = {c: [e for e in train if e.label == c] for c in range(classifier.num_classes)}
    picks = [rng.choice(by_label[i % classifier.num_classes]) for i in range(k)]
    spec = classifier.spec.to_dict()
    spec["examples"] = [{"input": e.primary, "label": classifier.classes[e.label]} for e in picks]
    return PromptedClassifier(classifier.model, classifier.tokenizer, PromptSpec.from_dict(spec),
                              classifier.max_length, dict(classifier.metadata), classifier.device)


def slot_values(classifier, batch, text: str) -> tuple[str, list[str]]:
    """(captum template with one '{}' per slot piece, the pieces' strings): the prompt split at the ends of the
    slot's tokens, so a piece carries the space before it, as the engine's " [REDACTED]" replacement does."""
    prompt, (start, end), _ = classifier.render(text)
    ends = [b for (a, b), m in zip(batch.offsets[0], batch.maskable[0].tolist()) if m]
    cuts = [0] + ends
    values = [text[cuts[i]:cuts[i + 1]] for i in range(len(ends))]
    if ends[-1] < len(text):
        values[-1] += text[ends[-1]:]
    esc = lambda s: s.replace("{", "{{").replace("}", "}}")  # noqa: E731
    head = prompt[:start]
    tok = classifier.tokenizer
    bos = tok.bos_token
    if bos and head.startswith(bos) and tok("x")["input_ids"][:1] == [tok.bos_token_id]:
        # captum tokenises the formatted string with the special tokens, so a tokenizer that adds <bos> itself
        # (Gemma's) would read the rendered "<bos>" twice and every score would shift (27 of 28 pieces did)
        head = head[len(bos):]
    return esc(head) + "{}" * len(values) + esc(prompt[end:]), values


def cached_limit(classifier, batch, sizes) -> tuple[float, int, int]:
    """(suffix tokens per second at the best batch size, that size, prefix length P) of forwards whose prefix is
    cached: rows are the input with one slot token replaced, so every row shares exactly the prompt before the slot.
    Counted in suffix tokens (rows x padded suffix length), since a [REDACTED] row's suffix grows with the runs of
    masked tokens it holds (each becomes the replacement's tokens)."""
    from engine.models.prefix_cache import shared_prefix_length

    slot = batch.maskable[0].nonzero().flatten()
    best = (0.0, 1)
    P = 0
    for bs in sizes:
        ids = batch.input_ids.repeat(bs, 1)
        ids[torch.arange(bs), slot[torch.arange(bs) % len(slot)]] = classifier.mask_token_id
        mask = batch.attention_mask.repeat(bs, 1)
        P = shared_prefix_length(ids, mask, classifier.template_prefix_ids())
        with torch.no_grad():
            classifier.forward(input_ids=ids, attention_mask=mask)  # warm: the prefix is cached
            kv = classifier.prefix_kv()
            before = kv.suffix_tokens
            _, t = timed(lambda: classifier.forward(input_ids=ids, attention_mask=mask))
            tokens = kv.suffix_tokens - before
        if tokens / t > best[0]:
            best = (tokens / t, bs)
    return best[0], best[1], P


def captum_run(classifier, text: str, batch, method: str, target_word: str, n_samples: int, ig_steps: int):
    """captum's attribution of the label word for one input: (scores over the slot's pieces [N], CPU seconds)."""
    from captum import attr

    template, values = slot_values(classifier, batch, text)
    tok = classifier.tokenizer
    if method == "LayerIntegratedGradients":
        llm = attr.LLMGradientAttribution(attr.LayerIntegratedGradients(classifier.model,
                                                                        classifier.model.get_input_embeddings()), tok)
        inp = attr.TextTemplateInput(template, values)
        prompt = inp.to_model_input()
        prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        slot_ids = set(classifier.batch([text]).input_ids[0][classifier.batch([text]).maskable[0]].tolist())
        skip = [t for t in set(prompt_ids) if t not in slot_ids]
        inp = attr.TextTokenInput(prompt, tok, skip_tokens=skip)
        res, t = timed(lambda: llm.attribute(inp, target=target_word, n_steps=ig_steps))
        return res.seq_attr.detach().double(), t
    if method == "Lime":  # captum's default surrogate needs scikit-learn, which is not a requirement: its torch ridge
        from captum._utils.models.linear_model import SGDRidge

        wrapped = attr.Lime(classifier.model, interpretable_model=SGDRidge())
    else:
        wrapped = getattr(attr, method)(classifier.model)
        if method == "KernelShap":  # the same: its default regression is scikit-learn's
            from captum._utils.models.linear_model import SGDLinearRegression

            wrapped.interpretable_model = SGDLinearRegression()
    llm = attr.LLMAttribution(wrapped, tok, attr_target="log_prob")
    kind = classifier.spec.replacement
    replacement = " " + classifier.spec.replacement_text if kind == "redacted" else "" if kind == "delete" else \
        classifier.meta.replacement_token
    inp = attr.TextTemplateInput(template, values, baselines=[replacement] * len(values))
    kwargs = {} if method == "FeatureAblation" else {"n_samples": n_samples}
    res, t = timed(lambda: llm.attribute(inp, target=target_word, forward_in_tokens=False, **kwargs))
    return res.seq_attr.detach().double(), t


def loo_of_word_logprob(classifier, batch, target: int) -> torch.Tensor:
    """Leave-one-out of the first label word's log-probability under the LM (captum FeatureAblation's quantity for
    that word as the target), with the engine's cached forward: s(x) - s(x with piece i replaced) [N]. The class
    score of a verbalizer with several words per class is their logsumexp, so this uses the same LM and prompt with
    the first word of each class only."""
    from engine.models.prompt_spec import PromptSpec
    from engine.models.prompted import PromptedClassifier

    spec = classifier.spec.to_dict()
    spec["verbalizer"] = {c: [ws[0]] for c, ws in spec["verbalizer"].items()}
    one = PromptedClassifier(classifier.model, classifier.tokenizer, PromptSpec.from_dict(spec), classifier.max_length,
                             dict(classifier.metadata), classifier.device)
    slot = batch.maskable[0].nonzero().flatten()
    ids = batch.input_ids.repeat(len(slot) + 1, 1)
    ids[torch.arange(1, len(slot) + 1), slot] = one.mask_token_id
    with torch.no_grad():
        s = one.class_scores(ids, batch.attention_mask.repeat(len(slot) + 1, 1))[:, target].double()
    return s[0] - s[1:]


#: the perturbation measures timed, in the table's order
PERTURBATION_MEASURES = ("loo-sign", "occlusion", "kernel-shap", "lime", "shapley-sampling")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-rt-prompt", help="a prompted LM id (single-token label words)")
    p.add_argument("--inputs", type=int, default=2, help="rt test sentences (the shortest-to-median, seeded order)")
    p.add_argument("--shots", type=int, nargs="+", default=[0, 4], help="few-shot examples per prompt (0: the model's own)")
    p.add_argument("--n-samples", type=int, default=50, help="KernelSHAP / LIME coalitions, Shapley-sampling permutations / 5")
    p.add_argument("--ig-steps", type=int, default=20)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--no-captum", action="store_true", help="skip captum (ours cached against uncached only)")
    p.add_argument("--measures", nargs="+", default=[*PERTURBATION_MEASURES, "ig-sign"],
                   choices=[*PERTURBATION_MEASURES, "ig-sign"],
                   help="the measures to time (default: all; on a large prompt captum's Shapley sampling alone takes "
                        "the better part of an hour)")
    p.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = p.parse_args(argv)
    start_bench(args.smoke)
    if args.smoke:
        base, args.inputs, args.shots, args.n_samples, args.ig_steps, sizes = tiny_prompted(), 1, [0], 8, 4, (4,)
        texts = ["a gripping , funny and moving film"]
    else:
        from engine.data import get_dataset
        from engine.models import load_classifier

        base, sizes = load_classifier(args.model), tuple(args.batch_sizes)
        test = sorted(get_dataset("rt").split("test"), key=lambda e: (len(e.primary.split()), e.primary))
        texts = [test[len(test) // 2 + i].primary for i in range(args.inputs)]
    print(f"# bench/llm_perturbation_cache.py · code {code_version()} · torch {torch.__version__} · "
          f"{platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · 1 thread · process CPU time · "
          f"load average {os.getloadavg()[0]:.2f} at start")
    ours = [m for m in PERTURBATION_MEASURES if m in args.measures]
    options = {"kernel-shap": {"n_samples": args.n_samples}, "lime": {"n_samples": args.n_samples},
               "shapley-sampling": {"n_samples": max(1, args.n_samples // 5)}}
    print("\n| prompt | input | T (P prefix, N slot) | measure | rows | ours cached | cached limit | ratio | "
          "ours uncached | captum | captum / ours | prefix share T/(T-P) | scores vs captum |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in args.shots:
        clf = with_shots(base, k)
        for n, text in enumerate(texts):
            batch = clf.batch([text])
            T, N = int(batch.input_ids.shape[1]), int(batch.maskable.sum())
            clf.prefix_cache = True
            rate, best_bs, P = cached_limit(clf, batch, sizes)
            with torch.no_grad():
                target = int(clf.logits(batch).argmax())
            word = clf.spec.verbalizer[clf.classes[target]][0]
            share = T / max(T - P, 1)
            for m in ours:
                ex = get_explainer(m, clf, memo=False, **options.get(m, {}))
                clf.prefix_cache = True
                kv = clf.prefix_kv()
                before = kv.suffix_tokens
                with counting_rows(clf.counted_module) as rows:
                    _, t_ours = timed(lambda ex=ex: ex.attribute(batch, target=torch.tensor([target])))
                n_rows, n_tokens = rows.forward, kv.suffix_tokens - before
                clf.prefix_cache = False
                _, t_plain = timed(lambda ex=ex: ex.attribute(batch, target=torch.tensor([target])))
                clf.prefix_cache = True
                limit = n_tokens / rate
                cap, t_cap, agree = OURS_TO_CAPTUM[m], float("nan"), "—"
                if cap and not args.no_captum:
                    scores, t_cap = captum_run(clf, text, batch, cap, word, args.n_samples, args.ig_steps)
                    if cap == "FeatureAblation":
                        mine = loo_of_word_logprob(clf, batch, target)
                        if scores.numel() == mine.numel():
                            d = (scores.flatten() - mine).abs()
                            agree = (f"median diff {float(d.median()):.0e}, {int((d > 1e-3).sum())} of {d.numel()} "
                                     "pieces > 1e-3 (captum re-tokenises the string: see the docstring)")
                        else:
                            agree = f"{scores.numel()} vs {mine.numel()} features"
                    else:
                        agree = "other samples (not comparable)"
                ratio_cap = f"{t_cap / t_ours:.1f}x" if t_cap == t_cap else "—"
                print(f"| {k}-shot | {n} | {T} ({P}, {N}) | {m} | {n_rows} ({n_tokens}) | {t_ours:.2f} s | {limit:.2f} s | "
                      f"**{t_ours / limit:.2f}x** | {t_plain:.2f} s | {t_cap:.2f} s | {ratio_cap} | {share:.2f} | {agree} |")
            if not args.no_captum and "ig-sign" in args.measures:
                ex = get_explainer("ig-sign", clf, memo=False, steps=args.ig_steps)
                _, t_ig = timed(lambda ex=ex: ex.attribute(batch, target=torch.tensor([target])))
                _, t_cap = captum_run(clf, text, batch, "LayerIntegratedGradients", word, args.n_samples, args.ig_steps)
                print(f"| {k}-shot | {n} | {T} ({P}, {N}) | ig-sign ({args.ig_steps} steps) | — | {t_ig:.2f} s | — | — | — | "
                      f"{t_cap:.2f} s | {t_cap / t_ig:.1f}x | — | other baseline and target (not comparable) |")
            print(f"<!-- suffix tokens/s cached at batch {best_bs}: {rate:.1f} -->")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())
