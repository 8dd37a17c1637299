"""Reference values of Quantus 0.6 for faithfulness correlation, Sensitivity-n (Ancona et al.'s per-input form),
sparseness and complexity on fixed seeded inputs: tests/data/quantus_reference.json, read by
tests/engine/test_metric_reference.py, which computes the project's metrics on the same inputs and compares.

Quantus needs no torch for this: its metrics' `evaluate_batch` takes any object with `predict` and `shape_input`,
so the model here is the numpy twin of the tests' `known_classifier` (a bag of words: p_1(x) = sigmoid(sum of the
weights of its tokens), a removed token weighs 0). Each input is a feature vector x_i = w[token_i]; removing a
token is Quantus's baseline replacement by 0 (`perturb_baseline=0.0`), the project's [MASK]. Quantus draws its
subsets with np.random (seeded here); they are recorded in the JSON so the project's metric can be fed the same ones.

Run it in a virtualenv of its own (Quantus pulls no torch; never the project's .venv):

    python3 -m venv /tmp/qv && /tmp/qv/bin/pip install 'quantus==0.6.*' numpy
    /tmp/qv/bin/python scripts/tools/reference_quantus.py > tests/data/quantus_reference.json

`--smoke` (CI, without Quantus) checks the recorded file against this script: the same inputs and explanations from
the same seed, and every recorded faithfulness-correlation and Sensitivity-n value recomputed from its recorded
subsets by the definition (Pearson, over the subsets, of the summed attribution and the drop in p(class 1)).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

try:  # only the writing run needs Quantus (a virtualenv of its own); --smoke reads the recorded file
    import quantus
except ImportError:  # pragma: no cover - the project's .venv has no Quantus
    quantus = None

#: the inputs: token ids (4.. index WEIGHTS[id - 4]), as in tests/engine/test_metric_families.py
WEIGHTS = [1.5, -0.7, 0.3, 2.2, -1.1, 0.8, 0.05, -0.4]
ROWS = [[4, 5, 6, 7, 8, 9, 10, 11], [7, 4, 9, 11, 6], [11, 10, 9, 8, 7, 6, 5, 4, 5, 7]]
SUBSETS = 20
LEVELS = (0.2, 0.3, 0.5)
SEED = 0


class BagOfWords:
    """What Quantus's evaluate_batch calls of a model: predict(x [B, N]) -> [B, 2] class probabilities."""

    def shape_input(self, x, shape, channel_first=None, batched=False):
        return x

    def predict(self, x, **kwargs):
        s = np.asarray(x, float).reshape(len(x), -1).sum(1)
        p1 = 1.0 / (1.0 + np.exp(-s))
        return np.stack([1 - p1, p1], 1)


def explanations(x: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Three explanations of one input [N]: the exact logit attribution, a noisy one, a random one."""
    return {"exact": x.copy(), "noisy": x + rng.normal(0, 0.5, size=x.shape), "random": rng.normal(0, 1, size=x.shape)}


def correlation(x: np.ndarray, a: np.ndarray, size: int) -> tuple[float, list[list[int]]]:
    """Quantus's FaithfulnessCorrelation of one input with subsets of `size`, and the subsets it drew."""
    drawn: list[list[int]] = []
    metric = quantus.FaithfulnessCorrelation(nr_runs=SUBSETS, subset_size=size, abs=False, normalise=False,
                                             perturb_baseline=0.0, return_aggregate=False, disable_warnings=True)
    perturb = metric.perturb_func

    def recording(arr, indices, **kwargs):
        drawn.append(np.asarray(indices)[0].tolist())
        return perturb(arr=arr, indices=indices, **kwargs)

    metric.perturb_func = recording
    value = metric.evaluate_batch(model=BagOfWords(), x_batch=x[None, :].copy(), y_batch=np.array([1]),
                                  a_batch=a[None, :].copy())
    return float(value[0]), drawn


RECORDED = Path(__file__).resolve().parents[2] / "tests" / "data" / "quantus_reference.json"


def correlation_by_definition(x: np.ndarray, a: np.ndarray, subsets: list[list[int]]) -> float:
    """Faithfulness correlation of one input from given subsets: Pearson over the subsets of sum(a[S]) and
    p_1(x) - p_1(x with S set to 0)."""
    model = BagOfWords()
    p = model.predict(x[None, :])[0, 1]
    sums, drops = [], []
    for s in subsets:
        xs = x.copy()
        xs[s] = 0.0
        sums.append(a[s].sum())
        drops.append(p - model.predict(xs[None, :])[0, 1])
    return float(np.corrcoef(sums, drops)[0, 1])


def smoke() -> int:
    """Check tests/data/quantus_reference.json against this script's inputs and the metric's definition."""
    recorded = json.loads(RECORDED.read_text())
    assert recorded["weights"] == WEIGHTS and recorded["seed"] == SEED and recorded["subsets"] == SUBSETS
    rng = np.random.default_rng(SEED)
    w = np.array([0.0] * 4 + WEIGHTS)
    cases = iter(recorded["cases"])
    checked = 0
    for r, row in enumerate(ROWS):
        x = w[row]
        for name, a in explanations(x, rng).items():
            case = next(cases)
            assert (case["row"], case["tokens"], case["explanation"]) == (r, row, name), case["explanation"]
            assert np.allclose(case["scores"], a, atol=1e-12), f"row {r} {name}: the explanation is not this seed's"
            pairs = [(case["faithfulness_correlation"], case["faithfulness_correlation_subsets"])]
            pairs += [(v["value"], v["subsets"]) for v in case["sensitivity_n"].values()]
            for value, subsets in pairs:
                assert len(subsets) == SUBSETS
                mine = correlation_by_definition(x, a, subsets)
                assert np.isnan(value) and np.isnan(mine) or abs(value - mine) < 1e-9, (r, name, value, mine)
                checked += 1
    assert next(cases, None) is None, "the recorded file has more cases than this script writes"
    print(f"{RECORDED.name}: {checked} recorded correlations equal the definition on their recorded subsets")
    return 0


def main() -> int:
    if "--smoke" in sys.argv[1:]:
        return smoke()
    if quantus is None:
        raise SystemExit("Quantus is not installed here: run this in a virtualenv of its own (see the docstring)")
    np.random.seed(SEED)  # Quantus draws its subsets with np.random.choice
    rng = np.random.default_rng(SEED)
    w = np.array([0.0] * 4 + WEIGHTS)
    cases = []
    for r, row in enumerate(ROWS):
        x = w[row]
        for name, a in explanations(x, rng).items():
            case = {"row": r, "tokens": row, "explanation": name, "scores": a.tolist()}
            n = max(1, round(0.2 * len(row)))
            case["faithfulness_correlation"], case["faithfulness_correlation_subsets"] = correlation(x, a, n)
            case["sensitivity_n"] = {}
            for level in LEVELS:
                value, drawn = correlation(x, a, max(1, round(level * len(row))))
                case["sensitivity_n"][f"{level:g}"] = {"value": value, "subsets": drawn}
            mag = np.abs(a)[None, :]
            case["sparseness"] = float(quantus.Sparseness(disable_warnings=True).evaluate_batch(
                x_batch=x[None, :].copy(), a_batch=mag.copy())[0])
            case["complexity"] = float(quantus.Complexity(disable_warnings=True).evaluate_batch(
                x_batch=x[None, :].copy(), a_batch=mag.copy())[0])
            cases.append(case)
    json.dump({"quantus": quantus.__version__, "numpy": np.__version__, "seed": SEED, "subsets": SUBSETS,
               "weights": WEIGHTS, "output": "probability", "removal": "baseline 0.0 (the project's [MASK])",
               "command": "/tmp/qv/bin/python scripts/tools/reference_quantus.py > tests/data/quantus_reference.json",
               "cases": cases}, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
