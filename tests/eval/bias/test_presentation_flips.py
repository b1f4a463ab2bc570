"""The presentation-flip rate of `eval bias` on hand-built twin rows (a `--twins` build shows each pairwise
item both ways round): a pair flips when the judge prefers the gold sequence in one presentation and the
other sequence in the other; pairs with a missing twin or an invalid answer are counted apart."""

from __future__ import annotations

import json

from judgetrain.eval import bias as B
from judgetrain.eval.core import runs
from judgetrain.eval.core.metrics import ci95
from judgetrain.io import RowAppender


def _twin(key: str, label: str, prediction: str | None) -> dict:
    presentation = "gold_first" if label == "A" else "gold_second"
    return {
        "id": f"{key}-{label}",
        "task": "pairwise",
        "twin": key,
        "label": label,
        "prediction": prediction,
        "valid": prediction is not None,
        "correct": prediction == label,
        "choices": ["A", "B"],
        "layout": "P0",
        "presentation": presentation,
        "perturbation": "swap",
        "position": 0,
        "n_frames": 8,
    }


ROWS = [
    *[_twin("always-a", lab, "A") for lab in "AB"],  # prefers gold, then the other: a flip
    *[_twin("right", lab, lab) for lab in "AB"],  # gold both times: agrees
    *[_twin("wrong", lab, "B" if lab == "A" else "A") for lab in "AB"],  # the other sequence both times: agrees
    *[_twin("always-b", lab, "B") for lab in "AB"],  # a flip
    *[_twin("invalid", lab, p) for lab, p in (("A", "A"), ("B", None))],  # one answer unparseable: skipped
    _twin("alone", "A", "A"),  # its twin not in the run: skipped
    {"id": "no-twin", "task": "pairwise", "label": "A", "prediction": "A", "valid": True, "choices": ["A", "B"], "layout": "P0"},
]


def test_flip_rate_counts_pairs_whose_preference_changes_with_the_presentation():
    f = B.presentation_flips(ROWS)
    # 4 whole valid pairs (always-a, right, wrong, always-b), 2 of them flip
    assert {k: f[k] for k in ("rate", "n", "flips")} == {"rate": 0.5, "n": 4, "flips": 2}
    assert f["ci95"] == ci95(2, 4) and f["ci95"][0] < 0.5 < f["ci95"][1]
    assert f["skipped"] == {"twin_missing": 1, "invalid": 1}
    assert B.presentation_flips([r for r in ROWS if not r.get("twin")]) is None


def test_bias_reports_the_flip_rate_of_a_run_with_twins(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with RowAppender(run / runs.PREDICTIONS) as w:
        w.write(ROWS)
    (run / runs.RUN_INFO).write_text(json.dumps({"model": "m", "adapter": None}))
    result = B.bias([run])
    assert result["runs"]["m"]["presentation_flips"]["rate"] == 0.5
    report = (run / B.BIAS_REPORT).read_text()
    assert "## Presentation flips (twin pairs)" in report and "| m | 50.0" in report


def test_judge_then_bias_on_a_twins_build(tmp_path, tiny_model):
    """End to end: a tiny PRISM --twins build, `eval judge` with a tiny random model (its rows carry the
    twin key), then `eval bias` reports the flip rate over every pair the run answered validly."""
    import sys
    from unittest import mock

    import datasets

    from judgetrain import records
    from judgetrain.cli import main as cli_main
    from judgetrain.data_builders import prism

    cfg = {"synthetic": 2, "layouts": ("P0",), "synthetic_size": 64, "splits": {"test": 1.0}, "progress": False}
    prism.build(prism.PrismConfig(out=tmp_path / "prism", seed=4, twins=True, **cfg))
    test = records.load(tmp_path / "prism")["test"]
    pairwise = [i for i, t in enumerate(test["task"]) if t == "pairwise"][:8]  # four twin pairs
    records.save(datasets.DatasetDict({"test": test.select(pairwise)}), tmp_path / "data", {"builder": "test-twins"})
    run = tmp_path / "run"
    argv = [
        "eval",
        "judge",
        "--model",
        str(tiny_model("qwen3-vl")),
        "--data",
        str(tmp_path / "data"),
        "--split",
        "test",
        "--out",
        str(run),
        "--batch-size",
        "4",
        "--max-new-tokens",
        "4",
        "--no-progress",
    ]
    with mock.patch.object(sys, "argv", ["judgetrain", *argv]):
        assert cli_main(argv) == 0
    rows = [json.loads(line) for line in (run / runs.PREDICTIONS).read_text().splitlines() if line.strip()]
    pairs: dict[str, list[dict]] = {}
    for r in rows:
        pairs.setdefault(r["twin"], []).append(r)
    assert len(pairs) == 4 and all(len(p) == 2 for p in pairs.values())
    valid = [p for p in pairs.values() if all(r["valid"] for r in p)]
    flips = sum((a["prediction"] == a["label"]) != (b["prediction"] == b["label"]) for a, b in valid)
    (found,) = [r["presentation_flips"] for r in B.bias([run])["runs"].values()]
    assert (found["n"], found["flips"], found["skipped"]) == (len(valid), flips, {"twin_missing": 0, "invalid": 4 - len(valid)})
