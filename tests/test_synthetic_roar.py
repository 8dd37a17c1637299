"""The synthetic ROAR / Recursive ROAR setting (R-ROAR Sec. 3.3): what it must get right."""
from __future__ import annotations

import numpy as np

from engine.faithfulness.synthetic import N_INFORMATIVE, make_synthetic, recursive_roar, roar


def test_recursive_roar_removes_the_informative_dimensions_first_and_reaches_chance():
    for seed in range(3):
        data = make_synthetic(seed, n_train=2000, n_test=1000)
        order, curve = recursive_roar(data)
        assert set(order[:N_INFORMATIVE]) == set(np.flatnonzero(data.a)), "only the first 4 dims carry the label"
        assert curve[0] > 0.75, "the linear model learns the label from all features"
        assert abs(curve[N_INFORMATIVE] - 0.5) < 0.06, "without the informative dims it is at chance"
        roar_order, roar_curve = roar(data)
        assert roar_curve[0] == curve[0] and len(roar_curve) == len(curve) == 17
