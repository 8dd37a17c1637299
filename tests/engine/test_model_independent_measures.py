"""Which measures are model-independent is declared on the measure (`Explainer.model_independent`), not known by name:
random is the only one registered, and ROAR / Recursive ROAR share one recursively computed curve for any measure that
declares it (engine.faithfulness.retraining.roar_cells)."""
from __future__ import annotations

from pathlib import Path

from engine.faithfulness.retraining import METHODS, roar_cells
from engine.importance import MEASURES, Explainer, is_model_independent
from engine.models import TrainConfig

CONFIG = TrainConfig(base_model="tiny", dataset="toy", strategy="plain", epochs=1, train_limit=16, eval_limit=8)


def test_random_is_the_only_registered_model_independent_measure():
    assert [name for name in MEASURES if is_model_independent(name)] == ["random"]
    assert MEASURES["random"].model_independent and not Explainer.model_independent
    assert not is_model_independent("no-such-measure")


def test_a_model_independent_measure_gets_one_recursive_cell_per_seed_serving_every_method():
    cells = roar_cells(CONFIG, ["random", "grad-l2"], seeds=[0, 1], levels=[0.5])
    random = [c for c in cells if c.measure == "random"]
    assert [(c.seed, c.methods) for c in random] == [(0, METHODS), (1, METHODS)]
    assert all(c.recursive for c in random), "one recursively drawn curve stands for ROAR's as well"
    assert len(roar_cells(CONFIG, ["random"], seeds=[0], methods=["roar"], levels=[0.5])) == 1
    assert roar_cells(CONFIG, ["random"], seeds=[0], methods=["roar"], levels=[0.5])[0].recursive
    gradient = [c for c in cells if c.measure == "grad-l2"]
    assert sorted((c.seed, c.methods, c.recursive) for c in gradient) == [
        (0, ("recursive-roar",), True), (0, ("roar",), False), (1, ("recursive-roar",), True), (1, ("roar",), False)]


def test_the_declaration_decides_not_the_name(monkeypatch):
    """A measure of another name that declares itself model-independent is grouped as random is; random declared
    otherwise is not."""
    class FixedOrder(Explainer):
        """fixed-order: scores by position only (a stand-in)."""

        name = "fixed-order"
        model_independent = True

    monkeypatch.setitem(MEASURES, "fixed-order", FixedOrder)
    (cell,) = roar_cells(CONFIG, ["fixed-order"], seeds=[0], levels=[0.5])
    assert cell.methods == METHODS and cell.recursive
    monkeypatch.setattr(MEASURES["random"], "model_independent", False)
    assert len(roar_cells(CONFIG, ["random"], seeds=[0], levels=[0.5])) == len(METHODS)


def test_retraining_compares_no_measure_name_with_random():
    """The sweep once chose its grouping, its recursion and its provenance note by `measure == "random"` (3 places)."""
    import ast

    import engine.faithfulness.retraining as retraining

    tree = ast.parse(Path(retraining.__file__).read_text(encoding="utf-8"))
    assert [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
            and any(isinstance(c, ast.Constant) and c.value == "random" for c in [node.left, *node.comparators])] == []
