"""The synthetic ROAR / Recursive ROAR setting (R-ROAR Sec. 3.3, Fig. 3): what it must get right."""
from __future__ import annotations

import numpy as np

from engine.faithfulness.synthetic import (
    N_DIMS,
    N_INFORMATIVE,
    curve_area,
    ground_truth,
    make_synthetic,
    recursive_roar,
    roar,
)

SEEDS = range(5)


def test_recursive_roar_equals_the_ground_truth_and_roar_is_worse():
    gaps = []
    for seed in SEEDS:
        data = make_synthetic(seed, n_train=1000, n_test=1000)
        informative = set(np.flatnonzero(data.a))
        order, curve = recursive_roar(data)
        roar_order, roar_curve = roar(data)
        _, gt_curve = ground_truth(data)
        assert len(curve) == len(roar_curve) == len(gt_curve) == N_DIMS + 1
        assert curve[0] > 0.95, "the linear model recovers z from all features"
        # Recursive ROAR removes exactly the informative dims first and its curve is the ground-truth curve.
        assert set(order[:N_INFORMATIVE]) == informative, f"seed {seed}: {order[:N_INFORMATIVE]}"
        assert np.max(np.abs(np.subtract(curve, gt_curve))) < 0.05, f"seed {seed}"
        assert abs(curve[N_INFORMATIVE] - 0.5) < 0.06, "without the informative dims it is at chance"
        # ROAR is never better than Recursive ROAR (larger area = removal hurt less = worse ranking).
        gap = curve_area(roar_curve) - curve_area(curve)
        assert gap > -0.1, f"seed {seed}: ROAR beat Recursive ROAR by {-gap:.3f}"
        if gap > 0.5:
            assert set(roar_order[:N_INFORMATIVE]) != informative, "ROAR is worse because it ranked a distractor dim high"
        gaps.append(gap)
    gaps = np.array(gaps)
    # ROAR is measurably worse: in some draws its first model ranks uninformative dims above a weak informative one.
    assert np.sum(gaps > 0.5) >= 2, f"ROAR should be clearly worse in some seeds, gaps {np.round(gaps, 3)}"
    assert gaps.mean() > 0.5, f"mean area gap {gaps.mean():.3f}"
