"""Explanations computed elsewhere (`evaluate --scores`): files in our CSV, ferret's and inseq's formats, made here from
a built-in measure, evaluate exactly as that measure does; rows that cannot be matched or aligned refuse the file,
naming the row."""
from __future__ import annotations

import base64
import csv
import json

import numpy as np
import pytest
import torch
from cli_helpers import run_command, save_for_commands
from explanation_rows import loo_score_rows

pytestmark = pytest.mark.device  # depends on the torch device: a lent GPU runs it (-m device, docs/gpu.md)

LIMIT = 6
FAMILIES = ["comprehensiveness", "sufficiency", "deletion", "insertion", "decision-flip", "soft"]


@pytest.fixture()
def saved_toy(toy_classifier, models_cache, tmp_path, monkeypatch):
    return save_for_commands(toy_classifier, "toy-masked-s0", tmp_path, monkeypatch)


@pytest.fixture()
def loo_rows(toy_classifier):
    """[(example, tokens of the whole input, offsets, maskable, loo-sign scores [T])] of the first LIMIT test
    examples, the gold label explained (as `evaluate` does)."""
    return loo_score_rows(toy_classifier, LIMIT)


def _our_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "start", "end", "token", "score"])
        for ex, tokens, offsets, maskable, scores in rows:
            for tok, (s, e), m, v in zip(tokens, offsets, maskable, scores):
                if m:
                    w.writerow([ex.uid, s, e, tok, repr(v)])


def _ferret_json(path, rows):
    """ferret's Explanation (text, tokens with [CLS]/[SEP], scores, explainer, target...) as dataclasses.asdict
    writes it, one per input, no offsets."""
    records = [{"text": ex.primary, "tokens": tokens, "scores": scores, "explainer": "loo-by-ferret",
                "target_pos_idx": ex.label, "helper_type": "sequence-classification", "target": ex.label}
               for ex, tokens, _offsets, _maskable, scores in rows]
    path.write_text(json.dumps(records))


def _captum_jsonl(path, rows):
    """captum's LLMAttributionResult fields (input_tokens, seq_attr) with the example's text, one record per line."""
    path.write_text("".join(json.dumps({"text": ex.primary, "input_tokens": tokens, "seq_attr": scores}) + "\n"
                            for ex, tokens, _offsets, _maskable, scores in rows))


def _inseq_json(path, rows):
    """inseq's FeatureAttributionOutput.save() layout (use_primitives=False: classes wrapped in __instance_type__,
    attributions as base64 safetensors of shape [source_len, target_len])."""
    import torch
    from safetensors.torch import save

    def wrap(name, attrs):
        return {"__instance_type__": ["inseq.data.attribution", name], "attributes": attrs}

    sequences = []
    for _ex, tokens, _offsets, _maskable, scores in rows:
        matrix = torch.tensor(scores, dtype=torch.float64)[:, None]  # one generated step
        sequences.append(wrap("FeatureAttributionSequenceOutput", {
            "source": [wrap("TokenWithId", {"token": t, "id": i}) for i, t in enumerate(tokens)],
            "target": [wrap("TokenWithId", {"token": "pos", "id": 0})],
            "source_attributions": base64.b64encode(save({"attribution": matrix})).decode(),
            "target_attributions": None, "step_scores": {}, "attr_pos_start": 0, "attr_pos_end": 1}))
    out = wrap("FeatureAttributionOutput", {
        "sequence_attributions": sequences, "step_attributions": None,
        "info": {"attribution_method": "loo-by-inseq", "input_texts": [r[0].primary for r in rows]}})
    path.write_text(json.dumps(out))


def test_imported_files_in_four_formats_evaluate_exactly_as_the_measure_they_were_written_from(
        saved_toy, loo_rows, tmp_path):
    """Our CSV, ferret's JSON, inseq's JSON and captum's fields in JSONL, written from loo-sign, give every erasure
    metric and curve point (MaSF share included) equal to loo-sign's own, side by side in one run."""
    from engine.faithfulness.evaluation import evaluation_store

    _our_csv(tmp_path / "mine.csv", loo_rows)
    _ferret_json(tmp_path / "ferret.json", loo_rows)
    _inseq_json(tmp_path / "inseq.json", loo_rows)
    _captum_jsonl(tmp_path / "captum.jsonl", loo_rows)
    argv = ["--model", saved_toy, "--dataset", "toy", "--measures", "loo-sign", "--limit", str(LIMIT),
            "--scores", str(tmp_path / "mine.csv"), str(tmp_path / "ferret.json"), str(tmp_path / "inseq.json"),
            str(tmp_path / "captum.jsonl"), "--run", "own", "--soft-draws", "2", "--metrics", *FAMILIES]
    assert run_command("metrics", argv) == 0
    data = evaluation_store().load("own")
    data = data[data.method == "erasure"]
    imported_names = ("imported:mine", "imported:loo-by-ferret", "imported:loo-by-inseq", "imported:captum")
    assert set(data.measure) == {"loo-sign", *imported_names}
    key = ["metric", "level"]
    builtin = data[data.measure == "loo-sign"].sort_values(key).reset_index(drop=True)
    assert len(builtin) > 30
    for name in imported_names:
        imported = data[data.measure == name].sort_values(key).reset_index(drop=True)
        assert imported[key].equals(builtin[key])
        np.testing.assert_array_equal(imported["value"].to_numpy(), builtin["value"].to_numpy())
        np.testing.assert_array_equal(imported["p_below_005"].to_numpy(), builtin["p_below_005"].to_numpy())


def test_misaligned_offsets_refuse_the_file_naming_the_row(saved_toy, loo_rows, tmp_path):
    """Offsets shifted by one character refuse the whole file before any work, and the message names the CSV line:
    with a token column because the offsets misread the token, without one because they cut the model's tokens."""
    import re

    from engine.errors import InvalidInputError
    from engine.faithfulness.evaluation import evaluation_store

    first = len([m for m in loo_rows[0][3] if m])  # the second input's first unit is on line first + 2
    text = loo_rows[1][0].primary
    for with_token in (True, False):
        _our_csv(tmp_path / "bad.csv", loo_rows)
        lines = (tmp_path / "bad.csv").read_text().splitlines()
        uid, s, e, tok, v = lines[first + 1].split(",")
        s, e = int(s) + 1, int(e) + 1
        lines[first + 1] = ",".join([uid, str(s), str(e), tok, v])
        if not with_token:
            lines = [",".join(c for i, c in enumerate(ln.split(",")) if i != 3) for ln in lines]
        (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
        argv = ["--model", saved_toy, "--dataset", "toy", "--limit", str(LIMIT), "--scores", str(tmp_path / "bad.csv"),
                "--run", "bad", "--metrics", "comprehensiveness"]
        why = (re.escape(f"offsets ({s}, {e}) read {text[s:e]!r} but its token is {tok!r}") if with_token else
               r"unit \(\d+, \d+\) '\w+' cuts the model's token '\w+'")
        with pytest.raises(InvalidInputError, match=rf"bad\.csv, line {first + 2}: {why}"):
            run_command("metrics", argv)
    assert not (evaluation_store().root / "bad").exists()


def test_a_row_explaining_another_class_than_the_gold_label_is_refused(saved_toy, loo_rows, tmp_path):
    """evaluate explains the gold label; a ferret record whose target is the other class refuses the file."""
    from engine.errors import InvalidInputError

    _ferret_json(tmp_path / "ferret.json", loo_rows)
    records = json.loads((tmp_path / "ferret.json").read_text())
    records[3]["target"] = 1 - records[3]["target"]
    (tmp_path / "ferret.json").write_text(json.dumps(records))
    argv = ["--model", saved_toy, "--dataset", "toy", "--limit", str(LIMIT), "--scores", str(tmp_path / "ferret.json"),
            "--metrics", "comprehensiveness"]
    with pytest.raises(InvalidInputError, match=r"ferret\.json, record 3: it explains class '\w+' but `metrics` "
                                                r"explains the gold label"):
        run_command("metrics", argv)


def test_rows_that_name_no_example_or_carry_bad_numbers_are_refused_naming_the_row(toy_classifier, loo_rows,
                                                                                   tmp_path):
    """A text of no example, an id of no example, a NaN score and an offset past the text each refuse the file."""
    from engine.importance.imported import ScoresFileError, import_scores

    examples = [r[0] for r in loo_rows]
    ok = {"id": examples[0].uid, "offsets": [[0, 3]], "scores": [1.0]}
    cases = [({"text": "no such sentence", "offsets": [[0, 2]], "scores": [1.0]}, "text of no example"),
             ({"id": "toy-nope", "offsets": [[0, 2]], "scores": [1.0]}, "is no example"),
             ({"id": examples[0].uid, "offsets": [[0, 3]], "scores": [float("nan")]}, "must be finite"),
             ({"id": examples[0].uid, "offsets": [[0, 999]], "scores": [1.0]}, "outside the text")]
    for bad, why in cases:
        path = tmp_path / "rows.jsonl"
        path.write_text(json.dumps(ok) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(ScoresFileError, match=rf"rows\.jsonl, line 2[:,] .*{why}"):
            import_scores(path, examples, toy_classifier)


def test_a_word_scored_as_one_unit_gives_each_of_its_pieces_its_score():
    """Alignment: a unit spanning several model tokens gives each the unit's score, overlapping units add up, and a
    unit finer than a model token (it cuts the token) is refused."""
    from engine.importance.imported import ImportedRow, ScoresFileError, align

    text = "unbelievable fun"
    offsets = [(0, 0), (0, 2), (2, 12), (13, 16), (0, 0)]  # [CLS] un ##believable fun [SEP]
    maskable = [False, True, True, True, False]
    row = ImportedRow("record 0", "x", None, text, ((0, 13), (13, 16), (12, 16)), None, (2.0, 0.5, 0.25))
    np.testing.assert_allclose(align("f.json", row, row.spans, offsets, maskable, False, text), [0, 2, 2, 0.75, 0])
    finer = ImportedRow("record 3", "x", None, text, ((0, 12), (13, 14), (14, 16)), None, (2.0, 0.5, 0.25))
    with pytest.raises(ScoresFileError, match=r"f\.json, record 3, unit 1: unit \(13, 14\) 'f' cuts the model's token 'fun'"):
        align("f.json", finer, finer.spans, offsets, maskable, False, text)


def test_recursive_masking_takes_an_imported_measure_and_ranks_once_by_the_file(toy_classifier, loo_rows, tmp_path):
    """Recursive masking explains an imported measure once, on the unmasked input (the file scores no other input):
    every step masks the top floor(r N) tokens of the file's ranking."""
    from engine.faithfulness.perturb import ranking_positions
    from engine.faithfulness.recursive import recursive_masking
    from engine.importance import get_explainer
    from engine.importance.imported import import_scores

    _our_csv(tmp_path / "mine.csv", loo_rows)
    examples = [r[0] for r in loo_rows]
    (mid,) = import_scores(tmp_path / "mine.csv", examples, toy_classifier)
    batch = toy_classifier.batch_of(examples)
    explainer = get_explainer(mid, toy_classifier)
    loo = get_explainer("loo-sign", toy_classifier, memo=False).attribute(batch, batch.target).scores
    result = recursive_masking(toy_classifier, explainer, batch, target=batch.target)
    rank = ranking_positions(loo, batch.maskable)
    n = batch.maskable.sum(1)
    for step in result.steps:
        k = torch.floor(n.double() * step.ratio + 1e-9).long()
        expected = torch.where(rank < k[:, None], toy_classifier.mask_token_id, batch.input_ids)
        assert torch.equal(step.input_ids, expected.cpu())


def test_inseq_primitives_of_a_decoder_only_model_read_the_prompt_column_of_the_first_generated_token(tmp_path):
    """inseq saved with use_primitives=True (plain dicts and lists), decoder-only: the units are the prompt's tokens
    (target[:attr_pos_start]) and their scores the column of the first generated token; 3-D attributions are refused."""
    from engine.data.types import Example
    from engine.importance.imported import ScoresFileError, read_scores_file, resolve

    text = "a fine film"
    tokens = ["<s>", "\u2581a", "\u2581fine", "\u2581film", "\u2581positive"]
    matrix = [[0.0], [0.1], [0.7], [0.2], [float("nan")]]  # [target_len, generated]; the label has no score
    seq = {"source": None, "target": [{"token": t, "id": i} for i, t in enumerate(tokens)], "attr_pos_start": 4,
           "source_attributions": None, "target_attributions": matrix}
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"sequence_attributions": [seq], "info": {"attribution_method": "saliency",
                                                                          "input_texts": [text]}}))
    (row,) = read_scores_file(path)["saliency"]
    assert row.tokens == tuple(tokens[:4]) and row.scores == (0.0, 0.1, 0.7, 0.2)
    ((_, _, spans),) = resolve(path, [row], [Example(primary=text, label=1, uid="x-0")])
    assert spans == (None, (0, 1), (2, 6), (7, 11))
    seq["target_attributions"] = [[[0.0, 1.0]]] * 5
    path.write_text(json.dumps({"sequence_attributions": [seq], "info": {"input_texts": [text]}}))
    with pytest.raises(ScoresFileError, match=r"out\.json, sequence 0: granular attributions"):
        read_scores_file(path)


def test_an_imported_measure_is_not_offered_for_other_inputs(toy_classifier, tmp_path):
    """A measure read from a file explains only the inputs the file scores: after an import it is not among the
    measures offered for a model (pages, `explain --measure all`, every-measure loops), while it stays usable by
    name. (Before, one import made every later every-measure loop in the process fail on it.)"""
    from engine.importance import MEASURES, applicable_measures, builtin_measures, measure_availability
    from engine.importance.imported import register_imported

    (tmp_path / "x.csv").write_text("x", encoding="utf-8")
    mid = register_imported(tmp_path / "x.csv", "offered-check", [])
    try:
        assert mid in MEASURES
        assert mid not in measure_availability(toy_classifier) and mid not in applicable_measures(toy_classifier)
        assert mid not in builtin_measures()
    finally:
        del MEASURES[mid]
