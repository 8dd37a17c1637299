"""MaSF calibration and speed on real checkpoints (docs/methods.md#masf; issue 4's must-show).

Calibration: fit on the validation split transformed like training, then the share of p-values below
0.05 and the KS distance to U(0,1) on the test split under several maskings, for a masked-fine-tuned
and a plainly fine-tuned model. Speed: p-values for 1,000 inputs against a naive broadcast comparison
at N_calibration = 2,000, and one input's look-up time beyond the forward pass. In recursive masking:
a step's observation (logits + p-values) from one forward pass, against the forward alone and against a
separate MaSF pass, for one input and for a batch of 32 test inputs.

    python bench/masf.py --masked tiny-rt-masked-s0 --plain tiny-rt-plain-s0
    python bench/masf.py --observe-only --masked minilm-rt-masked-s0
"""
from __future__ import annotations

import argparse
import time

import numpy as np  # noqa: E402
import torch  # noqa: E402
from scipy.stats import kstest  # noqa: E402

from engine.data import get_dataset  # noqa: E402
from engine.faithfulness.recursive import _observe  # noqa: E402
from engine.models import load_classifier, mask_random_fraction, training_transform  # noqa: E402
from engine.ood import MaSF, fit_masf, hidden_state_features, load_masf, masf_pvalues, naive_pvalues  # noqa: E402
from engine.runtime import code_version  # noqa: E402


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
    masf = load_masf(classifier) or fit_masf(classifier)
    meta = classifier.metadata
    test = get_dataset(meta["dataset"], meta.get("split_seed", 0)).split("test")
    rows = []
    for n in (1, 32):
        batch = classifier.batch_of(test[:n])
        target = batch.target.to(classifier.device)
        with torch.no_grad():
            forward = _best(lambda: classifier.logits(batch), repeats)
            two = _best(lambda: (classifier.logits(batch), masf_pvalues(classifier, masf, batch)), repeats)
        one = _best(lambda: _observe(classifier, batch, target, masf), repeats)
        rows.append(f"| {model_id} | {n} x {batch.input_ids.shape[1]} tokens | {forward * 1e3:.1f} ms | {one * 1e3:.1f} ms "
                    f"(+{(one - forward) * 1e3:.1f} ms) | {two * 1e3:.1f} ms (+{(two - forward) * 1e3:.1f} ms) | "
                    f"{two / one:.2f}x |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--masked", default="tiny-rt-masked-s0")
    ap.add_argument("--plain", default="tiny-rt-plain-s0")
    ap.add_argument("--observe-only", action="store_true", help="only the recursive-masking observation table")
    args = ap.parse_args()
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
    main()
