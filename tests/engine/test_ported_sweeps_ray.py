"""ROAR, sanity, simulability and the attention diagnostics on a local Ray cluster (2 CPUs, one torch thread per
task) give the same rows, bit for bit, as in one process, and a second sweep sends nothing to Ray. One cluster
for the test process (conftest.local_ray: starting one costs ~10 s); one test per kind of sweep, each with results folders of its own."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from conftest import ray_environment

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster(local_ray, tmp_path_factory):
    """The session's local Ray cluster (conftest.local_ray), its environment in this process too and one torch
    thread here as in its tasks (the same bits); returns a folder of the module's own for results."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ray_environment(local_ray):
            yield tmp_path_factory.mktemp("ported_ray")
    finally:
        torch.set_num_threads(threads)


def _same(a: pd.DataFrame, b: pd.DataFrame, order: list[str]) -> None:
    a, b = (x.drop(columns="run").sort_values(order, kind="stable").reset_index(drop=True) for x in (a, b))
    pd.testing.assert_frame_equal(a, b)


def test_roar_on_ray_equals_one_process(cluster):
    """ROAR and recursive ROAR of two measures (random stored under both methods): the same curves on Ray as in
    one process."""
    from engine.faithfulness.retraining import run_retraining_sweep
    from engine.models import TrainConfig
    from engine.results import ResultsStore

    config = TrainConfig(base_model="tiny", dataset="toy", strategy="plain", epochs=1, lr=3e-4, batch_size=16,
                         train_limit=48, eval_limit=24)
    for name, address in (("one", None), ("ray", "local")):
        report = run_retraining_sweep(config, ["random", "grad-l2"], seeds=[0], methods=["roar", "recursive-roar"],
                                      levels=[0.5], run="roar", results_dir=cluster / name, log=lambda m: None,
                                      ray=address)
        assert not report.failed and len(report.done) == 4, report.failed
    assert report.backend == "ray"
    _same(ResultsStore(cluster / "one").load("roar"), ResultsStore(cluster / "ray").load("roar"),
          ["method", "measure", "ratio"])


def test_sanity_checks_on_ray_equal_one_process(cluster):
    """Cascading and label randomisation of two measures (one label-randomised twin, trained by one Ray task and
    loaded by the one-process run): the same rows on Ray as in one process."""
    from engine.faithfulness.evaluation import SanityCell, evaluation_store, run_suite
    from engine.models import TrainConfig, save_classifier, train_classifier
    from engine.sweeps import Backend

    quick = train_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=1, lr=3e-4,
                                         batch_size=16, train_limit=48, eval_limit=16), show_progress_bar=False)
    save_classifier(quick, "quick-toy")
    cells = [SanityCell(model="quick-toy", dataset="toy", measure=m, seed=0, check=c, limit=8)
             for c in ("labels", "model") for m in ("random", "grad-l2")]
    on_ray = run_suite(cells, run="s", results_dir=cluster / "ray" / "evaluation", backend=Backend("ray", address="local"))
    assert not on_ray.failed and len(on_ray.done) == 4, on_ray.failed
    here = run_suite(cells, run="s", results_dir=cluster / "one" / "evaluation")  # loads the twin the task trained
    assert not here.failed and len(here.done) == 4, here.failed
    _same(evaluation_store(cluster / "one" / "evaluation").load("s"), evaluation_store(cluster / "ray" / "evaluation").load("s"),
          ["method", "measure", "step"])


def test_simulability_on_ray_equals_one_process(cluster):
    """Students (one of them SMaT) trained in Ray tasks from a teacher precomputed by the driver: the same rows as
    in one process."""
    from engine.models import TrainConfig, save_classifier, train_classifier
    from engine.simulability.runner import run_simulability, simulability_store
    from engine.simulability.training import StudentConfig

    teacher = train_classifier(TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=1, lr=3e-4,
                                           batch_size=16, train_limit=64, eval_limit=16), show_progress_bar=False)
    save_classifier(teacher, "toy-teacher")
    options = dict(budgets=[16], seeds=[0], explainers=["none", "smat"], validation_limit=16, test_limit=16,
                   config=StudentConfig(max_epochs=2, patience=1, batch_size=8))
    for name, address in (("one", None), ("ray", "local")):
        report = run_simulability("toy-teacher", results_dir=str(cluster / name), ray=address, **options)
        assert not report.failed and len(report.done) == 2, report.failed
    _same(simulability_store(str(cluster / "one")).load(), simulability_store(str(cluster / "ray")).load(),
          ["measure", "seed", "metric", "step", "layer", "head"])


def test_attention_diagnostics_on_ray_equal_one_process_and_resume(cluster):
    """W&P's diagnostics, seven cells in two waves (and the best adversary's MLP when one moved attention enough):
    the same summary, seed-variance and adversary tables on Ray as in one process; a second sweep sends nothing to
    Ray."""
    from engine.attention.results import load_attention_results
    from engine.attention.runner import run_attention_diagnostics

    for name, address in (("one", None), ("ray", "local")):
        report = run_attention_diagnostics("toy", seeds=2, lambdas=[0.5], epochs=1, adversary_epochs=1,
                                           mlp_epochs=1, run="r", results_dir=cluster / name, log=lambda m: None,
                                           ray=address)
        assert not report.failed and len(report.done) >= 7, report.failed
    (s1, v1, a1), (s2, v2, a2) = (load_attention_results("r", "toy", cluster / n) for n in ("one", "ray"))
    assert {k: v for k, v in s1.items() if k != "provenance"} == {k: v for k, v in s2.items() if k != "provenance"}
    pd.testing.assert_frame_equal(v1, v2)
    pd.testing.assert_frame_equal(a1, a2)
    again = run_attention_diagnostics("toy", seeds=2, lambdas=[0.5], epochs=1, adversary_epochs=1, mlp_epochs=1,
                                      run="r", results_dir=cluster / "ray", log=lambda m: None, ray="local")
    assert again.done == [] and len(again.skipped) == len(report.done), "stored cells are not sent to Ray again"
