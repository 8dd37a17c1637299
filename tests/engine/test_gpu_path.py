"""The CUDA path, checked on a CPU where it can be (issue: right and fast on a GPU): determinism turned on
before CUDA starts and recorded, the BiLSTM's gradient without cuDNN in eval mode, memory budgets from free
memory with dtype-aware sizes and halve-and-retry on out-of-memory, and the training loop's opt-in precision.
The end-to-end check on a real GPU is bench/gpu_check.py."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from engine import runtime

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)


@pytest.fixture()
def restore_determinism():
    """Leave torch's global determinism flags as the test found them."""
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
              torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    yield
    torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2], before[3]


# -- 6: deterministic algorithms on CUDA, recorded -------------------------------------------------------------
def test_picking_cuda_turns_deterministic_algorithms_on_before_any_kernel(monkeypatch, restore_determinism):
    """pick_device('auto') on a machine with CUDA switches deterministic algorithms and cuDNN's deterministic
    kernels on, and cuBLAS's workspace setting is in the environment (no CUDA call is made: the device is a name)."""
    torch.use_deterministic_algorithms(False)
    monkeypatch.delenv("ENGINE_DETERMINISTIC", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    device = runtime.pick_device("auto")
    assert device.type == "cuda"
    assert torch.are_deterministic_algorithms_enabled()
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    import os

    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") in (":4096:8", ":16:8")


def test_engine_deterministic_0_leaves_the_fast_kernels(monkeypatch, restore_determinism):
    """ENGINE_DETERMINISTIC=0 turns the flags off on CUDA, and the record says so."""
    torch.use_deterministic_algorithms(True)
    monkeypatch.setenv("ENGINE_DETERMINISTIC", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    runtime.pick_device("cuda")
    assert not torch.are_deterministic_algorithms_enabled()
    assert runtime.determinism()["deterministic_algorithms"] is False


def test_cpu_pick_keeps_the_flags_and_bad_setting_is_refused(monkeypatch, restore_determinism):
    """Picking the CPU changes no global flag; ENGINE_DETERMINISTIC must be 1 or 0."""
    torch.use_deterministic_algorithms(False)
    runtime.pick_device("cpu")
    assert not torch.are_deterministic_algorithms_enabled()
    from engine.errors import InvalidInputError
    from engine.settings import deterministic_request

    monkeypatch.setenv("ENGINE_DETERMINISTIC", "maybe")
    with pytest.raises(InvalidInputError, match="1 or 0"):
        deterministic_request()


def test_training_provenance_records_device_versions_and_determinism_flags(toy_classifier):
    """A checkpoint's metadata says on what device, with which versions and determinism flags it was trained."""
    record = toy_classifier.metadata["runtime"]
    for key in ("device", "torch", "transformers", "deterministic_algorithms", "deterministic_warn_only",
                "cudnn_deterministic", "cublas_workspace_config", "tf32_matmul", "torch_threads"):
        assert key in record, key
    assert record["device"] == str(toy_classifier.device)
    assert record["torch"] == torch.__version__


# -- 2: the BiLSTM's gradient measures on CUDA ------------------------------------------------------------------
def _small_bilstm():
    from engine.models.bilstm import BiLSTMAttentionClassifier, BiLSTMConfig

    torch.manual_seed(0)
    return BiLSTMAttentionClassifier(BiLSTMConfig(vocab_size=30, num_labels=2, embedding_dim=8, hidden_size=4))


def _cudnn_state_in_lstm(model, grad: bool) -> bool:
    """Whether cuDNN was enabled while the model's LSTM ran, for one forward (with or without autograd)."""
    seen = []
    handle = model.encoder.register_forward_pre_hook(lambda *_: seen.append(torch.backends.cudnn.enabled))
    ids = torch.tensor([[2, 5, 6, 7, 3, 0], [2, 8, 9, 3, 0, 0]])
    mask = (ids != 0).long()
    try:
        embeds = model.embeddings(ids).detach().requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            out = model(inputs_embeds=embeds, attention_mask=mask)
            if grad:
                out.logits[:, 1].sum().backward()
    finally:
        handle.remove()
    return seen[0]


def test_bilstm_gradient_in_eval_mode_runs_without_cudnn_and_training_keeps_it():
    """cuDNN refuses the LSTM backward in eval mode: the gradient measures' forward (eval, autograd on) runs the
    LSTM with cuDNN off; training and no-grad inference keep cuDNN."""
    model = _small_bilstm()
    assert torch.backends.cudnn.enabled
    model.eval()
    assert _cudnn_state_in_lstm(model, grad=True) is False
    assert _cudnn_state_in_lstm(model, grad=False) is True
    model.train()
    assert _cudnn_state_in_lstm(model, grad=True) is True
    assert torch.backends.cudnn.enabled, "the flag is restored after the forward"


# -- 11: budgets from free memory, dtype-aware, halve and retry -------------------------------------------------
def _passes(device: str, bf16: bool = False, memory_mb=None):
    """A BatchedPasses over a base-sized (12 x 768) model description on `device` (nothing is allocated)."""
    from engine.importance.batching import BatchedPasses

    cfg = SimpleNamespace(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    classifier = SimpleNamespace(model=SimpleNamespace(config=cfg), device=torch.device(device),
                                 embedding_matrix=torch.zeros(1, dtype=torch.float32))
    passes = BatchedPasses()
    passes.classifier, passes.memory_mb, passes.max_rows, passes.bf16 = classifier, memory_mb, None, bf16
    return passes


def test_cuda_rows_per_pass_follow_the_free_memory(monkeypatch):
    """On CUDA the budget is half the memory free now: 10x the free memory gives about 10x the rows of a
    backward pass at T=512 (fp32, 12 x 768: ~0.8 GB a row); an explicit memory_mb still wins."""
    free = {"bytes": 8 * 2**30}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 80 * 2**30))
    small = _passes("cuda").rows_per_pass(512, backward=True)
    free["bytes"] = 80 * 2**30
    large = _passes("cuda").rows_per_pass(512, backward=True)
    assert small == 5 and large == 54, (small, large)
    assert _passes("cuda", memory_mb=2048).rows_per_pass(512, backward=True) == 2
    from engine.importance.batching import memory_budget_bytes

    assert memory_budget_bytes(torch.device("cpu")) == 1024 * 2**20, "the CPU keeps its budget"


def test_bf16_autocast_counts_two_bytes_an_activation(monkeypatch):
    """Under bf16 autocast activations are 2 bytes though the weights are fp32: twice the rows fit."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (40 * 2**30, 80 * 2**30))
    fp32 = _passes("cuda").rows_per_pass(512, backward=True)
    bf16 = _passes("cuda", bf16=True).rows_per_pass(512, backward=True)
    assert bf16 in (2 * fp32, 2 * fp32 + 1), (fp32, bf16)


def test_erasure_passes_on_cuda_are_sized_by_free_memory(monkeypatch, toy_classifier):
    """Erasure's rows per pass on CUDA come from the free memory and the model's size, not a fixed 65,536 tokens;
    the CPU keeps 4096 tokens a pass."""
    from engine.faithfulness.perturb import rows_per_pass

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (2 * 2**30, 80 * 2**30))
    few = rows_per_pass(64, torch.device("cuda"), classifier=toy_classifier)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (20 * 2**30, 80 * 2**30))
    many = rows_per_pass(64, torch.device("cuda"), classifier=toy_classifier)
    assert 9 * few <= many <= 11 * few
    assert rows_per_pass(64, torch.device("cpu"), classifier=toy_classifier) == 64


@pytest.mark.parametrize("measure", ["ig-sign", "loo-sign"])
def test_out_of_memory_halves_the_rows_and_gives_the_same_scores(known_classifier, measure):
    """A pass that raises torch.cuda.OutOfMemoryError (simulated: more than 3 rows) is retried with half the rows
    until it fits; the scores equal those of a run that used that many rows from the start. One row that does
    not fit raises the error."""
    from engine.importance import get_explainer

    classifier, batch_of = known_classifier([0.5, -1.0, 2.0, 0.25, -0.75])
    batch = batch_of([[4, 5, 6, 7], [8, 4, 6]])
    model = classifier.model
    real_forward = model.forward
    largest = []

    def forward(*args, limit=3, **kwargs):
        rows = (kwargs.get("inputs_embeds") if kwargs.get("inputs_embeds") is not None else kwargs["input_ids"]).shape[0]
        if rows > limit:
            raise torch.cuda.OutOfMemoryError("simulated: CUDA out of memory")
        largest.append(rows)
        return real_forward(*args, **kwargs)

    model.forward = forward
    try:
        retried = get_explainer(measure, classifier, memo=False, max_rows=12).attribute(batch, 1).scores
        assert max(largest) == 3
        direct = get_explainer(measure, classifier, memo=False, max_rows=3).attribute(batch, 1).scores
        assert torch.equal(retried, direct)
        model.forward = lambda *a, **k: forward(*a, limit=0, **k)
        with pytest.raises(torch.cuda.OutOfMemoryError):
            get_explainer(measure, classifier, memo=False, max_rows=12).attribute(batch, 1)
    finally:
        model.forward = real_forward


# -- 13: the training loop -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ["toy", "babi-1"])
def test_examples_tokenised_once_pad_into_the_same_batches_as_collate_examples(toy_classifier, dataset):
    """Training tokenises every example once before the step loop; padding any rows of them together gives
    exactly the batch `collate_examples` makes of those rows (ids, masks, types, segments, offsets, targets)."""
    from engine.data import get_dataset
    from engine.models.batch import collate_examples
    from engine.models.training import _collate, _tokenised_rows

    examples = get_dataset(dataset).split("train")[:40]
    rows = _tokenised_rows(toy_classifier, examples, chunk=16)
    pick = [7, 3, 31, 0, 22, 39]
    got = _collate([rows[i] for i in pick], toy_classifier.tokenizer.pad_token_id)
    want = collate_examples(toy_classifier.tokenizer, [examples[i] for i in pick], toy_classifier.max_length)
    for name in ("input_ids", "attention_mask", "token_type_ids", "segments", "maskable", "target", "truncated"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    assert got.offsets == want.offsets


def test_training_precision_is_opt_in_validated_and_recorded():
    """bf16 training is asked for by TrainConfig(precision=...), recorded in the checkpoint's metadata (and its
    config); an unknown precision is refused with the valid ones listed."""
    from engine.errors import InvalidInputError
    from engine.models import TrainConfig, train_classifier

    with pytest.raises(InvalidInputError, match="fp32, tf32, bf16"):
        TrainConfig(precision="fp16")
    assert TrainConfig().precision == "fp32"
    c = train_classifier(TrainConfig(base_model="tiny", dataset="toy", epochs=1, batch_size=16, train_limit=32,
                                     eval_limit=16, precision="bf16", device="cpu"), show_progress_bar=False)
    assert c.metadata["precision"] == "bf16" and c.metadata["config"]["precision"] == "bf16"
    assert all(p.dtype == torch.float32 for p in c.model.parameters()), "weights stay fp32 under autocast"
    assert not torch.backends.cuda.matmul.allow_tf32


# -- 14: no [B, heads, T, T] float64 copy, one write per beam row ------------------------------------------------
class _Float64Writes:
    """A dispatch mode that records the float64 tensors ops produce (shape) and counts in-place writes into them."""

    def __new__(cls):
        from torch.utils._python_dispatch import TorchDispatchMode

        class Mode(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.shapes, self.writes = [], 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if isinstance(out, torch.Tensor) and out.dtype == torch.float64:
                    self.shapes.append(tuple(out.shape))
                    if func._schema.name.endswith("_") or func._schema.name in ("aten::copy_", "aten::index_put_"):
                        self.writes += 1
                return out

        return Mode()


def test_attention_summaries_average_heads_without_a_whole_float64_copy(monkeypatch):
    """The head average is taken in float64 a few rows at a time (never a [B, heads, T, T] float64 tensor) and the
    three summaries equal, bit for bit, those of averaging the whole float64 copy (the previous computation)."""
    from engine.importance import attention as A

    torch.manual_seed(0)
    B, heads, T = 6, 12, 48
    atts = [torch.softmax(torch.randn(B, heads, T, T), -1) for _ in range(3)]
    query = torch.randint(0, T, (B,))
    reference = A.attention_summaries(atts, query)  # 6 x 12 x 48 x 48 x 8 B < HEAD_MEAN_BYTES: one copy
    layers = [a.to(torch.float64).mean(1) for a in atts]
    rows = torch.arange(B)
    assert torch.equal(reference["attention-cls-last"], layers[-1][rows, query, :])
    monkeypatch.setattr(A, "HEAD_MEAN_BYTES", 2 * heads * T * T * 8)
    with _Float64Writes() as mode:
        chunked = A.attention_summaries(atts, query)
    assert all(s[:2] != (B, heads) for s in mode.shapes if len(s) == 4), "a whole [B, heads, T, T] float64 copy"
    assert max(s[0] for s in mode.shapes if len(s) == 4) == 2
    for k in reference:
        assert torch.equal(chunked[k], reference[k]), k


def test_beam_writes_its_ranks_once_per_row_with_the_previous_ranks(toy_classifier):
    """beam's ranks are written on the host, one write per input (not one per token into a device tensor), and
    are those the previous per-token writes gave on the toy classifier."""
    from engine.importance import get_explainer
    from engine.models import tokenize

    b = tokenize(toy_classifier.tokenizer, ["a good and fine film", "bad awful dull"], max_length=32)
    with _Float64Writes() as mode:
        scores = get_explainer("beam", toy_classifier, memo=False, beam_size=3).attribute(b, 1).scores
    assert scores.tolist() == [[0.0, 4.0, 5.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 3.0, 2.0, 0.0, 0.0, 0.0]]
    assert mode.writes <= len(b), mode.writes


# -- 10: SMaT's student on the chosen device ----------------------------------------------------------------------
def test_student_batches_follow_the_chosen_device_and_the_run_records_it(monkeypatch):
    """Every tensor of a student's mini-batch (explanations and teacher head scores included) goes to the chosen
    device ('meta' stands in for a GPU here); train_student takes the engine's device setting and records it."""
    from engine.errors import InvalidInputError
    from engine.simulability.data import SimSplit
    from engine.simulability.training import StudentConfig, on_device, train_student

    ids = torch.tensor([[2, 5, 6, 3], [2, 6, 5, 3], [2, 5, 5, 3], [2, 6, 6, 3]])
    mask = torch.ones_like(ids)
    split = SimSplit(ids, mask, torch.zeros_like(ids), mask.bool(), torch.tensor([0, 1, 0, 1]),
                     torch.rand(4, 2, 4), {"oracle": torch.full((4, 4), 0.25)})
    moved = on_device(split, torch.device("meta"))
    tensors = [moved.input_ids, moved.attention_mask, moved.token_type_ids, moved.maskable, moved.teacher_pred,
               moved.teacher_scores, moved.explanations["oracle"]]
    assert all(t.device.type == "meta" for t in tensors)
    assert on_device(split, torch.device("cpu")) is split

    from transformers import AutoModel, BertConfig

    from engine.simulability.student import Student

    torch.manual_seed(0)
    config = BertConfig(vocab_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                        max_position_embeddings=8)
    config._attn_implementation = "eager"
    student = Student(AutoModel.from_config(config, add_pooling_layer=False), 2)
    cfg = StudentConfig(max_epochs=1, batch_size=2, lr=0.01)
    monkeypatch.setenv("ENGINE_DEVICE", "cuda")
    if torch.cuda.is_available():  # a GPU machine: the setting is followed and recorded
        on_gpu = train_student(student, split, split, "smat", cfg, seed=0)
        assert torch.device(on_gpu.device).type == "cuda" and on_gpu.teacher_phi.device.type == "cpu"  # phi: CPU copy
    else:  # no GPU: asking for one is refused, never silently run on the CPU
        with pytest.raises(InvalidInputError, match="CUDA is not available"):
            train_student(student, split, split, "none", cfg, seed=0)
    monkeypatch.setenv("ENGINE_DEVICE", "cpu")
    result = train_student(student, split, split, "smat", cfg, seed=0)
    assert result.device == "cpu" and result.teacher_phi.device.type == "cpu"


# -- 8: Ray cells ask for a GPU share and use the GPU they are given ------------------------------------------------
def test_ray_cells_ask_for_a_gpu_fraction_only_on_a_cluster_with_gpus_and_use_the_assigned_one():
    """On a cluster with GPUs every cell asks for a fraction of one; on a CPU cluster for none. A task runs on the
    GPU Ray assigned (its index among the visible devices Ray set), and a task given no GPU on the CPU."""
    from engine.sweeps.executor import RAY_GPU_FRACTION, ray_device, ray_task_options

    assert ray_task_options(4.0) == {"num_gpus": RAY_GPU_FRACTION} and 0 < RAY_GPU_FRACTION <= 1
    assert ray_task_options(0) == {}
    assert ray_device([3], "3") == "cuda:0"
    assert ray_device(["2"], "0,1,2,3") == "cuda:2"
    assert ray_device([1], None) == "cuda:1"
    assert ray_device([], "0") == "cpu"


def test_a_checkpoint_trained_before_the_precision_option_is_still_reused(models_cache, toy_classifier):
    """load_or_train reuses a checkpoint whose recorded config predates `precision` (it was fp32) instead of
    training again."""
    import copy as _copy

    from engine.models import TrainConfig, save_classifier
    from engine.models.reuse import load_or_train

    old = _copy.copy(toy_classifier)
    old.metadata = _copy.deepcopy(toy_classifier.metadata)
    recorded = old.metadata["config"]
    recorded.pop("precision")
    save_classifier(old, "toy-before-precision")
    config = TrainConfig(**{**recorded, "extra": dict(recorded["extra"])})
    said = []
    found = load_or_train(config, "toy-before-precision", log=said.append)
    assert said == ["toy-before-precision: loaded from models_cache (same training configuration)"]
    assert "precision" not in found.metadata["config"]


def test_erasure_halves_its_pass_after_out_of_memory_and_gives_the_same_metrics(toy_classifier, monkeypatch):
    """Erasure's forward passes of perturbed inputs: a pass that raises torch.cuda.OutOfMemoryError (simulated:
    more than 5 rows) is retried with half the rows, and every metric, count and MaSF p-value equals a run that
    used 5 rows a pass from the start; one row that does not fit raises the error."""
    import numpy as np

    import engine.faithfulness.erasure as erasure
    import engine.faithfulness.perturb as perturb
    from engine.data import get_dataset
    from engine.importance import get_explainer
    from engine.ood import fit_masf

    batch = toy_classifier.batch_of(get_dataset("toy").split("test")[:3])
    scores = get_explainer("loo-sign", toy_classifier, memo=False).attribute(batch).scores
    masf = fit_masf(toy_classifier, save=False)
    families = ["comprehensiveness", "sufficiency", "deletion"]
    real_forward = perturb.hidden_forward

    def forward(classifier, attention, *args, limit=5, **kwargs):
        if attention.shape[0] > limit:
            raise torch.cuda.OutOfMemoryError("simulated: CUDA out of memory")
        return real_forward(classifier, attention, *args, **kwargs)

    monkeypatch.setattr(perturb, "rows_per_pass", lambda *a, **k: 5)
    direct = erasure.erasure_metrics(toy_classifier, batch, scores, metrics=families, masf=masf)
    monkeypatch.setattr(perturb, "rows_per_pass", lambda *a, **k: 20)
    monkeypatch.setattr(perturb, "hidden_forward", forward)
    retried = erasure.erasure_metrics(toy_classifier, batch, scores, metrics=families, masf=masf)
    assert direct.values.keys() == retried.values.keys()
    for name in direct.values:
        assert np.array_equal(direct.values[name], retried.values[name], equal_nan=True), name
        assert np.array_equal(direct.p_values[name], retried.p_values[name], equal_nan=True), name
    monkeypatch.setattr(perturb, "hidden_forward", lambda *a, **k: forward(*a, limit=0, **k))
    with pytest.raises(torch.cuda.OutOfMemoryError):
        erasure.erasure_metrics(toy_classifier, batch, scores, metrics=families, masf=masf)


@pytest.mark.parametrize("script, call", [("llm_explain_speed", lambda m, fn: m.timed(fn, 2)),
                                          ("importance", lambda m, fn: m.timed(fn, 2, 60.0)),
                                          ("gpu_check", lambda m, fn: m.timed(fn, 2))])
def test_bench_timers_stop_the_clock_after_the_gpu_finishes(script, call, monkeypatch):
    """A CUDA call returns before its kernels finish: every bench timer synchronises after each timed run, so a
    GPU timing measures the work, not the launch (llm_explain_speed's timer did not, found before its first GPU run)."""
    import importlib.util
    import sys

    import torch

    bench = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location(f"bench_{script}", bench / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    events = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("sync"))
    call(module, lambda: events.append("run"))
    runs = [i for i, e in enumerate(events) if e == "run"]
    timed_runs = runs[1:]  # the first is the warm-up
    assert len(timed_runs) == 2
    assert all(i + 1 < len(events) and events[i + 1] == "sync" for i in timed_runs), events
