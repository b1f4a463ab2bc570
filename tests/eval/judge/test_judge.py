"""Judge evaluation: metrics on hand-worked prediction rows (checked against scikit-learn / scipy), the
explanation metrics on hand-worked text pairs (checked against the formulas and the libraries), and the
`judgetrain eval judge` command end to end on a tiny synthetic PRISM + ordering-probe set and a tiny model: its typed
config, run identity (what a rerun into the same folder resumes or refuses), `eval report` and `eval compare` on judge runs."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from judgetrain import config, records
from judgetrain.cli import main as cli_main
from judgetrain.eval import judge as J
from judgetrain.eval.core import runs
from judgetrain.eval.judge import explain as E, report as JR
from judgetrain.io import RowAppender, write_rows


def _pair(label, prediction, *, valid=True, layout="P0", subset="PRISM-Semantic", **extra):
    row = {"id": f"p{len(extra)}-{label}-{prediction}-{layout}-{subset}-{extra.get('n', 0)}", "task": "pairwise", "layout": layout,
           "subset": subset, "label": label, "prediction": prediction if valid else None, "valid": valid,
           "correct": valid and prediction == label, "choices": ["A", "B"], "method": "score"}
    row.update(extra)
    return row


def _point(label, prediction, *, valid=True, layout="P0", teacher=None, human=None, n=0):
    return {"id": f"s{n}", "task": "pointwise", "layout": layout, "subset": "PRISM-Semantic", "label": str(label),
            "prediction": str(prediction) if valid else None, "valid": valid, "correct": valid and str(prediction) == str(label),
            "choices": ["1", "2", "3", "4", "5"], "teacher_answer": teacher, "human_score": human, "method": "score"}


# --------------------------------------------------------------------------- classification, hand-worked


def test_pairwise_cell_hand_worked_and_matches_sklearn():
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    labels = ["A", "A", "B", "B", "A", "B"]
    preds = ["A", "B", "B", "B", None, "A"]  # the fifth answer was unparseable
    rows = [_pair(lab, p, valid=p is not None, n=i) for i, (lab, p) in enumerate(zip(labels, preds))]
    c = J.classification_cell(rows)
    # valid: true A A B B B, predicted A B B B A. A: tp 1 fp 1 fn 1; B: tp 2 fp 1 fn 1
    assert (c["n"], c["n_valid"], c["n_invalid"]) == (6, 5, 1)
    assert c["accuracy"] == pytest.approx(3 / 5)
    assert c["accuracy_all"] == pytest.approx(3 / 6)  # invalid counted wrong
    assert c["precision"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert c["recall"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert c["f1"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    kept = [(lab, p) for lab, p in zip(labels, preds) if p is not None]
    p, r, f, _ = precision_recall_fscore_support([k[0] for k in kept], [k[1] for k in kept], average="macro")
    assert (c["precision"], c["recall"], c["f1"]) == pytest.approx((p, r, f))
    assert c["accuracy"] == pytest.approx(accuracy_score([k[0] for k in kept], [k[1] for k in kept]))
    # no valid answer: metrics absent, not zero
    empty = J.classification_cell([_pair("A", None, valid=False)])
    assert empty["accuracy"] is None and empty["f1"] is None and empty["accuracy_all"] == 0.0


def test_pointwise_pearson_mae_rmse_hand_worked_and_against_scipy():
    import numpy as np
    from scipy.stats import pearsonr

    preds, gold = [5, 4, 3, 2, 1], [5, 3, 3, 1, 1]
    teacher = ["2", "1", None, "n/a", "1"]  # one record without a teacher answer, one unreadable
    rows = [_point(g, p, teacher=t, n=i) for i, (g, p, t) in enumerate(zip(gold, preds, teacher))]
    rows.append(_point(4, None, valid=False, teacher="4", n=9))
    c = J.pointwise_cell(rows)
    # gold: dx = 2 1 0 -1 -2, dy = 2.4 .4 .4 -1.6 -1.6 → r = 10 / sqrt(10 · 11.2); |errors| 0 1 0 1 0
    assert c["gold"]["n"] == 5
    assert c["gold"]["r"] == pytest.approx(10 / math.sqrt(112))
    assert c["gold"]["r"] == pytest.approx(pearsonr(preds, gold).statistic)
    assert c["gold"]["r"] == pytest.approx(np.corrcoef(preds, gold)[0, 1])
    assert c["gold"]["mae"] == pytest.approx(0.4) and c["gold"]["rmse"] == pytest.approx(math.sqrt(0.4))
    # teacher: pairs (5,2) (4,1) (1,1) → errors 3 3 0; r of [5,4,1] vs [2,1,1]
    assert c["teacher"]["n"] == 3 and c["teacher"]["unreadable"] == 1
    assert c["teacher"]["mae"] == pytest.approx(2.0) and c["teacher"]["rmse"] == pytest.approx(math.sqrt(6))
    assert c["teacher"]["r"] == pytest.approx(pearsonr([5, 4, 1], [2, 1, 1]).statistic)
    # no human reference anywhere: reported absent, not zero
    assert c["human"] == {"n": 0, "r": None, "mae": None, "rmse": None, "unreadable": 0}
    assert (c["n"], c["n_valid"], c["n_invalid"]) == (6, 5, 1)

    # r is undefined for a constant side; MAE is still defined
    flat = J.pointwise_cell([_point(g, 5, n=i) for i, g in enumerate([5, 3, 1])])
    assert flat["gold"]["r"] is None and flat["gold"]["mae"] == pytest.approx((0 + 2 + 4) / 3)
    # a list of annotator scores is averaged
    assert J.pointwise_cell([_point(5, 4, human=[4, 5], n=0), _point(1, 2, human=[1, 2], n=1)])["human"]["mae"] == pytest.approx(0.5)


def test_score_distribution_shows_the_binary_collapse():
    rows = [_point(g, p, teacher=t, n=i) for i, (g, p, t) in enumerate([(5, 5, "1"), (3, 5, "2"), (2, 4, "1"), (1, 5, "3")])]
    d = J.score_distribution(rows)
    assert d["model"]["counts"] == {"1": 0, "2": 0, "3": 0, "4": 1, "5": 3} and d["model"]["share_1_2"] == 0.0
    assert d["teacher"]["counts"] == {"1": 2, "2": 1, "3": 1, "4": 0, "5": 0} and d["teacher"]["share_1_2"] == 0.75
    assert d["gold"]["n"] == 4 and "human" not in d


def test_ordering_cell_exact_match_invalid_and_answers_by_position():
    from scipy.stats import kendalltau

    rows = [{"task": "ordering", "label": "2, 4, 1, 3", "prediction": "2, 4, 1, 3", "valid": True},
            {"task": "ordering", "label": "3, 1, 4, 2", "prediction": "4, 3, 2, 1", "valid": True},   # reversed labels
            {"task": "ordering", "label": "4, 3, 1, 2", "prediction": "4, 3, 2, 1", "valid": True},   # reversed labels
            {"task": "ordering", "label": "2, 1, 3, 4", "prediction": "1, 2, 3, 4", "valid": True},   # label order
            {"task": "ordering", "label": "1, 3, 2, 4", "prediction": None, "valid": False}]
    c = J.ordering_cell(rows)
    assert c["exact_match"] == pytest.approx(1 / 5) and c["exact_match_valid"] == pytest.approx(1 / 4)
    assert c["n_invalid"] == 1 and c["invalid_rate"] == pytest.approx(1 / 5)
    assert (c["label_order"], c["reverse_label_order"]) == (1, 2) and c["by_position_share"] == pytest.approx(3 / 5)
    assert c["chance_exact_match"] == pytest.approx(1 / 24)

    def tau(pred, gold):  # ranks of images 1..4 in each answer
        return kendalltau([pred.index(i) for i in range(1, 5)], [gold.index(i) for i in range(1, 5)]).statistic

    want = [tau([2, 4, 1, 3], [2, 4, 1, 3]), tau([4, 3, 2, 1], [3, 1, 4, 2]), tau([4, 3, 2, 1], [4, 3, 1, 2]), tau([1, 2, 3, 4], [2, 1, 3, 4])]
    assert c["kendall_tau"] == pytest.approx(sum(want) / 4)


def test_subsets_come_from_domain_and_perturbation():
    def rec(task="pairwise", perturbation="swap", source="synthetic-procedures"):
        return {"task": task, "perturbation": perturbation, "source": source}

    assert J.subset_of(rec(perturbation="semantic-2"), {}) == "PRISM-Semantic"
    for p in ("swap", "swap-nonconsecutive", "shuffle"):
        assert J.subset_of(rec(perturbation=p), {}) == "PRISM-Temporal"
    assert J.subset_of(rec("pointwise", "none"), {}) == "PRISM-Coherent"
    assert J.subset_of(rec(perturbation="none", source="mirage-recipes"), {"domain": "recipes"}) == "MIRAGE-Recipes"
    assert J.subset_of(rec(perturbation="none", source="x"), {"domain": "vist"}) == "MIRAGE-Vist"
    assert J.subset_of(rec("ordering", "shuffle"), {}) == "Ordering-probe"
    assert J.subset_of(rec("pairwise", "noise", source="clevrer"), {}) == "clevrer"


def test_pairwise_tables_group_by_benchmark_subset_and_layout():
    rows = [_pair("A", "A", subset="MIRAGE-Recipes", layout="P6", n=1), _pair("B", "A", subset="MIRAGE-Vist", layout="P6", n=2),
            _pair("A", "A", subset="PRISM-Semantic", layout="P0", n=3), _pair("B", "B", subset="PRISM-Temporal", layout="P6", n=4),
            _pair("A", "B", subset="PRISM-Temporal", layout="P0", n=5)]
    m = J.compute_judge_metrics(rows, explanations=False)["pairwise"]
    assert list(m["by_benchmark"]) == ["PRISM", "MIRAGE"]  # the paper's order
    assert list(m["by_subset"]) == ["PRISM-Semantic", "PRISM-Temporal", "MIRAGE-Recipes", "MIRAGE-Vist"]
    assert m["by_benchmark"]["MIRAGE"]["all"]["accuracy"] == 0.5 and list(m["by_benchmark"]["MIRAGE"]["by_layout"]) == ["P6"]
    assert m["by_benchmark"]["PRISM"]["by_layout"]["P0"]["accuracy"] == 0.5
    assert m["by_subset"]["PRISM-Temporal"]["by_layout"]["P6"]["accuracy"] == 1.0 and m["all"]["n"] == 5


def test_metric_value_finds_objectives_by_subset_benchmark_layout():
    rows = [_pair("A", "A", subset="PRISM-Temporal", layout="P6", n=1), _pair("B", "A", subset="PRISM-Temporal", layout="P0", n=2),
            _pair("A", "A", subset="MIRAGE-Vist", layout="P6", n=3)]
    rows += [_point(g, p, teacher=t, n=10 + i) for i, (g, p, t) in enumerate([(5, 5, "5"), (3, 4, "2"), (1, 2, "1")])]
    m = J.compute_judge_metrics(rows, explanations=False)
    assert J.metric_value(m, "PRISM-Temporal", "macro_f1") == m["pairwise"]["by_subset"]["PRISM-Temporal"]["all"]["f1"]
    assert J.metric_value(m, "all", "accuracy") == pytest.approx(2 / 3)
    assert J.metric_value(m, "MIRAGE", "n") == 1 and J.metric_value(m, "P6", "accuracy") == 1.0
    assert J.metric_value(m, "all", "mae_gold") == pytest.approx(2 / 3) and J.metric_value(m, "all", "r_human") is None
    assert J.metric_value(m, "PRISM-Semantic", "f1") is None  # no such records: absent
    assert J.metric_value(m, "all", "exact_match") is None
    with pytest.raises(ValueError, match="unknown judge metric 'f2'.*macro_f1"):
        J.metric_value(m, "all", "f2")


def test_split_rationale_reads_what_the_parsers_read():
    assert J.split_rationale("Sequence B swaps steps 2 and 3.\nAnswer: A") == "Sequence B swaps steps 2 and 3."
    assert J.split_rationale("A. Sequence B shows a pizza in a drink recipe.") == "Sequence B shows a pizza in a drink recipe."
    assert J.split_rationale("B, because its third image is out of place") == "because its third image is out of place"
    assert J.split_rationale("<think>hmm</think>Order is broken at step 3. Final answer: 3") == "Order is broken at step 3."
    assert J.split_rationale("A") == ""


# --------------------------------------------------------------------------- explanation metrics, hand-worked


def test_bleu_hand_worked():
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

    assert E.bleu("The cat sat on the mat.", "the cat sat on the mat") == pytest.approx(1.0)
    # 5 vs 6 words: p1 5/5, p2 3/4, p3 2/3, p4 1/2, brevity penalty exp(1 - 6/5)
    want = math.exp(1 - 6 / 5) * (1 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25
    assert E.bleu("the cat sat on mat", "the cat sat on the mat") == pytest.approx(want)
    # one pair: corpus BLEU is the same number
    assert want == pytest.approx(corpus_bleu([[E.words("the cat sat on the mat")]], [E.words("the cat sat on mat")],
                                             smoothing_function=SmoothingFunction().method1))


def test_rouge_hand_worked():
    r = E.rouge("the cat sat on mat", "the cat sat on the mat")
    # unigrams: 5 of 5 / 5 of 6; bigrams: 3 of 4 / 3 of 5; LCS 5
    assert r["rouge1"] == pytest.approx(2 * 1 * (5 / 6) / (1 + 5 / 6))
    assert r["rouge2"] == pytest.approx(2 * (3 / 4) * (3 / 5) / (3 / 4 + 3 / 5))
    assert r["rougeL"] == pytest.approx(r["rouge1"])


def _meteor_formula(matches, hyp_len, ref_len, chunks, alpha=0.9, beta=3, gamma=0.5):
    p, r = matches / hyp_len, matches / ref_len
    fmean = p * r / (alpha * p + (1 - alpha) * r)
    return fmean * (1 - gamma * (chunks / matches) ** beta)


def test_meteor_hand_worked_with_debian_wordnet():
    assert E.meteor("one two three four five six", "one two three four five six") == pytest.approx(_meteor_formula(6, 6, 6, 1))
    # same words, two chunks
    assert E.meteor("four five six one two three", "one two three four five six") == pytest.approx(_meteor_formula(6, 6, 6, 2))
    # half the reference
    assert E.meteor("a cat sat", "a cat sat on the mat") == pytest.approx(_meteor_formula(3, 3, 6, 1))
    # "hound" matches "dog" only through WordNet synonyms
    assert E.meteor("the hound ran", "the dog ran") == pytest.approx(_meteor_formula(3, 3, 3, 1))
    assert E.meteor("the cat ran", "the dog ran") == pytest.approx(_meteor_formula(2, 3, 3, 2))


def test_wordnet_missing_says_how_to_provide_it(tmp_path, monkeypatch):
    with pytest.raises(E.WordNetMissing, match="JUDGETRAIN_WORDNET"):
        E.wordnet(tmp_path)
    import nltk

    monkeypatch.setattr(E, "DEBIAN_WORDNET", tmp_path / "absent")
    monkeypatch.delenv("JUDGETRAIN_WORDNET", raising=False)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(E.WordNetMissing, match="apt-get install wordnet-base"):
        E.wordnet.__wrapped__()


def test_cosine_and_length_difference_and_means():
    from sklearn.metrics.pairwise import cosine_similarity

    gen = ["the cat sat on the mat", "a dog barked at the mailman"]
    ref = ["a cat was sitting on a mat", "stock markets fell sharply today"]
    cos = E.cosine_similarities(gen, ref)
    model = E.minilm()
    emb_g, emb_r = model.encode(gen), model.encode(ref)
    assert cos == pytest.approx([cosine_similarity(emb_g[i:i + 1], emb_r[i:i + 1])[0, 0] for i in range(2)], abs=1e-5)
    assert cos[0] > cos[1]  # a paraphrase is closer than an unrelated sentence
    assert E.cosine_similarities(["same text here"], ["same text here"])[0] == pytest.approx(1.0, abs=1e-5)
    assert E.length_difference("one two three", "one two three four five") == -2
    m = E.explanation_metrics(gen, ref)
    assert m["n"] == 2 and m["cosine"] == pytest.approx(sum(cos) / 2)
    assert m["len_diff"] == pytest.approx(((6 - 7) + (6 - 5)) / 2) and m["len_abs_diff"] == pytest.approx(1.0)
    assert m["bleu"] == pytest.approx((E.bleu(gen[0], ref[0]) + E.bleu(gen[1], ref[1])) / 2)
    assert E.explanation_metrics([], [])["meteor"] is None
    with pytest.raises(ValueError, match="non-empty"):
        E.explanation_metrics(["..."], ["a reference"])


# --------------------------------------------------------------------------- a report from hand-built predictions


def _rationale_rows():
    base = {"task": "pairwise", "subset": "PRISM-Temporal", "choices": ["A", "B"], "method": "generate", "label": "A"}
    return [
        {**base, "id": "r1", "layout": "P0", "prediction": "A", "valid": True, "correct": True,
         "text": "Steps two and three are swapped in B.\nAnswer: A", "rationale": "Steps two and three are swapped in B.",
         "reference_rationale": "Sequence B swaps steps two and three."},
        {**base, "id": "r2", "layout": "P6", "prediction": "B", "valid": True, "correct": False,
         "text": "B looks fine. Answer: B", "rationale": "B looks fine.", "reference_rationale": "B shows the dough after baking."},
        {**base, "id": "r3", "layout": "P0", "prediction": None, "valid": False, "correct": False, "text": "I cannot tell",
         "rationale": None, "reference_rationale": "A is coherent."},
        {**base, "id": "r4", "layout": "P0", "prediction": "A", "valid": True, "correct": True, "text": "A",
         "rationale": "", "reference_rationale": "A is coherent."},
        {**base, "id": "r5", "layout": "P0", "prediction": "A", "valid": True, "correct": True, "text": "Fine. Answer: A",
         "rationale": "Fine.", "reference_rationale": None},
    ]


def test_report_explanations_from_valid_nonempty_rationales_only(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = _rationale_rows()
    with RowAppender(run / runs.PREDICTIONS) as w:
        w.write(rows)
    (run / runs.RUN_INFO).write_text(json.dumps({"model": "m", "adapter": None, "mode": "rationale", "command": "judgetrain eval judge --model m"}))
    m = JR.report(run)
    ex = m["explanations"]
    assert ex["n_generated"] == 5
    assert ex["skipped"] == {"empty explanation": 1, "invalid answer": 1, "no reference rationale": 1}
    want = E.explanation_metrics([rows[0]["rationale"], rows[1]["rationale"]], [rows[0]["reference_rationale"], rows[1]["reference_rationale"]])
    got = ex["by_task"]["pairwise"]["all"]
    assert got == pytest.approx(want)
    assert ex["by_task"]["pairwise"]["by_layout"]["P6"]["n"] == 1
    assert ex["by_task"]["pairwise"]["by_layout"]["P6"]["meteor"] == pytest.approx(E.meteor(rows[1]["rationale"], rows[1]["reference_rationale"]))
    assert m["pairwise"]["all"]["n_invalid"] == 1 and m["pairwise"]["all"]["accuracy"] == pytest.approx(3 / 4)
    md = (run / runs.REPORT).read_text()
    assert "left out: 1 empty explanation, 1 invalid answer, 1 no reference rationale" in md
    # in %: Acc 3 of 3 valid, 3 of 4 with the invalid answer counted wrong, each with its Wilson interval and n
    assert "| P0 | 100.0 [43.9, 100.0] (n=3) | 75.0 [30.1, 95.4] (n=4) | 100.0 | 100.0 | 100.0 | 3 | 1 |" in md
    assert (run / "pairwise_layouts.png").stat().st_size > 1000
    first = (run / runs.METRICS).read_text()
    (run / runs.METRICS).unlink()
    JR.report(run)
    assert (run / runs.METRICS).read_text() == first


# --------------------------------------------------------------------------- end to end on a tiny model


@pytest.fixture(scope="module")
def tiny_qwen(tiny_model):
    return tiny_model("qwen3-vl")


TEACHER = "gemini:gemini-2.5-flash"


@pytest.fixture(scope="module")
def judge_data(tmp_path_factory):
    """PRISM records of the one 4-frame synthetic procedure (its Type-1 positional subset and a few pointwise
    records, with teacher fields as `build rationales` writes them) plus two ordering-probe records."""
    import datasets

    from judgetrain.data_builders import ordering, prism

    root = tmp_path_factory.mktemp("judge-data")
    prism.build(prism.PrismConfig(out=root / "prism", synthetic=4, layouts=("P0", "P4"), synthetic_size=64,
                                  splits={"test": 1.0}, progress=False))
    ordering.build(ordering.OrderingConfig(out=root / "ordering", synthetic=2, synthetic_size=64, image_size=64, progress=False))
    p = records.load(root / "prism")["test"]
    metas = [json.loads(m) for m in p["meta"]]
    pair = [i for i, (t, m) in enumerate(zip(p["task"], metas)) if t == "pairwise" and m["positional_subset"]]
    point = [i for i, (t, n, pert) in enumerate(zip(p["task"], p["n_frames"], p["perturbation"]))
             if t == "pointwise" and n == 4 and pert in ("none", "swap", "semantic-1", "semantic-2")][:5]
    assert len(pair) >= 8 and len(point) == 5

    def add_teacher(rec, i):
        meta = json.loads(rec["meta"])
        answer = "2" if rec["task"] == "pointwise" and rec["label"] != "5" else rec["label"]
        meta.update(teacher=TEACHER, teacher_answer=answer, teacher_rationale=f"The teacher explains {rec['perturbation']}.")
        if i == len(point):  # as `build rationales --target teacher` writes a record the teacher got wrong
            answer = "AB".replace(rec["label"], "")
            meta.update(teacher_answer=answer, gold_label=rec["label"], target="teacher")
            return {"meta": json.dumps(meta, sort_keys=True), "label": answer}
        return {"meta": json.dumps(meta, sort_keys=True), "label": rec["label"]}

    mixed = datasets.concatenate_datasets([p.select(point + pair).map(add_teacher, with_indices=True),
                                           records.load(root / "ordering")["test"]])
    out = root / "judge"
    records.save(datasets.DatasetDict({"test": mixed}), out, {"builder": "test-judge"})
    return out, len(point), len(pair)


def _argv(model, data, out, *extra):
    return ["--model", str(model), "--data", str(data), "--split", "test", "--out", str(out), "--batch-size", "4",
            "--max-new-tokens", "6", "--no-progress", *extra]


def _judge(model, data, out, *extra):
    """``judgetrain eval judge …`` as typed (run.json records the command line, sys.argv)."""
    argv = ["eval", "judge", *_argv(model, data, out, *extra)]
    with mock.patch.object(sys, "argv", ["judgetrain", *argv]):
        return cli_main(argv)


@pytest.fixture(scope="module")
def score_run(tiny_qwen, judge_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "score"
    assert _judge(tiny_qwen, judge_data[0], out) == 0
    return out


def test_score_mode_rows_and_metrics_agree(score_run, judge_data, capsys, rates):
    from sklearn.metrics import precision_recall_fscore_support

    data, n_point, n_pair = judge_data
    rows = runs.read_predictions(score_run / runs.PREDICTIONS)
    ds = records.load(data)["test"]
    assert [r["id"] for r in rows] == list(ds["id"])
    assert [r["task"] for r in rows] == ["pointwise"] * n_point + ["pairwise"] * n_pair + ["ordering"] * 2
    assert rows[n_point]["label"] != ds[n_point]["label"]  # the record whose SFT label is the teacher's wrong answer
    for r, rec in zip(rows, ds.select_columns(["label", "choices", "layout", "position", "perturbation", "meta"])):
        meta = json.loads(rec["meta"])
        gold = meta.get("gold_label", rec["label"])  # the builder's gold, not a teacher's SFT target
        assert (r["label"], r["layout"], r["position"], r["perturbation"]) == (gold, rec["layout"], rec["position"], rec["perturbation"])
        if r["task"] == "ordering":  # no choices: generated and parsed even in score mode
            assert r["method"] == "generate" and r["probs"] is None and isinstance(r["text"], str)
            continue
        assert r["method"] == "score" and r["valid"] and r["prediction"] == r["choices"][max(range(len(r["probs"])), key=r["probs"].__getitem__)]
        assert sum(r["probs"]) == pytest.approx(1.0)
        assert r["teacher_answer"] == meta["teacher_answer"] and r["reference_rationale"] == meta["teacher_rationale"]
        if r["task"] == "pairwise":
            assert r["positional_subset"] and r["presentation"] == meta["presentation"]
            assert r["first_option"] == (r["label"] if meta["presentation"] == "gold_first" else "AB".replace(r["label"], ""))
            assert r["subset"] == ("PRISM-Semantic" if r["perturbation"] == "semantic-1" else "PRISM-Temporal")

    m = json.loads((score_run / runs.METRICS).read_text())
    pw = [r for r in rows if r["task"] == "pairwise"]
    p, rc, f, _ = precision_recall_fscore_support([r["label"] for r in pw], [r["prediction"] for r in pw], average="macro", zero_division=0)
    assert m["pairwise"]["all"]["f1"] == pytest.approx(f) and m["pairwise"]["all"]["n_valid"] == n_pair
    assert m["pairwise"]["all"]["accuracy"] == pytest.approx(sum(r["correct"] for r in pw) / n_pair)
    assert set(m["pairwise"]["by_layout"]) == {"P0", "P4"} and set(m["pairwise"]["by_subset"]) == {"PRISM-Semantic", "PRISM-Temporal"}
    pt = [r for r in rows if r["task"] == "pointwise"]
    assert m["pointwise"]["all"]["gold"]["mae"] == pytest.approx(sum(abs(int(r["prediction"]) - int(r["label"])) for r in pt) / n_point)
    assert m["pointwise"]["all"]["teacher"]["n"] == n_point and m["pointwise"]["all"]["human"]["r"] is None
    assert m["ordering"]["n"] == 2 and m["ordering"]["n_invalid"] == sum(not r["valid"] for r in rows if r["task"] == "ordering")
    assert "explanations" not in m  # nothing generated for pairwise / pointwise in score mode
    assert m["figures"] == ["pairwise_layouts.png", "pointwise_scores.png"]
    md = (score_run / runs.REPORT).read_text()
    assert "## Pairwise (paper 002 Table S2 layout)" in md and "| PRISM-Temporal |" in md and "judgetrain eval judge --model" in md
    assert rates.check(md) >= 10  # the report of a real run: every rate with its n and Wilson interval
    assert m["items"] == {"selected": len(rows), "evaluated": len(rows)}
    # recomputable from predictions.jsonl alone
    assert cli_main(["eval", "report", str(score_run)]) == 0
    assert json.loads((score_run / runs.METRICS).read_text()) == m
    assert "Report written to" in capsys.readouterr().out


def test_resume_after_partial_line_and_finished_run_is_not_rescored(tiny_qwen, judge_data, score_run, tmp_path):
    data = judge_data[0]
    out = tmp_path / "resumed"
    assert _judge(tiny_qwen, data, out, "--limit", "4") == 0
    with open(out / runs.PREDICTIONS, "a") as f:  # a kill in the middle of a write
        f.write('{"id": "prism-x", "task": "pair')
    result = J.evaluate(str(tiny_qwen), data, out, batch_size=4, max_new_tokens=6, limit=7, progress=False)
    assert result["n_scored"] == 3
    rows = runs.read_predictions(out / runs.PREDICTIONS)
    ref = runs.read_predictions(score_run / runs.PREDICTIONS)[:7]
    drop = ("probs",)  # batch composition moves float rounding, never the answers
    assert [{k: v for k, v in r.items() if k not in drop} for r in rows] == [{k: v for k, v in r.items() if k not in drop} for r in ref]
    assert [r["probs"] for r in rows] == [pytest.approx(r["probs"], abs=1e-5) for r in ref]
    again = J.evaluate(str(tiny_qwen), data, out, batch_size=4, max_new_tokens=6, limit=7, progress=False)
    assert again["n_scored"] == 0
    with pytest.raises(ValueError, match="another run"):
        J.evaluate(str(tiny_qwen), data, out, mode="rationale", max_new_tokens=6, progress=False)


def test_rationale_mode_counts_invalid_answers(tiny_qwen, judge_data, tmp_path):
    out = tmp_path / "rationale"
    assert _judge(tiny_qwen, judge_data[0], out, "--mode", "rationale", "--tasks", "pairwise,pointwise", "--layouts", "P0",
                  "--limit", "5") == 0
    rows = runs.read_predictions(out / runs.PREDICTIONS)
    assert len(rows) == 5 and all(r["method"] == "generate" and r["layout"] == "P0" for r in rows)
    for r in rows:  # an invalid answer is never guessed
        assert (r["prediction"] is None) == (not r["valid"]) and (r["rationale"] is None) == (not r["valid"])
    m = json.loads((out / runs.METRICS).read_text())
    invalid = sum(not r["valid"] for r in rows)
    assert sum(m[t]["all"]["n_invalid"] for t in ("pairwise", "pointwise") if t in m) == invalid
    ex = m["explanations"]
    assert ex["n_generated"] == 5 and sum(ex["skipped"].values()) + sum(b["all"]["n"] for b in ex["by_task"].values()) == 5


def test_in_process_metrics_match_the_command(tiny_qwen, judge_data, score_run):
    from judgetrain.models import load_model_and_processor

    model, processor = load_model_and_processor(str(tiny_qwen), dtype="float32")
    model.train()
    ds = records.load(judge_data[0])["test"]
    # the sweep's objective: macro-F1 on PRISM-Temporal pairwise records
    m = J.judge_metrics(model, processor, ds, tasks=["pairwise"], subsets=["PRISM-Temporal"], batch_size=4)
    assert model.training  # a training loop gets its model back as it was
    ref = json.loads((score_run / runs.METRICS).read_text())
    assert json.loads(json.dumps(m["pairwise"]["all"])) == ref["pairwise"]["by_subset"]["PRISM-Temporal"]["all"]
    assert J.metric_value(m, "PRISM-Temporal", "macro_f1") == J.metric_value(ref, "PRISM-Temporal", "f1") == m["pairwise"]["all"]["f1"]
    assert list(m["pairwise"]["by_subset"]) == ["PRISM-Temporal"] and "pointwise" not in m
    temporal = J.select(ds, tasks=["pairwise"], subsets=["PRISM-Temporal"])
    assert [ds[i]["perturbation"] for i in temporal] == ["swap"] * m["pairwise"]["all"]["n"]
    assert J.select(ds, layouts=["P4"], limit=2) == [i for i, lay in enumerate(ds["layout"]) if lay == "P4"][:2]


def test_bias_command_on_the_judge_run(score_run, judge_data, capsys, rates):
    from judgetrain.eval import bias as B

    assert cli_main(["eval", "bias", str(score_run)]) == 0
    b = json.loads((score_run / B.BIAS_JSON).read_text())
    (name, run), = b["runs"].items()
    rows = [r for r in runs.read_predictions(score_run / runs.PREDICTIONS) if r["task"] == "pairwise"]
    assert run["first_option"]["n_valid"] == len(rows) == judge_data[2]
    assert run["first_option"]["chose_first"] == sum(r["prediction"] == r["first_option"] for r in rows)
    sem = run["prism_positions"]["semantic"]["all"]
    assert sem["positions"] == ["0", "1", "2", "3"]
    assert sum(c["n"] for c in sem["cells"].values()) == sum(r["perturbation"] == "semantic-1" for r in rows)
    assert run["prism_positions"]["temporal"]["all"]["positions"] == ["0-1", "1-2", "2-3"]
    assert run["ordering"]["n"] == 2
    for fig in ("bias_positions.png", "bias_positions_by_layout.png", "bias_wavg.png", "bias_first_option.png"):
        assert (score_run / fig).stat().st_size > 1000
    assert rates.check((score_run / B.BIAS_REPORT).read_text()) >= 10
    assert "Bias report in" in capsys.readouterr().out


def test_cli_help_has_examples(capsys):
    from judgetrain.eval import bias as B

    for cmd, cls in ((["eval", "judge", "--help"], J.JudgeEvalConfig), (["eval", "bias", "--help"], B.BiasConfig)):
        with pytest.raises(SystemExit):
            cli_main(cmd)
        out = capsys.readouterr().out
        assert "example" in out
        for f in dataclasses.fields(cls):  # every field, with its help text
            assert f"--{f.name}" in out and f.metadata["help"].split()[0] in out
    with pytest.raises(SystemExit):
        cli_main(["eval", "judge", "--help"])
    assert "judgetrain eval report results/ov" in capsys.readouterr().out  # what replaced --report-only


def test_config_from_flags_and_yaml(tmp_path):
    argv = ["--model", "m", "--data", "d", "--out", "o", "--tasks", "pairwise,pointwise", "--layouts", "P0", "P6",
            "--max-new-tokens", "7"]
    cfg, = config.parse(J.make_parser(), argv)
    assert cfg.tasks == ["pairwise", "pointwise"] and cfg.layouts == ["P0", "P6"] and cfg.subsets is None
    assert (cfg.data, cfg.out, cfg.mode, cfg.max_new_tokens, cfg.split) == (Path("d"), Path("o"), "score", 7, "test")
    # identity: what a run folder must agree on; tasks, layouts, subsets, limit only select items
    assert config.identity(cfg) == {"model": "m", "adapter": None, "dtype": None, "split": "test", "mode": "score",
                                    "max_new_tokens": 7, "prefill": None}
    yaml_file = tmp_path / "judge.yaml"
    yaml_file.write_text("model: m\ndata: d\nout: o\nmode: rationale\ntasks: pairwise,ordering\nsubsets: [PRISM-Temporal]\n")
    cfg, = config.parse(J.make_parser(), ["--config", str(yaml_file), "--mode", "score"])  # flags win
    assert (cfg.mode, cfg.tasks, cfg.subsets) == ("score", ["pairwise", "ordering"], ["PRISM-Temporal"])
    with pytest.raises(config.ConfigError, match="unknown argument '--report-only'"):
        config.parse(J.make_parser(), [*argv, "--report-only"])
    with pytest.raises(config.ConfigError, match="unknown key 'max_tokens'.*did you mean 'max_new_tokens'"):
        yaml_file.write_text("max_tokens: 3\n")
        config.parse(J.make_parser(), ["--config", str(yaml_file)])


def test_bad_inputs_are_refused_with_the_fix(tiny_qwen, judge_data, tmp_path):
    with pytest.raises(ValueError, match="no split 'validation'"):
        J.evaluate(str(tiny_qwen), judge_data[0], tmp_path / "x", split="validation", progress=False)
    with pytest.raises(ValueError, match="judge tasks are"):
        J.evaluate(str(tiny_qwen), judge_data[0], tmp_path / "x", tasks=["temporal_detect"], progress=False)
    with pytest.raises(ValueError, match="no record of task"):
        J.evaluate(str(tiny_qwen), judge_data[0], tmp_path / "x", subsets=["MIRAGE-Vist"], progress=False)
    with pytest.raises(FileNotFoundError, match="run `judgetrain eval judge"):
        JR.report(tmp_path / "nothing")


def test_bad_options_are_all_named_at_once(tmp_path, capsys):
    # argparse: the required fields
    with pytest.raises(SystemExit):
        cli_main(["eval", "judge", "--out", str(tmp_path / "x"), "--tasks", "pairwise,foo"])
    err = capsys.readouterr().err
    assert "required" in err and "--model" in err and "--data" in err
    # every cross-field problem in one message, before anything loads
    assert cli_main(["eval", "judge", "--model", "m", "--data", str(tmp_path), "--out", str(tmp_path / "x"),
                     "--tasks", "pairwise,foo", "--mode", "generate", "--max-new-tokens", "0", "--batch-size", "zero"]) == 2
    err = capsys.readouterr().err
    assert "tasks: unknown ['foo']; judge tasks are pairwise, pointwise, ordering" in err
    assert "mode: 'generate'" in err and "max_new_tokens: 0" in err and "batch_size:" in err
    assert not (tmp_path / "x").exists()


# --------------------------------------------------------------------------- run identity, report, compare


def test_rerun_with_fewer_tasks_resumes_and_the_metrics_cover_them(tiny_qwen, judge_data, score_run, tmp_path, capsys):
    data, n_point, n_pair = judge_data
    out = tmp_path / "run"
    shutil.copytree(score_run, out)
    before = (out / runs.PREDICTIONS).read_bytes()
    full = json.loads((out / runs.METRICS).read_text())
    # --tasks selects items of the same run (split, mode, max_new_tokens unchanged): resumed, not refused
    assert _judge(tiny_qwen, data, out, "--tasks", "pairwise") == 0
    printed = capsys.readouterr().out
    assert "Nothing left to evaluate" in printed and "report in" in printed
    assert (out / runs.PREDICTIONS).read_bytes() == before  # nothing scored, nothing lost
    m = json.loads((out / runs.METRICS).read_text())
    assert m["items"] == {"selected": n_pair, "evaluated": n_pair}
    assert m["n"] == n_pair and m["tasks"] == {"pairwise": n_pair}
    assert "pointwise" not in m and "ordering" not in m
    assert m["pairwise"] == full["pairwise"]
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["tasks"] == ["pairwise"] and info["items"]["n"] == n_pair and info["identity"]["max_new_tokens"] == 6
    assert info["command"].startswith("judgetrain eval judge --model") and "--tasks pairwise" in info["command"]
    assert cells_of(out)["pairwise Acc all"] == pytest.approx(100 * full["pairwise"]["all"]["accuracy"])
    # and back to every task: the full metrics again
    assert _judge(tiny_qwen, data, out) == 0
    again = json.loads((out / runs.METRICS).read_text())
    assert {k: v for k, v in again.items() if k != "run"} == {k: v for k, v in full.items() if k != "run"}
    assert again["items"] == {"selected": n_point + n_pair + 2, "evaluated": n_point + n_pair + 2}


def cells_of(run):
    return J.cells(json.loads((run / runs.METRICS).read_text()))


def test_rebuilt_dataset_is_refused_then_overwrite_starts_afresh(tiny_qwen, tmp_path, capsys):
    from judgetrain.data_builders import prism

    data, out = tmp_path / "prism", tmp_path / "run"

    def build(seed):
        prism.build(prism.PrismConfig(out=data, synthetic=4, seed=seed, layouts=["P0"], modes=["pairwise"], synthetic_size=64,
                                      splits={"test": 1.0}, progress=False, overwrite=True))  # a rebuild in place

    build(1)
    argv = ("--limit", "4")
    assert _judge(tiny_qwen, data, out, *argv) == 0
    first = [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)]
    assert len(first) == 4
    build(2)  # the same folder, another seed: other records
    capsys.readouterr()
    assert _judge(tiny_qwen, data, out, *argv) == 2
    err = capsys.readouterr().err
    assert "holds predictions of another run" in err and "data.content_hash.test" in err
    assert "--out NEW_FOLDER" in err and "--overwrite" in err
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)] == first  # untouched

    assert _judge(tiny_qwen, data, out, *argv, "--overwrite") == 0
    new_ids = records.load(data)["test"]["id"][:4]
    assert set(new_ids).isdisjoint(first)
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)] == new_ids
    m = json.loads((out / runs.METRICS).read_text())
    assert m["n"] == 4 and m["items"] == {"selected": 4, "evaluated": 4}
    info = json.loads((out / runs.RUN_INFO).read_text())
    assert info["identity"]["data"]["content_hash"]["test"] == records.read_build_info(data)["splits"]["test"]["content_hash"]


def test_eval_report_rebuilds_a_judge_report(score_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(score_run, out)
    for name in (runs.METRICS, runs.REPORT, "pairwise_layouts.png", "pointwise_scores.png"):
        (out / name).unlink()
    assert cli_main(["eval", "report", str(out)]) == 0
    assert json.loads((out / runs.METRICS).read_text()) == json.loads((score_run / runs.METRICS).read_text())
    md = (out / runs.REPORT).read_text()
    assert md.startswith("# Judge evaluation") and "## Pairwise (paper 002 Table S2 layout)" in md
    assert "TimeCatch" not in md and f"judgetrain eval report {out}" in md
    assert (out / "pairwise_layouts.png").stat().st_size > 1000 and (out / "pointwise_scores.png").is_file()
    assert f"Report written to {out / runs.REPORT}" in capsys.readouterr().out


def test_eval_compare_two_judge_runs_and_refuses_other_data(tiny_qwen, judge_data, score_run, tmp_path, capsys, rates):
    from judgetrain.eval.core import compare as C

    fixed = tmp_path / "fixed"  # the same run with every pairwise answer right
    shutil.copytree(score_run, fixed)
    rows = [dict(r, prediction=r["label"], correct=True) if r["task"] == "pairwise" else r
            for r in runs.read_predictions(fixed / runs.PREDICTIONS)]
    write_rows(fixed / runs.PREDICTIONS, rows)
    JR.report(fixed)
    base = cells_of(score_run)
    assert list(base) == ["pairwise Acc PRISM-Semantic", "pairwise F1 PRISM-Semantic", "pairwise Acc PRISM-Temporal",
                          "pairwise F1 PRISM-Temporal", "pairwise Acc all", "pairwise F1 all",
                          *(f"pointwise Acc {s}" for s in json.loads((score_run / runs.METRICS).read_text())["pointwise"]["by_subset"]),
                          "pointwise Acc all", "ordering exact match"]
    m = json.loads((score_run / runs.METRICS).read_text())
    assert base["pairwise F1 PRISM-Temporal"] == pytest.approx(100 * m["pairwise"]["by_subset"]["PRISM-Temporal"]["all"]["f1"])
    assert base["ordering exact match"] == pytest.approx(100 * m["ordering"]["exact_match"])

    md_out = tmp_path / "compare.md"
    assert cli_main(["eval", "compare", str(score_run), str(fixed), "--names", "base,fixed", "--out", str(md_out)]) == 0
    result = C.compare([score_run, fixed], ["base", "fixed"])
    assert result["evaluation"] == "judge" and result["columns"] == list(base)
    (_, b, _), (_, f, _), (delta_name, d, is_delta) = result["rows"]
    col = result["columns"].index("pairwise Acc all")
    assert f[col] == 100 and is_delta and delta_name == "Δ fixed" and d[col] == pytest.approx(100 - b[col])
    assert d[result["columns"].index("pointwise Acc all")] == 0  # pointwise untouched
    md = md_out.read_text()
    assert md.startswith("judge: values in %") and "| pairwise Acc PRISM-Temporal |" in md and "| Δ fixed |" in md
    (header, cells), = rates.tables(md)
    delta = dict(zip(header, cells[2], strict=True))["pairwise Acc all"]
    n = judge_data[2]  # the fixed run answers all n right; the base run b[col] % of them
    assert delta == f"{d[col]:+.1f} {rates.delta(round(b[col] * n / 100), n, n, n)} (fixed vs base, n={n}/{n})"
    capsys.readouterr()

    # a run on other data (the PRISM set alone) is refused, then marked with --allow-different-data
    other = tmp_path / "other"
    assert _judge(tiny_qwen, judge_data[0].parent / "prism", other, "--tasks", "pairwise", "--limit", "4") == 0
    capsys.readouterr()
    assert cli_main(["eval", "compare", str(score_run), str(other)]) == 2
    err = capsys.readouterr().err
    assert "evaluated different data" in err and "score → other: data." in err and "--allow-different-data" in err
    assert cli_main(["eval", "compare", str(score_run), str(other), "--allow-different-data"]) == 0
    assert "* other: other data than score" in capsys.readouterr().out


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_match_one(tiny_qwen, judge_data, score_run, tmp_path):
    out = tmp_path / "ddp"
    accelerate = Path(sys.executable).parent / "accelerate"
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", str(_free_port()), "-m", "judgetrain.eval.judge",
           "--model", str(tiny_qwen), "--data", str(judge_data[0]), "--out", str(out), "--batch-size", "4",
           "--max-new-tokens", "6", "--no-progress"]
    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads((out / runs.METRICS).read_text())
    ref = json.loads((score_run / runs.METRICS).read_text())
    assert got["run"]["world_size"] == 2
    assert {k: v for k, v in got.items() if k != "run"} == {k: v for k, v in ref.items() if k != "run"}
    assert not list(out.glob("predictions.rank*.jsonl"))
    assert [r["id"] for r in runs.read_predictions(out / runs.PREDICTIONS)] == [r["id"] for r in runs.read_predictions(score_run / runs.PREDICTIONS)]
