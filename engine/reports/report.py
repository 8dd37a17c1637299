"""Every results table of the documentation, computed from the shipped stores (`results/`) and the published numbers
(`results/published/`), and the generated regions of the docs that hold them.

A table lives in a markdown file between `<!-- report:NAME -->` and `<!-- /report:NAME -->`; `python -m engine docs-tables
--check` compares each region with what its table function gives now, `--write` rewrites the regions. Published
numbers are always in columns whose header says "(published)", and a comparison with a paper is made only between
the same task (our rt with FMM's SST2: both binary sentence sentiment); FMM published no bAbI-1 row, so our bAbI-1
tables show their bAbI-2 row as another task's reference and compute no correlation with it.

This module is the registry (which table lives in which document and what builds it) and the check and rewrite of
the regions; the tables are built by the `*_tables` modules beside it.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import write_text
from engine.errors import InvalidInputError
from engine.reports.attention_tables import attention_table
from engine.reports.attnlrp_tables import attnlrp_table
from engine.reports.erasure_tables import (
    agreement_pairs,
    evaluation_tables,
    metric_columns,
    operator_comparison,
    sanity_curves,
    sanity_verdicts,
)
from engine.reports.groundtruth_tables import (
    cost_markdown,
    interaction_markdown,
    judge_markdown,
    operator_markdown,
    recovery_markdown,
    selfexplain_markdown,
    separation_markdown,
    set_truth_markdown,
    spearman_markdown,
    truth_markdown,
    wrong_markdown,
)
from engine.reports.ig_convergence_tables import ig_convergence_table
from engine.reports.inputs import read_files, unknown_code
from engine.reports.llm_tables import llm_accuracy, llm_curves, llm_racu, prompt_selection, selfexplain_table
from engine.reports.masking_tables import (
    beam_subsets,
    fmm_ordering,
    gpu_cells_beside_cpu,
    racu_table,
    roar_table,
    summary_per_model,
)
from engine.reports.selfexplain_field_tables import field_tests_table
from engine.reports.simulability_tables import sentence_plausibility, simulation_accuracy


@dataclass(frozen=True)
class Table:
    name: str
    doc: str  # the file holding the region, relative to the project root
    build: Callable[[Path], str]  # results root -> the region's markdown (without the markers)


GROUND_TRUTH_DOC = "docs/ground-truth.md"


GROUND_TRUTH_RUN = "tiny-rt-card"


GROUND_TRUTH_MINILM_RUN = "minilm-rt-card"


GROUND_TRUTH_SMOLLM2_RUN = "smollm2-rt-card"


GROUND_TRUTH_SET_RUN = "tiny-rt-graded-card"


def _card_tables(slug: str, run: str, operators: tuple[str, ...], *, wrong: bool = False, operator_table: bool = False,
                 selfexplain: bool = False) -> list[Table]:
    """The tables of one model's report card run `run`, named `ground-truth-<table>-<slug>`, in the docs' order: truth,
    recovery, the judges of each removal operator, the wrong verdicts (`wrong`), the Spearman table (the first
    operator's), the operators side by side (`operator_table`), the self-explanations (`selfexplain`), the cost."""
    tables = [Table(f"ground-truth-truth-{slug}", GROUND_TRUTH_DOC, truth_markdown(run)),
              Table(f"ground-truth-recovery-{slug}", GROUND_TRUTH_DOC, recovery_markdown(run))]
    tables += [Table(f"ground-truth-judges-{slug}-{op}", GROUND_TRUTH_DOC, judge_markdown(run, op)) for op in operators]
    if wrong:
        tables.append(Table(f"ground-truth-wrong-{slug}", GROUND_TRUTH_DOC, wrong_markdown(run, operators[0])))
    tables.append(Table(f"ground-truth-spearman-{slug}", GROUND_TRUTH_DOC, spearman_markdown(run, operators[0])))
    if operator_table:
        tables.append(Table(f"ground-truth-operators-{slug}", GROUND_TRUTH_DOC, operator_markdown(run)))
    if selfexplain:
        tables.append(Table(f"ground-truth-selfexplain-{slug}", GROUND_TRUTH_DOC, selfexplain_markdown(run)))
    tables.append(Table(f"ground-truth-cost-{slug}", GROUND_TRUTH_DOC, cost_markdown(run)))
    return tables


def _every_metric_tables(slug: str, run: str, operators: tuple[str, ...]) -> list[Table]:
    """The tables of a graded-set card with every metric family, named `ground-truth-every-<table>-<slug>`: the truth,
    the measures' separation, the judges under each removal operator, the wrong verdicts under the first, and (with two
    operators or more) the share of verdicts that change with the operator."""
    return [Table(f"ground-truth-every-truth-{slug}", GROUND_TRUTH_DOC, set_truth_markdown(run)),
            Table(f"ground-truth-every-separation-{slug}", GROUND_TRUTH_DOC, separation_markdown(run)),
            *(Table(f"ground-truth-every-judges-{slug}-{op}", GROUND_TRUTH_DOC, judge_markdown(run, op))
              for op in operators),
            Table(f"ground-truth-every-wrong-{slug}", GROUND_TRUTH_DOC, wrong_markdown(run, operators[0])),
            *([Table(f"ground-truth-every-operators-{slug}", GROUND_TRUTH_DOC, operator_markdown(run))]
              if len(operators) > 1 else [])]


GROUND_TRUTH_TABLES = (
    *_card_tables("tiny-rt", GROUND_TRUTH_RUN, ("mask", "delete", "unk"), wrong=True, operator_table=True),
    # MiniLM (rt): a graded trigger, OR and the control (scripts/experiments/groundtruth_rt.sh minilm)
    *_card_tables("minilm-rt", GROUND_TRUTH_MINILM_RUN, ("mask", "unk")),
    # SmolLM2 (rt), masked LoRA: the trigger and the control, [REDACTED] and delete (scripts/experiments/groundtruth_rt.sh smollm2)
    *_card_tables("smollm2-rt", GROUND_TRUTH_SMOLLM2_RUN, ("redacted", "delete"), selfexplain=True),
    # the graded set (several planted words of known order): the card that separates the measures
    Table("ground-truth-set-truth-tiny-rt", GROUND_TRUTH_DOC, set_truth_markdown(GROUND_TRUTH_SET_RUN)),
    Table("ground-truth-separation-tiny-rt", GROUND_TRUTH_DOC, separation_markdown(GROUND_TRUTH_SET_RUN)),
    Table("ground-truth-set-judges-tiny-rt-mask", GROUND_TRUTH_DOC, judge_markdown(GROUND_TRUTH_SET_RUN, "mask")),
    Table("ground-truth-set-judges-tiny-rt-retrieval", GROUND_TRUTH_DOC,
          judge_markdown(GROUND_TRUTH_SET_RUN, "retrieval")),
    Table("ground-truth-set-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown(GROUND_TRUTH_SET_RUN, "mask")),
    # redundant k = 3 and cancellation
    Table("ground-truth-set2-truth-tiny-rt", GROUND_TRUTH_DOC, set_truth_markdown("tiny-rt-set-card")),
    Table("ground-truth-set2-separation-tiny-rt", GROUND_TRUTH_DOC, separation_markdown("tiny-rt-set-card")),
    Table("ground-truth-set2-judges-tiny-rt-mask", GROUND_TRUTH_DOC, judge_markdown("tiny-rt-set-card", "mask")),
    Table("ground-truth-set2-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown("tiny-rt-set-card", "mask")),
    # threshold 2 of 4, every metric family, [MASK] and retrieval infill
    Table("ground-truth-threshold-truth-tiny-rt", GROUND_TRUTH_DOC, set_truth_markdown("tiny-rt-threshold-card")),
    Table("ground-truth-threshold-separation-tiny-rt", GROUND_TRUTH_DOC,
          separation_markdown("tiny-rt-threshold-card")),
    Table("ground-truth-threshold-judges-tiny-rt-mask", GROUND_TRUTH_DOC,
          judge_markdown("tiny-rt-threshold-card", "mask")),
    Table("ground-truth-threshold-judges-tiny-rt-retrieval", GROUND_TRUTH_DOC,
          judge_markdown("tiny-rt-threshold-card", "retrieval")),
    Table("ground-truth-threshold-wrong-tiny-rt", GROUND_TRUTH_DOC, wrong_markdown("tiny-rt-threshold-card", "mask")),
    # the graded set's new measures (NoiseTunnel, value zeroing) on a re-plant of its recipe
    Table("ground-truth-new-measures-tiny-rt", GROUND_TRUTH_DOC, separation_markdown("tiny-rt-graded-new-measures")),
    Table("ground-truth-new-measures-judges-tiny-rt-mask", GROUND_TRUTH_DOC,
          judge_markdown("tiny-rt-graded-new-measures", "mask")),
    # interaction recovery on AND / OR / threshold (report-card --interactions)
    Table("ground-truth-interactions-tiny-rt", GROUND_TRUTH_DOC, interaction_markdown("tiny-rt-interaction-card")),
    # MiniLM (rt): the graded set and redundant k = 3
    Table("ground-truth-set-truth-minilm-rt", GROUND_TRUTH_DOC, set_truth_markdown("minilm-rt-set-card")),
    Table("ground-truth-set-separation-minilm-rt", GROUND_TRUTH_DOC, separation_markdown("minilm-rt-set-card")),
    Table("ground-truth-set-judges-minilm-rt-mask", GROUND_TRUTH_DOC, judge_markdown("minilm-rt-set-card", "mask")),
    Table("ground-truth-set-wrong-minilm-rt", GROUND_TRUTH_DOC, wrong_markdown("minilm-rt-set-card", "mask")),
    # the graded set with every metric family the card offers: tiny under [MASK] and ICE's MLM infill, MiniLM under
    # [MASK] (re-plants of the graded-set recipe, docs/ground-truth.md)
    *_every_metric_tables("tiny-rt", "tiny-rt-graded-every-metric", ("mask", "mlm")),
    *_every_metric_tables("minilm-rt", "minilm-rt-graded-every-metric", ("mask",)),
)


def budget_pareto_report(run: str) -> Callable[[Path], str]:
    """RACU and NAOPC against forward passes of the budgeted searches (engine.results.budget_pareto)."""
    from engine.results.budget_pareto import report_table

    return report_table(run)


def masf_false_alarms(run: str) -> Callable[[Path], str]:
    """MaSF's false alarms on fresh masked fine-tunings over training seeds, masking draws and calibration divisions,
    with their interval and variance components (engine.results.masf_calibration)."""
    from engine.results.masf_calibration import report_table

    return report_table(run)


def faith_plausibility_report(racu_run: str, rationale_run: str) -> Callable[[Path], str]:
    """RACU against AUPRC of the supporting facts per measure (engine.plausibility.rationale_runs)."""
    from engine.plausibility.rationale_runs import report_table

    return report_table(racu_run, rationale_run)


TABLES: tuple[Table, ...] = (
    Table("summary", "README.md", summary_per_model),
    Table("gpu-minilm-rt", "docs/gpu.md", gpu_cells_beside_cpu("minilm-rt-3seeds-gpu", "minilm-rt-3seeds", 854)),
    Table("fmm-ordering", "docs/results.md", fmm_ordering),
    Table("racu-tiny-rt", "docs/results.md", racu_table("tiny-rt-3seeds", 854, "rt")),
    Table("racu-tiny-babi1", "docs/results.md",
          racu_table("tiny-babi1-3seeds", 1000, "babi-1", ("tiny-babi1-3seeds", 200, "first 200 stories"))),
    Table("racu-minilm-rt", "docs/results.md", racu_table("minilm-rt-3seeds", 854, "rt")),
    Table("racu-minilm-babi1-full", "docs/results.md", racu_table("minilm-babi1-full", 1000, "babi-1")),
    Table("beam-subsets", "docs/results.md", beam_subsets),
    Table("attention", "docs/results.md", attention_table),
    Table("evaluation-tiny-rt", "docs/evaluation.md", evaluation_tables("tiny-rt-erasure", "tiny-rt-3seeds")),
    Table("evaluation-tiny-babi1", "docs/evaluation.md", evaluation_tables("tiny-babi1-erasure", "tiny-babi1-3seeds")),
    Table("evaluation-tiny-babi1-full", "docs/evaluation.md",
          evaluation_tables("tiny-babi1-erasure-full", "tiny-babi1-3seeds")),
    Table("agreement-pairs", "docs/evaluation.md", agreement_pairs),
    Table("operators-tiny-rt", "docs/evaluation.md", operator_comparison("tiny-rt-infill")),
    Table("pi-soft-tiny-rt", "docs/evaluation.md",
          metric_columns("tiny-rt-infill", ("soft-nc", "pi-soft-nc", "soft-ns", "pi-soft-ns"))),
    Table("simulability-babi1", "docs/simulability.md", simulation_accuracy("tiny-babi-1-masked-s0-babi-1")),
    Table("plausibility-babi1", "docs/simulability.md", sentence_plausibility("tiny-babi-1-masked-s0-babi-1")),
    Table("llm-accuracy", "docs/llm.md", llm_accuracy((
        ("SmolLM2-135M-Instruct", "smollm2-rt-prompt", "smollm2-rt-zero-shot.json"),
        ("SmolLM2-135M-Instruct", "smollm2-rt-lora", "smollm2-rt-lora.json"),
        ("Gemma 3 270M (base)", "gemma3-270m, one-line zero-shot cue", "gemma3-rt-zero-shot-cue.json"),
        ("Gemma 3 270M (base)", "gemma3-rt-prompt", "gemma3-rt-prompt.json")))),
    Table("llm-gemma-prompts", "docs/llm.md", prompt_selection((
        ("zero-shot, one-line cue, no [REDACTED] notice", "gemma3-validation/gemma3-zero-shot-cue.json"),
        ("zero-shot with the notice", "gemma3-validation/gemma3-zero-shot-notice.json"),
        ("4-shot with the notice", "gemma3-validation/gemma3-4shot-notice.json")),
        chosen="gemma3-validation/gemma3-4shot-notice.json")),
    Table("llm-selfexplain", "docs/llm.md",
          selfexplain_table("smollm2-rt-selfexplain", (("zero-shot", "smollm2-rt-prompt"), ("masked LoRA", "smollm2-rt-lora")))),
    Table("llm-ig-gap-smollm2", "docs/llm.md",
          ig_convergence_table("smollm2-rt-convergence-cuda.jsonl", compare_with="smollm2-rt-convergence.jsonl")),
    Table("llm-ig-gap-gemma3", "docs/llm.md",
          ig_convergence_table("gemma3-rt-convergence-cuda.jsonl", compare_with="gemma3-rt-convergence.jsonl")),
    Table("llm-attnlrp", "docs/llm.md", attnlrp_table(("smollm2-rt-prompt.jsonl", "smollm2-rt-lora.jsonl",
                                                       "gemma3-rt-prompt.jsonl", "gemma3-rt-lora.jsonl"))),
    Table("llm-selfexplain-field", "docs/llm.md",
          field_tests_table(("smollm2-rt-field-insertion-100", "smollm2-rt-field-biased-100", "smollm2-rt-field-ccshap-100",
                             "gemma3-rt-field-insertion-100", "gemma3-rt-field-biased-100", "gemma3-rt-field-ccshap-100"),
                            (("SmolLM2 zero-shot", "smollm2-rt-prompt"), ("Gemma 3 4-shot", "gemma3-rt-prompt")))),
    Table("masf-false-alarms", "docs/masf.md", masf_false_alarms("tiny-rt-seeds-21-up")),
    *GROUND_TRUTH_TABLES,
)


# Tables dropped from the docs because every result they read, or the part that decides them, was of unknown code
# (a "-dirty" code version, its checkpoint's included, or none) and recomputing it from committed code means
# retraining checkpoints: hours of CPU. Each doc says so where the table was and gives the commands that recompute
# its results; once they are rerun from a commit, the entry moves back into TABLES and its region into the doc.
DROPPED_TABLES: tuple[Table, ...] = (
    Table("racu-minilm-babi1", "docs/results.md", racu_table("minilm-babi1-3seeds", 40, "babi-1")),
    Table("roar", "docs/results.md", roar_table),
    Table("evaluation-minilm-rt", "docs/evaluation.md", evaluation_tables("minilm-rt-erasure", "minilm-rt-3seeds")),
    Table("sanity-verdicts", "docs/evaluation.md", sanity_verdicts),
    Table("sanity-tiny-rt", "docs/evaluation.md", sanity_curves("tiny-rt-sanity")),
    Table("sanity-minilm-rt", "docs/evaluation.md", sanity_curves("minilm-rt-sanity")),
    Table("simulability-rt", "docs/simulability.md", simulation_accuracy("minilm-rt-masked-s0-rt")),
    Table("budget-pareto", "docs/budgeted-search.md", budget_pareto_report("tiny-rt-budget")),
    Table("llm-racu", "docs/llm.md", llm_racu((("SmolLM2 zero-shot (`smollm2-rt-prompt`)", "smollm2-rt-zero-shot-masking"),
                                               ("SmolLM2 masked LoRA (`smollm2-rt-lora`)", "smollm2-rt-lora-masking")), 10)),
    Table("llm-curves", "docs/llm.md", llm_curves((("zero-shot", "smollm2-rt-zero-shot-masking"),
                                                   ("masked LoRA", "smollm2-rt-lora-masking")), 10)),
    Table("faith-plausibility-babi1", "docs/faithfulness-plausibility.md",
          faith_plausibility_report("tiny-babi1-small-3seeds", "tiny-babi1-small-rationales")),
)


def _region(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- report:{re.escape(name)} -->\n)(.*?)(\n<!-- /report:{re.escape(name)} -->)", re.S)


def table_names() -> list[str]:
    return [t.name for t in TABLES]


def build(names: list[str] | None = None, results_dir: str | Path | None = None) -> dict[str, str]:
    """{name: markdown} of the chosen tables (default: all), from the results root (default: the project's)."""
    root = results_root(results_dir)
    chosen = _chosen(names)
    return {t.name: t.build(root).strip("\n") for t in chosen}


def build_with_inputs(names: list[str] | None = None, results_dir: str | Path | None = None
                      ) -> tuple[dict[str, str], dict[str, list[Path]]]:
    """({name: markdown}, {name: the provenance files it read, sorted}) of the chosen tables (default: all): one
    build, each table's reads recorded while it is built (engine.reports.inputs)."""
    root = results_root(results_dir)
    tables, inputs = {}, {}
    for table in _chosen(names):
        text = []
        inputs[table.name] = sorted(read_files(lambda r, t=table: text.append(t.build(r)) or "", root))
        tables[table.name] = text[0].strip("\n")
    return tables, inputs


def unknown_code_per_table(inputs: dict[str, list[Path]], results_dir: str | Path | None = None
                           ) -> dict[str, list[str]]:
    """{table: one line per result it reads whose code is unknown ("<file>: <why>", the file relative to the results
    root's parent)}, for every table of `inputs` (as `build_with_inputs` gives), empty lists included. Unknown: the
    file records no code version, or a "-dirty" one (its own or its checkpoint's), labelled by an audit or not."""
    root = results_root(results_dir).resolve()
    verdicts: dict[Path, str | None] = {}
    found = {}
    for name, files in inputs.items():
        lines = []
        for path in files:
            if path not in verdicts:
                verdicts[path] = unknown_code(path)
            if verdicts[path] is not None:
                lines.append(f"{path.relative_to(root.parent)}: {verdicts[path]}")
        found[name] = lines
    return found


def results_root(results_dir: str | Path | None = None) -> Path:
    from engine.settings import PROJECT_ROOT

    return Path(results_dir) if results_dir is not None else PROJECT_ROOT / "results"


def code_provenance_check(results_dir: str | Path | None = None) -> list[str]:
    """The shipped results the tables are built from whose code no commit holds (engine.results.code_provenance):
    one line each, empty when every one names committed code or carries its audit's label."""
    from engine.results.code_provenance import code_provenance_problems

    return code_provenance_problems(results_root(results_dir))


def _chosen(names: list[str] | None) -> list[Table]:
    if not names:
        return list(TABLES)
    unknown = [n for n in names if n not in table_names()]
    if unknown:
        raise InvalidInputError(f"unknown report table(s) {', '.join(unknown)}; known: {', '.join(table_names())}")
    return [t for t in TABLES if t.name in names]


def sync(tables: dict[str, str], project_root: str | Path | None = None, write: bool = False) -> list[str]:
    """Compare (write=False) or rewrite (write=True) each table's region in its file under project_root.
    Returns the problems: '<file>: table NAME differs from what `report` prints' or '... has no region'. With
    write=True a region that differs is rewritten (and not reported); a missing region is still reported."""
    from engine.settings import PROJECT_ROOT

    root = Path(project_root) if project_root is not None else PROJECT_ROOT
    problems = []
    by_doc: dict[str, list[Table]] = {}
    for table in TABLES:
        if table.name in tables:
            by_doc.setdefault(table.doc, []).append(table)
    for doc, chosen in by_doc.items():
        path = root / doc
        text = path.read_text(encoding="utf-8")
        new = text
        for table in chosen:
            pattern = _region(table.name)
            found = pattern.search(new)
            if found is None:
                problems.append(f"{doc}: no region <!-- report:{table.name} --> ... <!-- /report:{table.name} -->")
                continue
            if found.group(2) != tables[table.name]:
                if write:
                    new = new[:found.start(2)] + tables[table.name] + new[found.end(2):]
                else:
                    problems.append(f"{doc}: table {table.name} differs from what `python -m engine docs-tables` prints "
                                    f"(run `python -m engine docs-tables --write`)")
        if write and new != text:
            write_text(path, new)  # atomically: an interrupted --write never leaves half a document
    return problems
