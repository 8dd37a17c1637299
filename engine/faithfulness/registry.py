"""The registry of faithfulness metrics, the twin of the measure registry (engine/importance/registry.py): every
metric a row of the results can carry, with its id, family, direction of "better", label in words, what it needs,
its family's options with their defaults, its cost in forward / backward rows, and the function that computes it.

    METRICS["aopc-comprehensiveness"].better        # 'higher'
    better("deletion@0.3")                          # 'lower' (a level after '@' is ignored)
    family_of("soft-nc")                            # 'soft'
    evaluate_families(), card_families()            # what `evaluate --metrics` / `report-card --metrics` take

A metric belongs to one family (what a user asks for: `--metrics comprehensiveness` computes comprehensiveness at
each k and its AOPC). Every consumer reads this module: `evaluate` (its choices, its --help and the direction of
each stored row), the report card (its families, the judge table's rows and labels, the direction of each row),
the Benchmarks page's labels (app/column_labels.py) and the public `engine.ERASURE_METRICS`.

This module imports no torch, numpy or model code (tests/engine/test_metric_registry.py checks it in a subprocess), so
every `--help` reads it: a family's function is named by its dotted path and imported only when it is called.

Orders are part of stored cells' keys: `evaluate`'s default families are listed in FAMILIES' order and the report
card's in the order of their first metric in METRICS (both as they were before this registry), so default runs
resume. A family added later is appended and left out of the defaults (a new default would change every default
cell's key).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.errors import InvalidInputError

HIGHER, LOWER = "higher", "lower"
#: what a metric says: whether the explanation is true to the model, or a property of the explanation's shape or
#: stability that says nothing of faithfulness (sparseness, complexity, sensitivity); 'baseline': a helper row
FAITHFULNESS, PROPERTY, BASELINE = "faithfulness", "property", "baseline"
#: what a family can need: a removal operator (mask / delete / unk ...), gradients, random samples (then seeded),
#: a model fine-tuned with random removal (F-Fidelity), the measure itself (re-run on perturbed inputs: its function
#: is then called with explain=, and only where a measure is evaluated, not a constructed explanation)
NEEDS = ("operator", "gradients", "samples", "masked-fine-tuning", "measure")
#: removal operators that fill a removed token in with another real one (engine/faithfulness/infill.py): every
#: family whose operators are '*' takes them, through a classifier twin whose removal is 'mask'
INFILL_OPERATORS = ("retrieval", "mlm")


@dataclass(frozen=True)
class Family:
    """A family of metrics computed together.

    id: what `--metrics` takes; label: in words; needs: a subset of NEEDS; options: (name, default) of the family's
    options; forward_rows / backward_rows: its cost per input in words (N = maskable tokens of the input);
    function: 'module:function' computing it, or '' where the erasure kernel computes it (engine/faithfulness/
    erasure.py; then `kernel`) or the report card itself (racu, randomisation); evaluate / card: offered by `evaluate` /
    `report-card`; default_evaluate / default_card: in their default selection; operators: the removal operators
    it supports ('*': every one the command offers)."""

    id: str
    label: str
    needs: tuple[str, ...] = ("operator",)
    options: tuple[tuple[str, object], ...] = ()
    forward_rows: str = ""
    backward_rows: str = "0"
    function: str = ""
    evaluate: bool = True
    card: bool = True
    default_evaluate: bool = True
    default_card: bool = True
    operators: tuple[str, ...] = ("*",)
    kernel: bool = False

    def load(self) -> Callable:
        """The family's function (imported now); InvalidInputError for a family the kernel computes."""
        if not self.function:
            raise InvalidInputError(f"metric family {self.id!r} is computed by the erasure kernel or the report card, "
                                    f"not by a function of its own")
        module, _, name = self.function.partition(":")
        return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Metric:
    """One metric.

    id: the row's `metric` (without its '@level'); family: a FAMILIES id; better: HIGHER or LOWER; label: its name
    in tables; definition: one line; kind: FAITHFULNESS, PROPERTY or BASELINE; levels: it is also stored per level
    ('comprehensiveness@0.1'); judge: the row the report card's judge table shows ('comprehensiveness@0.1' for
    comprehensiveness, the id for an aggregate), '' when it is not judged; judge_label: that row's label (default
    `label`); aggregate: one value per input and dataset that the Benchmarks page and docs tables offer."""

    id: str
    family: str
    better: str
    label: str
    definition: str
    kind: str = FAITHFULNESS
    levels: bool = False
    judge: str = ""
    judge_label: str = ""
    aggregate: bool = False
    reference: str = ""  # the paper (and the reference implementation) it follows

    @property
    def options(self) -> tuple[tuple[str, object], ...]:
        return FAMILIES[self.family].options

    @property
    def needs(self) -> tuple[str, ...]:
        return FAMILIES[self.family].needs

    @property
    def cost(self) -> tuple[str, str]:
        """(forward rows, backward rows) per input, in words."""
        f = FAMILIES[self.family]
        return f.forward_rows, f.backward_rows


FAMILIES: dict[str, Family] = {}
METRICS: dict[str, Metric] = {}


def register_family(family: Family) -> Family:
    """Add a family; a duplicate id is an error (two modules cannot silently shadow each other)."""
    if family.id in FAMILIES and FAMILIES[family.id] != family:
        raise InvalidInputError(f"metric family {family.id!r} is registered twice")
    if any(n not in NEEDS for n in family.needs):
        raise InvalidInputError(f"metric family {family.id!r} needs {family.needs}; known needs: {', '.join(NEEDS)}")
    FAMILIES[family.id] = family
    return family


def register(metric: Metric) -> Metric:
    """Add a metric of a registered family; a duplicate id, an unknown family or direction is an error."""
    if metric.id in METRICS and METRICS[metric.id] != metric:
        raise InvalidInputError(f"metric {metric.id!r} is registered twice")
    if metric.family not in FAMILIES:
        raise InvalidInputError(f"metric {metric.id!r}: unknown family {metric.family!r}; known: {', '.join(FAMILIES)}")
    if metric.better not in (HIGHER, LOWER):
        raise InvalidInputError(f"metric {metric.id!r}: better must be {HIGHER!r} or {LOWER!r}, got {metric.better!r}")
    if metric.kind not in (FAITHFULNESS, PROPERTY, BASELINE):
        raise InvalidInputError(f"metric {metric.id!r}: unknown kind {metric.kind!r}")
    METRICS[metric.id] = metric
    return metric


def get_metric(name: str) -> Metric:
    """The Metric of `name` (with or without '@level'); UnknownMetric (InvalidInputError) lists the known ids."""
    base = name.split("@")[0]
    metric = METRICS.get(base)
    if metric is None:
        raise InvalidInputError(f"unknown metric {name!r}; known metrics: {', '.join(METRICS)}")
    return metric


def better(name: str) -> str:
    """'higher' or 'lower': which direction of metric `name` (with or without '@level') is better."""
    return get_metric(name).better


def family_of(name: str) -> str:
    """The family id of metric `name` (with or without '@level')."""
    return get_metric(name).family


def metric_label(name: str) -> str:
    """A metric's label in words with its direction: 'AOPC comprehensiveness (higher: more faithful)'; a property's
    direction says what it is ('sparseness (higher: sparser)' is not a verdict on faithfulness). A level after '@'
    is shown as a percentage. An unknown name is returned as it is."""
    base, _, level = name.partition("@")
    metric = METRICS.get(base)
    if metric is None:
        return name
    what = {FAITHFULNESS: "more faithful", BASELINE: "larger"}.get(metric.kind, "a property, not faithfulness")
    at = f" at {float(level):.0%}" if level else ""
    return f"{metric.label}{at} ({metric.better}: {what})"


def family_options(family: str) -> dict[str, object]:
    """{option: default} of `family`."""
    return dict(FAMILIES[family].options)


def metrics_of(family: str) -> list[str]:
    """The metric ids of `family`, in registry order."""
    return [m.id for m in METRICS.values() if m.family == family]


def evaluate_families() -> list[str]:
    """The families `evaluate --metrics` takes, in FAMILIES' order."""
    return [f.id for f in FAMILIES.values() if f.evaluate]


def default_evaluate_families() -> list[str]:
    """`evaluate`'s default families (part of the default cells' keys: keep their order)."""
    return [f.id for f in FAMILIES.values() if f.evaluate and f.default_evaluate]


def card_families() -> list[str]:
    """The families `report-card --metrics` takes, in the order of their first metric in METRICS."""
    out: list[str] = []
    for m in METRICS.values():
        if FAMILIES[m.family].card and m.family not in out:
            out.append(m.family)
    return out + [f.id for f in FAMILIES.values() if f.card and f.id not in out]


def default_card_families() -> list[str]:
    """The report card's default families (part of the default cells' keys: keep their order)."""
    return [f for f in card_families() if FAMILIES[f].default_card]


def kernel_families() -> list[str]:
    """The families the erasure kernel computes (erasure_metrics), in FAMILIES' order."""
    return [f.id for f in FAMILIES.values() if f.kernel]


def function_families() -> list[str]:
    """The families computed by a function of their own (Family.function), in FAMILIES' order."""
    return [f.id for f in FAMILIES.values() if f.function]


def judges() -> dict[str, tuple[str, str]]:
    """The report card's judges in table order: judge row (the `metric` of its rows) -> (label, direction)."""
    return {m.judge: (m.judge_label or m.label, m.better) for m in METRICS.values() if m.judge}


def aggregates() -> list[str]:
    """The metrics with one value per input that dataset tables and the Benchmarks page offer, in registry order."""
    return [m.id for m in METRICS.values() if m.aggregate]


def describe_families(families: list[str], judged: bool = False) -> str:
    """`--help`'s listing: per family, its metrics with their direction and definition (one line each); `judged`:
    each judge's row named (the report card)."""
    lines = []
    for fid in families:
        f = FAMILIES[fid]
        lines.append(f"  {fid}: {f.label}" + (f" [needs {', '.join(f.needs)}]" if f.needs else ""))
        for mid in metrics_of(fid):
            m = METRICS[mid]
            tag = "" if m.kind == FAITHFULNESS else f", {m.kind}, not faithfulness" if m.kind == PROPERTY else ""
            judge = f" [judge: {m.judge}]" if judged and m.judge else ""
            lines.append(f"      {mid}{'@level' if m.levels else ''} ({m.better} = better{tag}){judge}: {m.definition}")
    return "\n".join(lines)


# -- the families and metrics -------------------------------------------------------------------------------------
# Order matters (module docstring): evaluate's erasure families first in the kernel's order, then the others.
_BINS = (("bins", (0.01, 0.05, 0.10, 0.20, 0.50)),)
_RATIOS = (("ratios", tuple(i / 10 for i in range(11))),)
for _f in (
    Family("comprehensiveness", "remove the top k% tokens (ERASER)", options=_BINS, kernel=True,
           forward_rows="1 + |bins| (shared with the other erasure families)"),
    Family("sufficiency", "keep only the top k% tokens (ERASER)", options=_BINS, kernel=True,
           forward_rows="|bins| (shared)"),
    Family("deletion", "deletion curve (Petsiuk et al. 2018)", options=_RATIOS, kernel=True,
           forward_rows="|ratios| (shared)"),
    Family("insertion", "insertion curve (Petsiuk et al. 2018)", options=_RATIOS, kernel=True,
           forward_rows="|ratios| (shared)"),
    Family("decision-flip", "tokens removed until the prediction changes", forward_rows="N (shared)", kernel=True),
    Family("soft", "soft comprehensiveness / sufficiency (Zhao & Aletras 2023)", needs=("samples",), kernel=True,
           options=(("soft_draws", 5),), forward_rows="2 soft_draws + 1 (from embeddings)", operators=("mask",)),
    # offered by evaluate, computed only when asked for (it needs a masked-fine-tuned model)
    Family("f-fidelity", "F-Fidelity (Zheng et al. 2025)", needs=("operator", "samples", "masked-fine-tuning"),
           options=(("alpha", 0.5), ("beta", 1.0), ("draws", 50)), forward_rows="1 + 2 draws |levels|",
           default_evaluate=False, operators=("mask",)),
    Family("naopc", "AOPC normalised by its per-input bounds (Edin et al. 2025)",
           options=(("beam", 5), ("max_exact", 12)), forward_rows="2^N - 1 up to 12 tokens, about 5 N^2 beyond",
           evaluate=False, operators=("mask", "unk", "pad", "redacted")),
    Family("racu", "RACU on the fixed ranking: area between random's and the ranking's deletion curve",
           needs=("operator", "samples"), options=(("random_seeds", 5),),
           forward_rows="|ratios| (shared) + 5 |ratios| for random's curves", evaluate=False),
    Family("randomisation", "the top-k set against random k-sets of the same input (ICE)", needs=("operator", "samples"),
           options=(("random_sets", 99), ("ties", "half")), forward_rows="2 + random_sets", evaluate=False),
    # families computed by a function of their own (Family.function); appended, and not in any default (see above)
    Family("faithfulness-correlation", "faithfulness correlation over random token subsets (Bhatt et al. 2020)",
           needs=("operator", "samples"), options=(("subsets", 20), ("subset_fraction", 0.2), ("output", "probability")),
           forward_rows="1 + subsets", function="engine.faithfulness.correlation:faithfulness_correlation",
           default_evaluate=False, default_card=False),
    Family("infidelity", "infidelity under random token removal (Yeh et al. 2019; captum.metrics.infidelity)",
           needs=("operator", "samples"),
           options=(("samples", 20), ("removal_probability", 0.2), ("normalize", False), ("output", "probability")),
           forward_rows="1 + samples", function="engine.faithfulness.infidelity:infidelity",
           default_evaluate=False, default_card=False),
    Family("sensitivity", "max- and avg-sensitivity: the measure re-run on inputs with a token replaced (Yeh et al. "
           "2019; captum.metrics.sensitivity_max; avg: the mean over the same neighbours)", needs=("operator", "samples", "measure"),
           options=(("samples", 10), ("tokens", 1)), forward_rows="the measure's, 1 + samples times; + samples "
           "for the MaSF p-values", backward_rows="the measure's, 1 + samples times",
           function="engine.faithfulness.sensitivity:max_sensitivity", card=False, default_evaluate=False,
           default_card=False, operators=("mask",)),
    Family("sensitivity-n", "Sensitivity-n: faithfulness correlation per subset size n (Ancona et al. 2018)",
           needs=("operator", "samples"),
           options=(("levels", (0.1, 0.2, 0.3, 0.5)), ("subsets", 20), ("output", "probability")),
           forward_rows="1 + |levels| subsets", function="engine.faithfulness.sensitivity_n:sensitivity_n",
           default_evaluate=False, default_card=False),
    Family("properties", "the explanation's shape: sparseness and complexity (properties, not faithfulness)",
           needs=(), forward_rows="0", function="engine.faithfulness.properties:explanation_properties",
           default_evaluate=False, default_card=False),
    Family("pi-soft", "pi-Soft-NC / pi-Soft-NS: Soft-NC / Soft-NS with every explanation's expected share of kept "
           "tokens matched (arXiv 2601.03089)", needs=("samples",), kernel=True,
           options=(("soft_draws", 5), ("keep_share", 0.5)), forward_rows="2 soft_draws + 1 (from embeddings)",
           default_evaluate=False, default_card=False, operators=("mask",)),
):
    register_family(_f)

for _m in (
    # racu first: the report card's families and judges are in this order (module docstring)
    Metric("acu", "racu", HIGHER, "ACU (fixed ranking)", "area between random's deletion curve and this ranking's "
           "(RACU's numerator; orders explanations as RACU does)", judge="acu", judge_label="RACU (fixed ranking)"),
    Metric("racu-norm", "racu", HIGHER, "RACU's denominator", "the random curve's own area above its last point "
           "(dataset RACU = mean acu / mean racu-norm)", kind=BASELINE),
    Metric("comprehensiveness", "comprehensiveness", HIGHER, "comprehensiveness",
           "p_c(x) - p_c(x without its top-k% tokens)", levels=True, judge="comprehensiveness@0.1",
           judge_label="comprehensiveness@10%", reference="DeYoung et al. 2020"),
    Metric("sufficiency", "sufficiency", LOWER, "sufficiency", "p_c(x) - p_c(only the top-k% tokens kept)",
           levels=True, judge="sufficiency@0.1", judge_label="sufficiency@10%", reference="DeYoung et al. 2020"),
    Metric("aopc-comprehensiveness", "comprehensiveness", HIGHER, "AOPC comprehensiveness",
           "mean comprehensiveness over k in {1, 5, 10, 20, 50}%", judge="aopc-comprehensiveness", aggregate=True),
    Metric("aopc-sufficiency", "sufficiency", LOWER, "AOPC sufficiency",
           "mean sufficiency over k in {1, 5, 10, 20, 50}%", judge="aopc-sufficiency", aggregate=True),
    Metric("naopc-comprehensiveness", "naopc", HIGHER, "NAOPC comprehensiveness",
           "aopc-comprehensiveness normalised per input by its worst and best attainable AOPC, (AOPC - L) / (U - L) "
           "(Edin et al. 2025; engine/faithfulness/naopc.py)", judge="naopc-comprehensiveness", judge_label="NAOPC"),
    Metric("ffid-plus", "f-fidelity", HIGHER, "F-Fidelity+",
           "F-Fidelity+ (Zheng et al. 2025): p_c(x) - p_c(x with each top-ceil(sN) token removed with prob. rho), mean "
           "over draws and levels s (engine/faithfulness/ffidelity.py)", judge="ffid-plus"),
    Metric("ffid-minus", "f-fidelity", LOWER, "F-Fidelity-",
           "F-Fidelity-: as ffid-plus with the removals drawn over the bottom-ceil(sN) tokens", judge="ffid-minus"),
    Metric("ffid-plus-acc", "f-fidelity", HIGHER, "F-Fidelity+ (accuracy)",
           "F-Fidelity+, accuracy version: 1(pred(x) = c) - share of draws still predicting c"),
    Metric("ffid-minus-acc", "f-fidelity", LOWER, "F-Fidelity- (accuracy)",
           "F-Fidelity-, accuracy version (removals over the bottom tokens)"),
    Metric("soft-comprehensiveness", "soft", HIGHER, "soft comprehensiveness",
           "p_c(x) - p_c(x with embedding dims kept with prob 1 - s_t)", judge="soft-comprehensiveness", aggregate=True),
    Metric("soft-sufficiency", "soft", LOWER, "soft sufficiency", "p_c(x) - p_c(x with embedding dims kept with prob s_t)",
           judge="soft-sufficiency", aggregate=True),
    Metric("soft-nc", "soft", HIGHER, "Soft-NC",
           "Soft-NC (Zhao & Aletras 2023): mean per draw of clip(max(0, p_c(x) - p_c(x')) / (1 - S0), 0, 1)",
           aggregate=True),
    Metric("soft-ns", "soft", HIGHER, "Soft-NS",
           "Soft-NS (Zhao & Aletras 2023): mean per draw of clip(1 - max(0, p_c(x) - p_c(x')) / (1 - S0), 0, 1)",
           aggregate=True),
    Metric("deletion", "deletion", LOWER, "deletion",
           "p_c after removing the top r of the tokens (one point of the deletion curve)", levels=True),
    Metric("deletion-area", "deletion", LOWER, "deletion area", "area under the deletion curve (trapezoid over r = 0..1)",
           judge="deletion-area", aggregate=True),
    Metric("insertion", "insertion", HIGHER, "insertion",
           "p_c after revealing the top r of the tokens in a fully removed input", levels=True),
    Metric("insertion-area", "insertion", HIGHER, "insertion area",
           "area under the insertion curve (trapezoid over r = 0..1)", judge="insertion-area", aggregate=True),
    Metric("flip-fraction", "decision-flip", LOWER, "flip fraction",
           "fraction of tokens removed in ranking order until the prediction changes (1 if never)", aggregate=True),
    Metric("never-flipped", "decision-flip", LOWER, "never flipped",
           "1 when removing every token in ranking order never changes the prediction"),
    Metric("top1-flip", "decision-flip", HIGHER, "top-1 flip",
           "1 when removing the top-1 token changes the prediction (mean: top-1 flip rate)", judge="top1-flip",
           aggregate=True),
    Metric("randomisation-win-rate", "randomisation", HIGHER, "randomisation test (win rate)",
           "share of random k-sets (drawn without the top-k set itself) whose removal lowers p_c less than the top-k "
           "set's (ties half; ICE counts them as losses: ties='loss'); p-value floor 1 / (random_sets + 1)",
           judge="randomisation-win-rate"),
    Metric("faithfulness-correlation", "faithfulness-correlation", HIGHER, "faithfulness correlation",
           "Pearson, over random subsets S of round(20%) of the tokens, of sum_{i in S} phi_i and p_c(x) - p_c(x without "
           "S) (engine/faithfulness/correlation.py)", judge="faithfulness-correlation", aggregate=True,
           reference="Bhatt, Weller & Moura 2020"),
    Metric("infidelity", "infidelity", LOWER, "infidelity",
           "E[(I . phi - (p_c(x) - p_c(x without the tokens of I)))^2], I: each token removed with prob. 0.2 "
           "(captum.metrics.infidelity; engine/faithfulness/infidelity.py)", judge="infidelity", aggregate=True,
           reference="Yeh et al. 2019"),
    Metric("max-sensitivity", "sensitivity", LOWER, "max-sensitivity", "max over 10 inputs with one token replaced of "
           "||phi(x') - phi(x)|| / ||phi(x)||, the measure re-run on each (captum.metrics.sensitivity_max; "
           "engine/faithfulness/sensitivity.py; robustness, lower: more stable)", kind=PROPERTY, aggregate=True,
           reference="Yeh et al. 2019"),
    Metric("avg-sensitivity", "sensitivity", LOWER, "avg-sensitivity", "mean over the same 10 inputs with one token "
           "replaced of ||phi(x') - phi(x)|| / ||phi(x)|| (captum has max only; engine/faithfulness/sensitivity.py; "
           "robustness, lower: more stable)", kind=PROPERTY, aggregate=True, reference="Yeh et al. 2019"),
    Metric("sensitivity-n", "sensitivity-n", HIGHER, "Sensitivity-n",
           "Pearson, over 20 random n-subsets S of the tokens (n = round(level N)), of sum_{i in S} phi_i and p_c(x) - "
           "p_c(x without S), per level (engine/faithfulness/sensitivity_n.py)", levels=True,
           reference="Ancona et al. 2018"),
    Metric("sensitivity-n-mean", "sensitivity-n", HIGHER, "Sensitivity-n (mean over n)",
           "the mean of sensitivity-n over the levels 10, 20, 30, 50% where it is defined", judge="sensitivity-n-mean",
           aggregate=True, reference="Ancona et al. 2018"),
    Metric("sparseness", "properties", HIGHER, "sparseness", "Gini index of |phi| over the maskable tokens: 0 for equal "
           "scores, (n - 1) / n for one non-zero score (higher: sparser)", kind=PROPERTY, aggregate=True,
           reference="Chalasani et al. 2020"),
    Metric("complexity", "properties", LOWER, "complexity", "entropy of |phi| / sum |phi| over the maskable tokens: 0 "
           "for one non-zero score, log n for equal scores (lower: simpler)", kind=PROPERTY, aggregate=True,
           reference="Bhatt, Weller & Moura 2020"),
    # appended: a metric's place orders the card's families and judges, which stored cells' keys use
    Metric("pi-soft-nc", "pi-soft", HIGHER, "pi-Soft-NC",
           "Soft-NC with keep probabilities shifted so that every explanation keeps, in expectation, the same share "
           "of its input's maskable tokens (keep_share)", judge="pi-soft-nc", aggregate=True,
           reference="arXiv 2601.03089 (2026); Zhao & Aletras 2023"),
    Metric("pi-soft-ns", "pi-soft", HIGHER, "pi-Soft-NS",
           "Soft-NS with the same matched keep probabilities", judge="pi-soft-ns", aggregate=True,
           reference="arXiv 2601.03089 (2026); Zhao & Aletras 2023"),
):
    register(_m)
del _f, _m, _BINS, _RATIOS


#: The erasure kernel's metrics as {id: (direction, definition)}: the public `engine.ERASURE_METRICS` (a view of the
#: registry kept for notebooks that read it; the report card's own rows, acu / racu-norm / randomisation, are left out)
ERASURE_METRICS: dict[str, tuple[str, str]] = {
    m.id: (m.better, m.definition) for m in METRICS.values()
    if m.family not in ("racu", "randomisation") and not FAMILIES[m.family].function}


@dataclass
class MetricValues:
    """What a family's function returns for B inputs (the shape of an ErasureResult's tables).

    values[name] [B]: the metric per input; n_perturbed[name] [B]: perturbed inputs it rests on (0 for a property of
    the scores alone); n_ood[name] [B]: how many of them MaSF calls out of distribution (NaN without MaSF);
    p_values[name]: their p-values, flat; forward_rows / backward_rows: rows this call forwarded / back-propagated;
    options: what was used (recorded in provenance)."""

    values: dict = field(default_factory=dict)
    n_perturbed: dict = field(default_factory=dict)
    n_ood: dict = field(default_factory=dict)
    p_values: dict = field(default_factory=dict)
    forward_rows: int = 0
    backward_rows: int = 0
    options: dict = field(default_factory=dict)

    def add_to(self, result) -> None:
        """Put these values beside an ErasureResult's (in place), as add_naopc / add_ffidelity do."""
        for mine, theirs in ((result.values, self.values), (result.n_perturbed, self.n_perturbed),
                             (result.n_ood, self.n_ood), (result.p_values, self.p_values)):
            mine.update(theirs)
        result.forward_rows += self.forward_rows
        result.options.update(self.options)
