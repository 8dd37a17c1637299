"""One training step of SMaT: the student's SGD step and the one-step look-ahead meta-gradient of the
teacher's head coefficients phi_T (docs/methods.md#plausibility-and-simulability).

    1. student step:  theta <- theta - lr * (clip(g) + wd * theta),  g = d/dtheta [L_sim + beta KL(e_T || e_S)]
    2. pilot step:    theta' = theta - lr * (clip(g') + wd * theta), g' the same gradient at the new theta,
                      taken with create_graph=True (written by hand, not torch.optim, so the graph is kept)
    3. outer loss:    CE(S_theta'(x_val), T(x_val)), dropout off, no explanation term
    4. phi_T <- Adam(d outer / d phi_T)

phi_T reaches the outer loss only through the theta-gradient of the KL term (second order): beta = 0 gives
exactly 0, and a first-order approximation would too. The student is never reset; theta' is discarded.
theta here is every parameter of the `Student`, its own explainer's phi_S included.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from engine.simulability.data import SimSplit
from engine.simulability.explainers import HeadWeights, explanation_kl
from engine.simulability.student import Student


def student_loss(student: Student, params: dict[str, torch.Tensor], batch: SimSplit, e_teacher: torch.Tensor | None,
                 beta: float) -> torch.Tensor:
    """L_sim + beta * KL(e_T || e_S) of the student with weights `params` on `batch` (a scalar).

    L_sim: cross-entropy against the teacher's predicted class. e_teacher [B, T] or None (no explanation).
    The KL is computed whenever e_teacher is given, also for beta = 0 (so its gradient is an exact 0)."""
    explain = e_teacher is not None
    logits, e_student = functional_call(student, params, batch.model_inputs(), {"explain": explain})
    loss = F.cross_entropy(logits, batch.teacher_pred)
    if explain:
        loss = loss + beta * explanation_kl(e_teacher, e_student, batch.attention_mask)
    return loss


def _clip_scale(grads: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """min(1, max_norm / ||g||) for the global norm over all gradients (differentiable)."""
    norm = torch.sqrt(sum((g * g).sum() for g in grads))
    return torch.clamp(max_norm / (norm + 1e-6), max=1.0)


def sgd_step(student: Student, batch: SimSplit, e_teacher: torch.Tensor | None, beta: float, lr: float,
             max_grad_norm: float, weight_decay: float) -> float:
    """Step 1: one in-place SGD step of every student parameter (global-norm clipping, weight decay added to
    the gradient, no momentum). e_teacher must not require grad. Returns the loss."""
    params = dict(student.named_parameters())
    loss = student_loss(student, params, batch, e_teacher, beta)
    names = list(params)
    grads = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
    grads = [torch.zeros_like(params[n]) if g is None else g for n, g in zip(names, grads)]
    scale = _clip_scale(grads, max_grad_norm)
    with torch.no_grad():
        for n, g in zip(names, grads):
            p = params[n]
            p.sub_(lr * (g * scale + weight_decay * p))
    return float(loss.detach())


def lookahead(student: Student, batch: SimSplit, e_teacher: torch.Tensor, beta: float, lr: float, max_grad_norm: float,
              weight_decay: float) -> dict[str, torch.Tensor]:
    """Step 2: theta' after one differentiable SGD step from the current weights (taken as constants).

    e_teacher [B, T] carries the graph to phi_T; theta' is a function of it."""
    theta = {n: p.detach().requires_grad_(True) for n, p in student.named_parameters()}
    loss = student_loss(student, theta, batch, e_teacher, beta)
    names = list(theta)
    grads = torch.autograd.grad(loss, [theta[n] for n in names], create_graph=True, allow_unused=True)
    grads = [torch.zeros_like(theta[n]) if g is None else g for n, g in zip(names, grads)]
    scale = _clip_scale(grads, max_grad_norm)
    return {n: theta[n] - lr * (g * scale + weight_decay * theta[n]) for n, g in zip(names, grads)}


def outer_loss(student: Student, params: dict[str, torch.Tensor], val_batch: SimSplit) -> torch.Tensor:
    """Step 3: cross-entropy of the student with `params` against the teacher on a validation batch, dropout
    off (the student's train/eval mode is restored), no explanation term."""
    was_training = student.training
    student.eval()
    try:
        logits, _ = functional_call(student, params, val_batch.model_inputs(), {"explain": False})
    finally:
        student.train(was_training)
    return F.cross_entropy(logits, val_batch.teacher_pred)


def meta_gradient(student: Student, teacher_explainer: HeadWeights, batch: SimSplit, val_batch: SimSplit, beta: float,
                  lr: float, max_grad_norm: float, weight_decay: float, dropout: bool = True,
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(d outer / d phi_T [H], outer loss) for one training batch (with `teacher_scores`) and one validation
    batch. dropout: whether the pilot step runs with dropout (as the student step does); the outer loss never
    does. Leaves the student's weights unchanged."""
    e_teacher = teacher_explainer(batch.teacher_scores, batch.attention_mask)
    was_training = student.training
    student.train(dropout)
    try:
        theta_next = lookahead(student, batch, e_teacher, beta, lr, max_grad_norm, weight_decay)
    finally:
        student.train(was_training)
    loss = outer_loss(student, theta_next, val_batch)
    (grad,) = torch.autograd.grad(loss, [teacher_explainer.phi], allow_unused=True)
    if grad is None:
        grad = torch.zeros_like(teacher_explainer.phi)
    return grad, loss.detach()
