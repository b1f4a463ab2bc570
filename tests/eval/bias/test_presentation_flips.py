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
    return {"id": f"{key}-{label}", "task": "pairwise", "twin": key, "label": label, "prediction": prediction,
            "valid": prediction is not None, "correct": prediction == label, "choices": ["A", "B"], "layout": "P0",
            "presentation": presentation, "perturbation": "swap", "position": 0, "n_frames": 8}


ROWS = [
    *[_twin("always-a", lab, "A") for lab in "AB"],          # prefers gold, then the other: a flip
    *[_twin("right", lab, lab) for lab in "AB"],             # gold both times: agrees
    *[_twin("wrong", lab, "B" if lab == "A" else "A") for lab in "AB"],  # the other sequence both times: agrees
    *[_twin("always-b", lab, "B") for lab in "AB"],          # a flip
    *[_twin("invalid", lab, p) for lab, p in (("A", "A"), ("B", None))],  # one answer unparseable: skipped
    _twin("alone", "A", "A"),                                # its twin not in the run: skipped
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
