"""Training one student against a frozen teacher, with or without scaffolding, and (for SMaT) learning the
teacher's head weights on the way; early stopping on validation simulability (docs/methods.md#plausibility-and-simulability).

Simulability = the share of inputs where the student predicts the teacher's predicted class.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch

from engine.errors import InvalidInputError, SimulabilityCancelled
from engine.simulability.data import SimSplit
from engine.simulability.explainers import EXPLAINERS, HeadWeights, check_explainer
from engine.simulability.meta import meta_gradient, sgd_step
from engine.simulability.student import Student


@dataclass
class StudentConfig:
    """Student and meta-learning hyper-parameters (SMaT's, except the epoch cap, which the paper does not need).

    beta: weight of the explanation KL; None takes the explainer family's (5 attention, 0.2 gradient, 0 none).
    max_epochs caps training; patience: epochs without a better validation simulability before stopping."""

    lr: float = 5e-3
    max_grad_norm: float = 5.0
    weight_decay: float = 0.01
    batch_size: int = 32
    teacher_lr: float = 5e-4
    teacher_max_grad_norm: float = 5.0
    max_epochs: int = 40
    patience: int = 10
    beta: float | None = None
    eval_batch_size: int = 128

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_epochs", "patience", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise InvalidInputError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "teacher_lr"):
            if not getattr(self, name) > 0:
                raise InvalidInputError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.beta is not None and self.beta < 0:
            raise InvalidInputError(f"beta must be >= 0, got {self.beta}")

    def beta_for(self, explainer: str) -> float:
        return EXPLAINERS[check_explainer(explainer)][1] if self.beta is None else float(self.beta)


@dataclass
class StudentResult:
    """What one training run produced. history: one dict per epoch (epoch, steps, train loss, validation
    simulability); head_weights: (step, lambda_T [H]) snapshots for SMaT, the first at step 0;
    teacher_phi: phi_T of the best epoch (SMaT) or None."""

    student: Student
    best_epoch: int
    best_validation: float
    steps: int
    history: list[dict] = field(default_factory=list)
    head_weights: list[tuple[int, list[float]]] = field(default_factory=list)
    teacher_phi: torch.Tensor | None = None  # on the CPU
    device: str = "cpu"  # where the student trained

    @property
    def teacher_weights(self) -> torch.Tensor | None:
        if self.teacher_phi is None:
            return None
        from entmax import sparsemax

        return sparsemax(self.teacher_phi, dim=-1)


def on_device(split: SimSplit, device: torch.device) -> SimSplit:
    """The mini-batch `split` with every tensor (explanations included) on `device` (itself on a CPU); a copy to
    a GPU comes from pinned memory and does not wait."""
    if device.type == "cpu":
        return split

    def move(t: torch.Tensor) -> torch.Tensor:
        return t.pin_memory().to(device, non_blocking=True) if device.type == "cuda" else t.to(device)

    moved = {f.name: move(getattr(split, f.name)) for f in fields(split)
             if isinstance(getattr(split, f.name), torch.Tensor)}
    return replace(split, **moved, explanations={k: move(v) for k, v in split.explanations.items()})


@torch.no_grad()
def simulation_accuracy(student: Student, split: SimSplit, batch_size: int = 128) -> float:
    """Share of `split` where the student's argmax equals the teacher's predicted class (eval mode), on the
    student's device."""
    was_training = student.training
    student.eval()
    device = next(student.parameters()).device
    hits = torch.zeros((), dtype=torch.long, device=device)  # summed on the device: one read at the end
    order = torch.argsort(split.attention_mask.sum(1))  # similar lengths together: little padding
    for start in range(0, len(split), batch_size):
        part = on_device(split.rows(order[start:start + batch_size]), device)
        logits, _ = student(*part.model_inputs(), explain=False)
        hits += (logits.argmax(-1) == part.teacher_pred).sum()
    student.train(was_training)
    return int(hits) / max(1, len(split))


def max_steps(n_train: int, config: StudentConfig) -> int:
    """The step count of a run that never stops early (for progress bars)."""
    return config.max_epochs * math.ceil(n_train / config.batch_size)


def train_student(student: Student, train: SimSplit, validation: SimSplit, explainer: str, config: StudentConfig,
                  seed: int, progress: Callable[[int], None] | None = None,
                  should_stop: Callable[[], bool] | None = None, device: torch.device | str | None = None,
                  ) -> StudentResult:
    """Train `student` on `train` (labels: the teacher's predictions) scaffolded by `explainer`.

    explainer: 'none', a static one whose e_T [N, T] is in `train.explanations`, or 'smat' (needs
    `train.teacher_scores` [N, H, T]: phi_T is learned by the look-ahead meta-gradient on batches of
    `validation`). progress(steps_done_now): called after each step with the number of steps just done.
    device: where the student and its batches go (default: the engine's choice, `ENGINE_DEVICE`: CUDA when
    present); the splits stay on the CPU and each mini-batch is copied over.
    Returns the best-validation-epoch student (its weights restored, left on `device`) and the history."""
    from engine.runtime import pick_device

    check_explainer(explainer)
    device = pick_device(None if device is None else str(device))
    student.to(device)
    beta = config.beta_for(explainer)
    learn = explainer == "smat"
    static = None if explainer == "none" or learn else train.explanations.get(explainer)
    if explainer not in ("none", "smat") and static is None:
        raise InvalidInputError(f"explanations of {explainer!r} were not precomputed for the training examples")
    if learn and train.teacher_scores is None:
        raise InvalidInputError("SMaT needs the teacher's head scores of the training examples")
    dtype = next(student.parameters()).dtype

    teacher = None
    optimiser = None
    if learn:
        teacher = HeadWeights(train.teacher_scores.shape[1]).to(dtype=dtype, device=device)
        optimiser = torch.optim.Adam(teacher.parameters(), lr=config.teacher_lr)
    rng = np.random.default_rng(seed)
    val_rng = np.random.default_rng(seed + 1)
    val_order = val_rng.permutation(len(validation))
    val_pos = 0
    steps_per_epoch = math.ceil(len(train) / config.batch_size)

    result = StudentResult(student=student, best_epoch=0, best_validation=-1.0, steps=0, device=str(device))
    if learn:
        result.head_weights.append((0, teacher.weights().detach().tolist()))
    best_state, best_phi, since_best = None, None, 0
    student.train()
    for epoch in range(1, config.max_epochs + 1):
        order = rng.permutation(len(train))
        losses = []
        for step in range(steps_per_epoch):
            if should_stop is not None and should_stop():
                raise SimulabilityCancelled("the simulability run was cancelled; finished cells are kept")
            batch = on_device(train.rows(order[step * config.batch_size:(step + 1) * config.batch_size]), device)
            if learn:
                with torch.no_grad():
                    e_teacher = teacher(batch.teacher_scores, batch.attention_mask)
            elif static is not None:
                e_teacher = batch.explanations[explainer].to(dtype)
            else:
                e_teacher = None
            losses.append(sgd_step(student, batch, e_teacher, beta, config.lr, config.max_grad_norm,
                                   config.weight_decay))
            if learn:
                take = val_order[val_pos:val_pos + config.batch_size]
                val_pos += config.batch_size
                if val_pos >= len(val_order):
                    val_order, val_pos = val_rng.permutation(len(validation)), 0
                val_batch = on_device(validation.rows(take), device)
                grad, _ = meta_gradient(student, teacher, batch, val_batch, beta, config.lr,
                                        config.max_grad_norm, config.weight_decay, dropout=True)
                teacher.phi.grad = grad
                torch.nn.utils.clip_grad_norm_(teacher.parameters(), config.teacher_max_grad_norm)
                optimiser.step()
                optimiser.zero_grad(set_to_none=True)
            result.steps += 1
            if progress is not None:
                progress(1)
        validation_accuracy = simulation_accuracy(student, validation, config.eval_batch_size)
        result.history.append({"epoch": epoch, "steps": result.steps, "train_loss": float(np.mean(losses)),
                               "validation_simulability": validation_accuracy})
        if learn:
            result.head_weights.append((result.steps, teacher.weights().detach().tolist()))
        if validation_accuracy > result.best_validation:
            result.best_validation, result.best_epoch, since_best = validation_accuracy, epoch, 0
            best_state = copy.deepcopy(student.state_dict())
            best_phi = teacher.phi.detach().cpu().clone() if learn else None
        else:
            since_best += 1
            if since_best >= config.patience:
                if progress is not None:  # the steps that will not run
                    progress((config.max_epochs - epoch) * steps_per_epoch)
                break
    student.load_state_dict(best_state)
    student.eval()
    result.teacher_phi = best_phi
    return result
