"""Simulability (SMaT, Fernandes et al. 2022): how well a student learns to simulate a frozen teacher when
scaffolded by the teacher's explanations, and head-weighted attention explainers learned to scaffold best.
See docs/simulability.md for the method, its differences from the paper and measured runs; modules (the per-head
attention scores and the learned head weights live in engine.importance.head_scores / head_weights: the `smat`
measure reads them without importing simulability):

  explainers    sparsemax head weights, the head-weighted explainer, static explainers, the KL regulariser
  data          SimSplit: the student's examples with the frozen teacher's predictions, head scores, explanations
  teacher       the teacher's contribution, computed once (predictions, head scores, static explanations)
  student       the student: pretrained encoder, scalar mixing, linear head, its own head weights
  meta          one student step and the one-step look-ahead meta-gradient of the teacher's head weights
  training      the training loop with early stopping on validation simulability
  plausibility  sentence-level AUC of explanations against bAbI supporting facts
  runner        cells in the results store: teacher x dataset x explainer x budget x seed
  results       reading runs back: Table-1-shaped summaries, head-weight snapshots, plausibility
"""
