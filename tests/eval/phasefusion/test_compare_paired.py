"""`judgetrain eval compare`'s paired tests (issue 17): on PhaseFusion runs, a `p` row after each
Δ row holding exact McNemar p-values for accuracy and ordering flips and Wilcoxon signed-rank
p-values for the median margin, each on the questions both runs scored; hand-worked values,
checked against scipy. Evaluations without paired tests keep their table as it was. The runs
are hand-written `predictions.jsonl` + `run.json` folders, reported through `eval report`'s
code path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import scipy.stats

from judgetrain.cli import main as cli_main
from judgetrain.eval.core import wilcoxon_signed_rank
from judgetrain.eval.core.compare import compare
from judgetrain.eval.phasefusion import report as PR
from judgetrain.eval.phasefusion.paired import TESTS, paired

ARMS = ["single", "fusion", "vote"]
ORIGINS = ["0", "1/4"]
GOLD = 0  # every question's gold option

# Per question: the content-space posterior at the identity ordering and at ordering 1.
# base: q1..q4 wrong, q5 q6 right; only q5 flips; margins .2 .3 .7 .15 .3 .85 (median .3)
BASE = {
    "q1": ([0.2, 0.5, 0.3], [0.2, 0.5, 0.3]),
    "q2": ([0.3, 0.6, 0.1], [0.3, 0.6, 0.1]),
    "q3": ([0.1, 0.8, 0.1], [0.1, 0.8, 0.1]),
    "q4": ([0.3, 0.45, 0.25], [0.3, 0.45, 0.25]),
    "q5": ([0.6, 0.3, 0.1], [0.2, 0.7, 0.1]),
    "q6": ([0.9, 0.05, 0.05], [0.9, 0.05, 0.05]),
}
# tuned: q1..q3 now right (3 wrong -> right, none back), q4 still wrong; q1..q4 flip, q5 no longer
# does (4 vs 1 discordant); margins .45 .45 .65 .5 .75 .75 (median .575), so the paired margin
# differences are +.25 +.15 -.05 +.35 +.45 -.10
TUNED = {
    "q1": ([0.65, 0.2, 0.15], [0.2, 0.65, 0.15]),
    "q2": ([0.65, 0.15, 0.2], [0.15, 0.2, 0.65]),
    "q3": ([0.8, 0.15, 0.05], [0.15, 0.8, 0.05]),
    "q4": ([0.2, 0.7, 0.1], [0.7, 0.2, 0.1]),
    "q5": ([0.85, 0.1, 0.05], [0.85, 0.1, 0.05]),
    "q6": ([0.85, 0.05, 0.1], [0.85, 0.05, 0.1]),
}
SHAPES = {"single": (1, 2), "phase": (2, 2)}  # grid -> (views, budget)


def _rows(posteriors):
    """Prediction rows of a run whose two phase views both score what the single pass scores (so
    fusion and vote answer as single does) at both origins (nothing changes under the shift)."""
    rows = []
    for qid, orderings in posteriors.items():
        for origin in ORIGINS:
            for grid, (views, budget) in SHAPES.items():
                for s in range(views):
                    for k, post in enumerate(orderings):
                        rows.append({"id": qid, "kind": "pass", "origin": origin, "grid": grid, "phase": s,
                                     "ordering": k, "posterior": post, "answer": GOLD})
                rows.append({"id": qid, "kind": "cost", "origin": origin, "grid": grid, "views": views,
                             "budget": budget, "attention_units": views * budget ** 2, "passes": views * 2,
                             "latency_s": 0.1, "peak_memory_bytes": 1000, "memory_kind": "process_rss_peak"})
        rows.append({"id": qid, "kind": "question", "answer": GOLD, "n_options": 3, "video": f"{qid}.mp4",
                     "benchmark": "mme", "duration": 4.0, "decode_s": 0.01, "decode_passes": 1, "decoded_frames": 8})
    return rows


def _run(path: Path, posteriors, model: str) -> Path:
    path.mkdir(parents=True)
    (path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows(posteriors)))
    ids = list(posteriors)
    info = {"evaluation": "phasefusion", "arms": ARMS, "budget": 2, "phases": 2, "orderings": 2, "origins": ORIGINS,
            "manifest": "manifest.jsonl", "items": {"ids": ids, "n": len(ids)},
            "identity": {"data": {"sha256": "d0"}, "model": {"name": model}, "adapter": None}}
    (path / "run.json").write_text(json.dumps(info))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("paired")
    base, tuned = _run(root / "base", BASE, "base"), _run(root / "tuned", TUNED, "tuned")
    fewer = _run(root / "fewer", {q: p for q, p in TUNED.items() if q != "q6"}, "tuned")
    return {"base": base, "tuned": tuned, "fewer": fewer, "root": root}


def _margin(post):
    top = sorted(post, reverse=True)
    return top[0] - top[1]


def test_hand_worked_p_values_match_scipy(runs):
    got = paired(runs["base"], runs["tuned"])
    assert set(got) == {f"{k} {a}" for k in ("acc", "flip") for a in ARMS} | {"margin single", "margin fusion"}
    assert all(got[c]["n"] == 6 for c in got)
    for arm in ARMS:
        # 3 questions wrong -> right, none back: exact McNemar p = 2 * 0.5**3
        assert got[f"acc {arm}"]["pvalue"] == pytest.approx(2 * 0.5 ** 3) == scipy.stats.binomtest(3, 3).pvalue
        # flips: 4 questions start flipping, 1 stops: p = 2 * P(X <= 1 | 5, 1/2) = 2 * 6/32
        assert got[f"flip {arm}"]["pvalue"] == pytest.approx(0.375) == pytest.approx(scipy.stats.binomtest(1, 5).pvalue)
        assert (got[f"acc {arm}"]["test"], got[f"flip {arm}"]["test"]) == (TESTS["acc"], TESTS["flip"])
    # margin differences +.25 +.15 -.05 +.35 +.45 -.10: ranks 4 3 1 5 6 2, negative ranks sum to 3;
    # exact two-sided p = 2 * #{subsets of 1..6 summing to <= 3} / 2**6 = 2 * 5 / 64
    diffs = [_margin(TUNED[q][0]) - _margin(BASE[q][0]) for q in BASE]
    assert diffs == pytest.approx([0.25, 0.15, -0.05, 0.35, 0.45, -0.10])
    for arm in ("single", "fusion"):
        assert got[f"margin {arm}"]["pvalue"] == pytest.approx(10 / 64)
        assert got[f"margin {arm}"]["test"] == TESTS["margin"]
    assert got["margin single"]["pvalue"] == pytest.approx(scipy.stats.wilcoxon(diffs).pvalue)
    assert "margin vote" not in got  # a vote has no posterior, hence no margin


def test_wilcoxon_without_a_nonzero_difference_is_one():
    assert wilcoxon_signed_rank([0.3, 0.5], [0.3, 0.5]) == 1.0
    assert wilcoxon_signed_rank([0.4, 0.5, 0.2], [0.3, 0.5, 0.1]) == pytest.approx(
        scipy.stats.wilcoxon([0.1, 0.0, 0.1]).pvalue)
    with pytest.raises(ValueError, match="aligned, non-empty"):
        wilcoxon_signed_rank([0.1], [])


def test_compare_adds_a_p_row_after_each_delta_row(runs):
    result = compare([runs["base"], runs["tuned"], runs["tuned"]], ["base", "js1", "js1-again"])
    columns = result["columns"]
    m_base, m_tuned = (json.loads((runs[w] / "metrics.json").read_text()) for w in ("base", "tuned"))
    assert columns == list(PR.cells(m_base))
    assert columns == [*(f"acc {a}" for a in ARMS), *(f"flip {a}" for a in ARMS), "margin single", "margin fusion",
                       *(f"changed {a} 0→1/4" for a in ARMS)]
    # margins in %: medians .3 and .575
    assert PR.cells(m_base)["margin single"] == pytest.approx(30.0)
    assert PR.cells(m_tuned)["margin fusion"] == pytest.approx(57.5)
    assert [r[0] for r in result["rows"]] == ["base", "js1", "Δ js1", "js1-again", "Δ js1-again"]
    p = {c: v for c, v in zip(columns, result["paired"][0]["pvalues"])}
    assert [e["label"] for e in result["paired"]] == ["p js1", "p js1-again"]
    assert {c: p[c] for c in p if p[c] is not None} == pytest.approx(
        {**{f"acc {a}": 0.25 for a in ARMS}, **{f"flip {a}": 0.375 for a in ARMS},
         "margin single": 10 / 64, "margin fusion": 10 / 64})
    assert all(p[f"changed {a} 0→1/4"] is None for a in ARMS)  # Table 1B's columns have no paired test
    assert result["paired"][0]["n"] == {c: 6 for c in columns if not c.startswith("changed")}
    assert result["tests"] == {c: TESTS[c.split()[0]] for c in columns if not c.startswith("changed")}

    md = result["markdown"]
    lines = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| |")]
    assert [line.split("|")[1].strip() for line in lines] == ["base", "js1", "Δ js1", "p js1", "js1-again",
                                                             "Δ js1-again", "p js1-again"]
    p_line = [c.strip() for c in lines[3].split("|")[2:-1]]
    assert p_line == ["0.250"] * 3 + ["0.375"] * 3 + ["0.156"] * 2 + ["–"] * 3
    assert "p rows: two-sided p-value of the paired test against base (uncorrected)" in md
    assert f"- {TESTS['acc']}: `acc single`, `acc fusion`, `acc vote`" in md
    assert f"- {TESTS['margin']}: `margin single`, `margin fusion`" in md
    assert "- no paired test (–): the other columns" in md
    assert "- p js1: n = 6 paired items (by id)" in md


def test_different_items_pair_on_the_shared_ids(runs, capsys):
    assert cli_main(["eval", "compare", str(runs["base"]), str(runs["fewer"])]) == 2
    assert "--allow-different-data" in capsys.readouterr().err
    out = runs["root"] / "cmp.md"
    assert cli_main(["eval", "compare", str(runs["base"]), str(runs["fewer"]), "--names", "base,fewer",
                     "--allow-different-data", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "p fewer *" in printed and "p fewer *: n = 5 paired items (by id)" in printed
    result = compare([runs["base"], runs["fewer"]], ["base", "fewer"], allow_different_data=True)
    p = dict(zip(result["columns"], result["paired"][0]["pvalues"]))
    # without q6 (margin difference -.10, rank 2): the one negative rank is 1 of 1..5, p = 2 * 2 / 32
    assert p["margin single"] == pytest.approx(0.125)
    assert p["acc single"] == pytest.approx(0.25)  # q6 was right in both runs: not discordant
    # q5 still stops flipping; q1..q4 start: unchanged
    assert p["flip single"] == pytest.approx(0.375)
    assert result["paired"][0]["label"] == "p fewer *" and set(result["paired"][0]["n"].values()) == {5}
    assert "- p fewer *: n = 5 paired items (by id)" in out.read_text()


def test_identical_runs_have_p_one(runs):
    got = paired(runs["base"], runs["base"])
    assert {c: e["pvalue"] for c, e in got.items()} == {c: 1.0 for c in got} and len(got) == 8


def test_evaluations_without_paired_tests_have_no_p_row(tmp_path):
    """A TimeCatch comparison is what it was: runs and Δ rows only, and the old header line."""
    for name, acc in (("a", 0.5), ("b", 0.75)):
        run = tmp_path / name
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"evaluation": "timecatch", "split": "validation",
                                                  "identity": {"data": {"sha256": "d0"}}}))
        (run / "metrics.json").write_text(json.dumps({"table2": {"main": {"temporal_detect": {"clevrer": {"accuracy": acc}}}}}))
    result = compare([tmp_path / "a", tmp_path / "b"])
    assert result["paired"] == [] and result["tests"] == {}
    assert result["rows"] == [("a", [50.0], False), ("b", [75.0], False), ("Δ b", [25.0], True)]
    assert result["markdown"] == ("timecatch: values in %; Δ rows: difference to a in percentage points.\n\n"
                                  "| | TD clevrer |\n|---|---:|\n| a | 50.0 |\n| b | 75.0 |\n| Δ b | +25.0 |\n")


@pytest.mark.parametrize("columns, wide", [(600, True), (80, False)])
def test_the_terminal_table_turns_when_the_arms_do_not_fit(runs, capsys, monkeypatch, columns, wide):
    """Side by side (runs as rows, like the markdown) where the terminal is wide enough; otherwise
    one row per column, so a dozen arm columns are not squeezed into ellipses."""
    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli_main(["eval", "compare", str(runs["base"]), str(runs["tuned"]), "--names", "base,js1"]) == 0
    printed = capsys.readouterr().out
    # a cell's interval and n may wrap onto a second line: its first cell is then empty
    rows = [cell for line in printed.splitlines() if line.startswith("│") and (cell := line.split("│")[1].strip())]
    if wide:
        assert rows == ["base", "js1", "Δ js1", "p js1"]
    else:
        result = compare([runs["base"], runs["tuned"]], ["base", "js1"])
        assert rows == result["columns"] and "acc single" in rows and "…" not in printed
        acc = next(line for line in printed.splitlines() if line.startswith("│ acc single"))
        assert [c.strip() for c in acc.split("│")[2:-1]][-1] == "0.250"  # the p js1 cell of McNemar above
