"""MaSF calibration and speed on real checkpoints (docs/masf.md).

Calibration: fit on the validation split transformed like training, then the share of p-values below
0.05 and the KS distance to U(0,1) on the test split under several maskings, for a masked-fine-tuned
and a plainly fine-tuned model. Over seeds (`--seeds`): for fresh masked fine-tunings <prefix><seed>, the share
of test inputs masked like training with p < 0.05 per seed (by masking: none, partial, all) and its mean over
the seeds with a 95% t-interval (the seeds are independent replications of fine-tuning + calibration + test). Speed: p-values for 1,000 inputs against a naive broadcast comparison
at N_calibration = 2,000, and one input's look-up time beyond the forward pass. In recursive masking:
a step's observation (logits + p-values) from one forward pass, against the forward alone and against a
separate MaSF pass, for one input and for a batch of 32 test inputs.

    python bench/masf.py --masked tiny-rt-masked-s0 --plain tiny-rt-plain-s0
    python bench/masf.py --observe-only --masked minilm-rt-masked-s0
    python bench/masf.py --seeds 1,2,3,4,5 --prefix tiny-rt-masked-s     # the over-seeds table only
    python bench/masf.py --ties tiny-rt-masked-s1                        # the ties tables only
"""
from __future__ import annotations

import argparse
import time

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _smoke import SMOKE_HELP, smoke_checkpoint, use_scratch_folders
from scipy.stats import kstest  # noqa: E402

from engine.data import get_dataset  # noqa: E402
from engine.faithfulness.recursive import observe_step  # noqa: E402
from engine.models import load_classifier, mask_random_fraction, training_transform  # noqa: E402
from engine.ood import (  # noqa: E402
    MaSF,
    calibration_features,
    calibration_strategy,
    fit_masf,
    hidden_state_features,
    load_or_fit_masf,
    masf_pvalues,
    naive_pvalues,
)
from engine.runtime import code_version, configure  # noqa: E402


def test_features(classifier, examples, how: str, seed: int = 99) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    feats = []
    for start in range(0, len(examples), 64):
        batch = classifier.batch_of(examples[start : start + 64]).to("cpu")
        if how == "like-training":
            batch = training_transform(batch, classifier.metadata["strategy"], classifier.mask_token_id, g)
        else:
            batch = mask_random_fraction(batch, float(how.rstrip("%")) / 100, classifier.mask_token_id, g)
        feats.append(hidden_state_features(classifier, batch.to(classifier.device)))
    return torch.cat(feats)


def calibration_rows(model_id: str, maskings: list[str]) -> list[str]:
    classifier = load_classifier(model_id)
    masf = fit_masf(classifier)
    dataset = get_dataset(classifier.metadata["dataset"], classifier.metadata.get("split_seed", 0))
    rows = []
    for how in maskings:
        p = masf.pvalues(test_features(classifier, dataset.split("test"), how))
        rows.append(f"| {model_id} | {how} | {len(p)} | {np.mean(p < 0.05):.1%} | {kstest(p, 'uniform').statistic:.3f} | "
                    f"{MaSF.dataset_pvalue(p):.2g} |")
    return rows


def masking_share(classifier, batch) -> np.ndarray:
    """[B] share of each input's maskable tokens that are the replacement token."""
    from engine.models.batch import SPECIAL

    real = (batch.segments != SPECIAL) & (batch.attention_mask == 1)  # what training_transform may mask
    return ((batch.input_ids == classifier.mask_token_id) & real).sum(1).double().numpy() / real.sum(1).clamp(min=1).numpy()


def seed_row(model_id: str, alpha: float = 0.05, parts_seeds: int = 10) -> dict:
    """One fresh fine-tuning: its MaSF fitted as the tool fits it (parts seed 0, the whole validation split masked
    like training), p-values of the test split masked like training (mask seed 99, as `test_features`); the share
    below alpha overall and by masking; and, to separate the calibration draw from the model, the mean share over
    `parts_seeds` splits of the calibration inputs into the three levels."""
    classifier = load_classifier(model_id)
    meta = classifier.metadata
    dataset = get_dataset(meta["dataset"], meta.get("split_seed", 0))
    cal = calibration_features(classifier, dataset.split("validation"), calibration_strategy(classifier))
    g = torch.Generator().manual_seed(99)
    feats, share = [], []
    test = dataset.split("test")
    for start in range(0, len(test), 64):
        batch = training_transform(classifier.batch_of(test[start : start + 64]).to("cpu"), meta["strategy"],
                                   classifier.mask_token_id, g)
        share.append(masking_share(classifier, batch))
        feats.append(hidden_state_features(classifier, batch.to(classifier.device)))
    feats, share = torch.cat(feats), np.concatenate(share)
    fits = [MaSF(seed=s).fit(cal) for s in range(parts_seeds)]
    p = fits[0].pvalues(feats)
    groups = {"none": share == 0, "partial": (share > 0) & (share < 1), "all": share >= 1}
    exact = MaSF(seed=0, rtol=0.0).fit(cal).pvalues(feats)  # ties by float equality, as fit version 1 compared
    return {"model": model_id, "n": len(p), "n3": int(fits[0].level3.shape[0]), "share": float(np.mean(p < alpha)),
            "share_exact_ties": float(np.mean(exact < alpha)), "epochs": meta.get("config", {}).get("epochs"),
            "ks": float(kstest(p, "uniform").statistic),
            **{f"share_{k}": float(np.mean(p[m] < alpha)) for k, m in groups.items()},
            **{f"n_{k}": int(m.sum()) for k, m in groups.items()},
            "share_parts_mean": float(np.mean([np.mean(f.pvalues(feats) < alpha) for f in fits]))}


def seeds_rows(model_ids: list[str], alpha: float = 0.05) -> list[str]:
    """The over-seeds table and its summary: mean share with a 95% t-interval over the seeds."""
    from scipy.stats import t as student

    rows = [seed_row(m, alpha) for m in model_ids]
    out = [f"| model | epochs | test inputs | p < {alpha:g} | KS distance to U(0,1) | unmasked | partly masked | all masked | "
           f"mean over 10 calibration part splits | ties by float equality (fit v1) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['model']} | {r['epochs']} | {r['n']} | {r['share']:.1%} | {r['ks']:.3f} | {r['share_none']:.1%} "
                   f"(n={r['n_none']}) | {r['share_partial']:.1%} (n={r['n_partial']}) | {r['share_all']:.1%} (n={r['n_all']}) | "
                   f"{r['share_parts_mean']:.1%} | {r['share_exact_ties']:.1%} |")
    for name in ("share", "share_parts_mean", "share_exact_ties"):
        x = np.array([r[name] for r in rows])
        half = student.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else float("nan")
        what = {"share": "as fitted (parts seed 0)", "share_parts_mean": "mean over the 10 part splits",
                "share_exact_ties": "ties by float equality (fit v1)"}[name]
        out.append(f"\nshare of test inputs with p < {alpha:g}, {what}: mean over {len(x)} seeds {x.mean():.2%}, "
                   f"95% t-interval [{x.mean() - half:.2%}, {x.mean() + half:.2%}]")
    return out


def _one_by_one(classifier, batch) -> torch.Tensor:
    """Features [B, L, H] of each row of `batch` computed alone, without padding."""
    import dataclasses

    rows = []
    for i in range(len(batch)):
        n = int(batch.attention_mask[i].sum())
        # 2-d fields are [B, T]: row i up to its length; 1-d ones (the target) row i; anything else as it is
        fields = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
        row = {k: (v[i : i + 1, :n] if isinstance(v, torch.Tensor) and v.ndim == 2 else
                   v[i : i + 1] if isinstance(v, torch.Tensor) and v.ndim == 1 else v) for k, v in fields.items()}
        rows.append(hidden_state_features(classifier, type(batch)(**row).to(classifier.device)))
    return torch.cat(rows)


def _nudge(features: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Half of the float32 features moved one ulp, up or down at random."""
    rng = np.random.default_rng(seed)
    f32 = features.float().numpy()
    towards = np.where(rng.random(f32.shape) < 0.5, np.inf, -np.inf).astype(np.float32)
    return torch.from_numpy(np.where(rng.random(f32.shape) < 0.5, np.nextafter(f32, towards), f32)).double()


def tie_rows(model_id: str) -> list[str]:
    """How often features tie, how far padding moves them, and what one ulp does to the p-values with ties by
    float equality (rtol 0, fit v1) and within the tolerance (docs/masf.md, "Ties")."""
    from engine.ood.masf import SortedRows

    classifier = load_classifier(model_id)
    meta = classifier.metadata
    dataset = get_dataset(meta["dataset"], meta.get("split_seed", 0))
    cal = calibration_features(classifier, dataset.split("validation"), calibration_strategy(classifier))
    g = torch.Generator().manual_seed(99)
    test = dataset.split("test")
    padded, alone = [], []
    for start in range(0, len(test), 64):
        batch = training_transform(classifier.batch_of(test[start : start + 64]).to("cpu"), meta["strategy"],
                                   classifier.mask_token_id, g)
        padded.append(hidden_state_features(classifier, batch.to(classifier.device)))
        alone.append(_one_by_one(classifier, batch))
    padded, alone = torch.cat(padded), torch.cat(alone)
    out = ["| layer | features equal, padded vs alone | largest difference / feature's largest value | test features "
           "equal to a calibration value |", "|---|---|---|---|"]
    for layer in range(padded.shape[1]):
        a, b, c = padded[:, layer], alone[:, layer], cal[:, layer]
        tied = np.mean([(c[:, h][None, :] == a[:, h][:, None]).any(1).double().mean().item() for h in range(c.shape[1])])
        out.append(f"| {layer} | {(a == b).double().mean():.1%} | {((a - b).abs() / c.abs().amax(0)).max():.1e} | {tied:.1%} |")
    out += ["", "| rtol | parts seed | p < 0.05 | p-values moved by one ulp | moved more than 2x | largest move |"
                " level-1 tail counts changed vs rtol 0 |", "|---|---|---|---|---|---|---|"]
    exact_tails = SortedRows(MaSF(seed=0).fit(cal).level1, 0.0).tail_counts(padded.reshape(len(padded), -1).T.contiguous())
    for rtol in (0.0, 1e-5, 1e-4):
        for seed in range(3):
            masf = MaSF(seed=seed, rtol=rtol).fit(cal)
            p, q = masf.pvalues(padded), masf.pvalues(_nudge(padded))
            ratio = np.maximum(p / q, q / p)
            tails = ""
            if seed == 0:
                t = SortedRows(masf.level1, rtol).tail_counts(padded.reshape(len(padded), -1).T.contiguous())
                tails = f"{(t != exact_tails).double().mean():.2%}"
            out.append(f"| {rtol:g} | {seed} | {np.mean(p < 0.05):.1%} | {np.mean(p != q):.1%} | {np.mean(ratio > 2):.1%} | "
                       f"{np.abs(p - q).max():.3f} | {tails} |")
    return out


def speed_rows(shape=(7, 384), n_cal=2000, n_query=1000, repeats=3) -> list[str]:
    rng = np.random.default_rng(0)
    masf = MaSF().fit(rng.normal(size=(n_cal, *shape)))
    x = rng.normal(size=(n_query, *shape))

    def best(fn):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    fast, naive = best(lambda: masf.pvalues(x)), best(lambda: naive_pvalues(masf, x))
    one = best(lambda: masf.pvalues(x[:1]))
    assert np.array_equal(masf.pvalues(x), naive_pvalues(masf, x))
    return [f"| {n_query} inputs, features {shape}, N_cal {n_cal} | {fast * 1e3:.0f} ms | {naive * 1e3:.0f} ms | "
            f"{naive / fast:.0f}x | one input: {one * 1e3:.1f} ms |"]


def _best(fn, repeats: int) -> float:
    def timed():
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # a GPU forward returns before it is done: time the work, not the launch
        return time.perf_counter() - t

    timed()  # warm-up
    return min(timed() for _ in range(repeats))


def observation_rows(model_id: str, repeats: int = 5) -> list[str]:
    """One recursive-masking step's observation of a checkpoint: forward only, logits + MaSF from one forward
    (what recursive masking does), and logits + a separate MaSF forward (what it did before)."""
    classifier = load_classifier(model_id)
    masf = load_or_fit_masf(classifier)
    meta = classifier.metadata
    test = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")
    rows = []
    for n in (1, 32):
        batch = classifier.batch_of(test[:n])
        target = batch.target.to(classifier.device)
        with torch.no_grad():
            forward = _best(lambda: classifier.logits(batch), repeats)
            two = _best(lambda: (classifier.logits(batch), masf_pvalues(classifier, masf, batch)), repeats)
        one = _best(lambda: observe_step(classifier, batch, target, masf), repeats)
        rows.append(f"| {model_id} | {n} x {batch.input_ids.shape[1]} tokens | {forward * 1e3:.1f} ms | {one * 1e3:.1f} ms "
                    f"(+{(one - forward) * 1e3:.1f} ms) | {two * 1e3:.1f} ms (+{(two - forward) * 1e3:.1f} ms) | "
                    f"{two / one:.2f}x |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--masked", default="tiny-rt-masked-s0")
    ap.add_argument("--plain", default="tiny-rt-plain-s0")
    ap.add_argument("--observe-only", action="store_true", help="only the recursive-masking observation table")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds: only the over-seeds calibration table of "
                    "checkpoints <prefix><seed>")
    ap.add_argument("--prefix", default="tiny-rt-masked-s", help="checkpoint id before the seed (with --seeds)")
    ap.add_argument("--ties", default=None, metavar="ID", help="only the ties tables of this checkpoint")
    ap.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = ap.parse_args()
    configure()
    if args.smoke:  # CI: every table's code on toy checkpoints trained for one epoch; the numbers mean nothing
        use_scratch_folders()
        masked, plain = smoke_checkpoint("toy", "masked"), smoke_checkpoint("toy", "plain")
        for row in [*seeds_rows([masked]), *tie_rows(masked), *observation_rows(masked, repeats=1),
                    *calibration_rows(masked, ["like-training", "100%"]), *calibration_rows(plain, ["30%"]),
                    *speed_rows((3, 16), n_cal=200, n_query=50, repeats=1)]:
            print(row)
        return
    if args.ties:
        for row in tie_rows(args.ties):
            print(row)
        print(f"\ncode {code_version()}, torch {torch.__version__}, torch threads {torch.get_num_threads()}")
        return
    if args.seeds:
        for row in seeds_rows([f"{args.prefix}{s}" for s in args.seeds.split(",")]):
            print(row)
        print(f"\ncode {code_version()}, torch {torch.__version__}, torch threads {torch.get_num_threads()}")
        return
    print("| model | inputs | forward only | logits + MaSF, one forward (beyond the forward) | logits, then a MaSF "
          "forward | two passes / one |")
    print("|---|---|---|---|---|---|")
    for row in observation_rows(args.masked):
        print(row)
    if args.observe_only:
        return
    print("\n| model | test inputs masked | n | p < 0.05 | KS distance to U(0,1) | Simes over the set |")
    print("|---|---|---|---|---|---|")
    for row in calibration_rows(args.masked, ["like-training", "0%", "30%", "60%", "100%"]):
        print(row)
    for row in calibration_rows(args.plain, ["like-training", "30%", "60%", "100%"]):
        print(row)
    print("\n| look-up | searchsorted | naive broadcast | ratio | single |")
    print("|---|---|---|---|---|")
    for shape in [(3, 128), (7, 384)]:
        for row in speed_rows(shape):
            print(row)
    print(f"\ncode {code_version()}, torch threads {torch.get_num_threads()}")


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    main()
