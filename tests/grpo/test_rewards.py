"""The GRPO rewards on hand-worked generation batches: each reward, each task kind, the
values worked out in the comments; completions as TRL passes them (conversational messages,
content parts, plain strings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgetrain.grpo import rewards
from judgetrain.grpo.args import REWARD_NAMES
from judgetrain.grpo.rewards import NAMES, REWARDS, consistency, correct, format, reward_functions


def msg(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def parts(text: str) -> list[dict]:
    return [{"role": "assistant", "content": [{"type": "text", "text": text}]}]


def columns(*records: tuple[dict, int]) -> dict[str, list]:
    """TRL's reward columns: each record's values repeated once per generation of it, in order."""
    names = ("id", "task", "choices", "label", "n_frames", "meta", "reference")
    out: dict[str, list] = {name: [] for name in names}
    for rec, generations in records:
        given = {"n_frames": 0, "meta": "{}", "reference": rec["label"], **rec}  # an answer-only record unless told
        for name in names:
            out[name] += [given[name]] * generations
    return out


def record(rid: str, task: str, choices: list[str], label: str, **extra) -> dict:
    meta = extra.pop("meta", {})
    return {"id": rid, "task": task, "choices": choices, "label": label, "meta": json.dumps(meta), **extra}


YES_NO = ["yes", "no"]
PAIRS = ["1 and 2", "1 and 3", "1 and 4", "2 and 3", "2 and 4", "3 and 4"]
AB = ["A", "B"]
LIKERT = ["1", "2", "3", "4", "5"]


# --------------------------------------------------------------------------- registry


def test_registry_names_and_order():
    assert NAMES == ("correct", "format", "consistency") == REWARD_NAMES
    assert all(fn.__name__ == name for name, fn in REWARDS.items())  # TRL logs rewards/<__name__>/mean
    assert reward_functions(["consistency", "correct"]) == [consistency, correct]
    with pytest.raises(ValueError, match=r"unknown reward 'corect'.*correct, format or consistency.*did you mean 'correct'"):
        reward_functions(["correct", "corect"])


# --------------------------------------------------------------------------- correct


def test_correct_closed_answers_exact():
    detect = record("d", "temporal_detect", YES_NO, "yes", n_frames=4)
    frame = record("f", "frame_localize", ["1", "2", "3", "4"], "3", n_frames=4)
    pair = record("p", "temporal_localize", PAIRS, "2 and 3", n_frames=4)
    ab = record("ab", "pairwise", AB, "B")
    cols = columns((detect, 3), (frame, 3), (pair, 3), (ab, 4))
    completions = [
        msg("Yes, the frames are out of order."),  # yes = label: 1
        msg("no"),  # 0
        msg("maybe"),  # unparseable: 0
        parts("Frame 3."),  # 1
        parts("Answer: 5"),  # 5 is out of 1..4: unparseable, 0
        parts("2"),  # 0
        "3 and 2",  # the parser's canonical "2 and 3" = label: 1
        "frames 3 and 4",  # 0
        "3 and 3",  # equal frames: unparseable, 0
        "<think>A looks right... no wait</think>Answer: B",  # the answer after the think block: B = label, 1
        "<think>B, surely. Answer: B",  # a think block that never closed holds no answer: 0
        "Sequence A",  # 0
        "A or B",  # unparseable: 0
    ]
    assert correct(prompts=[None] * 13, completions=completions, completion_ids=[[]] * 13, trainer_state=None, **cols) == [
        1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip


def test_correct_pointwise_partial_credit_by_distance():
    cols = columns((record("s", "pointwise", LIKERT, "4"), 6))
    completions = ["4", "Rating: 5", "3", "1", "The score is 2.", "6"]
    # 1 − |answer − 4| / 4: 1, 0.75, 0.75, 0.25, 0.5; "6" is no rating: 0
    assert correct(completions=completions, **cols) == [1.0, 0.75, 0.75, 0.25, 0.5, 0.0]


def test_correct_ordering_by_kendall_tau():
    letters = record("o", "ordering", [], "B-D-A-C", n_frames=4)
    numbers = record("n", "ordering", [], "2, 4, 1, 3", n_frames=4)
    cols = columns((letters, 4), (numbers, 2))
    completions = [
        "B-D-A-C",  # identical: τ = 1 → 1
        "C-A-D-B",  # reversed: τ = −1 → 0
        # gold ranks: B0 D1 A2 C3; answer B-A-D-C ranks B0 A1 D2 C3: of the 6 image pairs only (A, D) is
        # discordant, so τ = (5 − 1) / 6 = 2/3 → (1 + 2/3) / 2 = 5/6
        "Answer: B-A-D-C",
        "B-D-A",  # not a permutation of A..D: unparseable, 0
        "2, 4, 3, 1",  # gold 2 4 1 3: only (1, 3) discordant, τ = 2/3 → 5/6
        "1, 2, 3",  # unparseable: 0
    ]
    got = correct(completions=completions, **cols)
    assert got == pytest.approx([1.0, 0.0, 5 / 6, 0.0, 5 / 6, 0.0])


def test_correct_video_mcq_letter():
    view = record("q:v0", "video_mcq", ["A", "B", "C", "D"], "C", meta={"group": "q", "views": 1, "perm": [2, 0, 3, 1]})
    cols = columns((view, 3))
    assert correct(completions=["C", "Answer: A", "E"], **cols) == [1.0, 0.0, 0.0]  # "E" is no choice: 0


def test_correct_refuses_a_label_its_parser_cannot_read():
    cols = columns((record("bad", "pairwise", AB, "C"), 1))
    with pytest.raises(ValueError, match=r"record 'bad': its label 'C' is not an answer its parser"):
        correct(completions=["A"], **cols)


def test_missing_column_named():
    cols = columns((record("d", "temporal_detect", YES_NO, "yes"), 1))
    del cols["label"]
    with pytest.raises(ValueError, match=r"correct reward reads the column\(s\) \['label'\]"):
        correct(completions=["yes"], **cols)


# --------------------------------------------------------------------------- format


def test_format_on_rationale_records_only():
    rationale = record("r", "pairwise", AB, "A", reference="Sequence A shows every step in order.\nAnswer: A")
    answer_only = record("a", "pairwise", AB, "A", reference="A")
    cols = columns((rationale, 7), (answer_only, 2))
    completions = [
        "B skips step 2; A does not.\nAnswer: B",  # rationale then the answer line (a wrong answer is correct's business): 1
        "A",  # the answer alone: 0
        "Answer: A",  # no rationale before the answer line: 0
        "Answer: A\nbecause A is in order",  # the answer is not on the last line: 0
        "A is in order.\nFinal answer: A",  # the parser reads it, but the last line is not `Answer: X`: 0
        "<think>compare them</think>A is in order.\nAnswer: A",  # a rationale after the think block: 1
        "<think>A is in order.\nAnswer: A",  # a think block that never closed: 0
        "A",  # answer-only record: does not apply
        "A is in order.\nAnswer: A",  # does not apply either
    ]
    assert format(completions=completions, **cols) == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, None, None]


def test_format_pointwise_rationale():
    cols = columns((record("s", "pointwise", LIKERT, "3", reference="Step 2 is missing.\nAnswer: 3"), 3))
    assert format(completions=[parts("Two steps are swapped.\nAnswer: 4"), parts("Fine.\nAnswer: 9"), parts("3")], **cols) == [
        1.0, 0.0, 0.0,  # 9 is no rating: the parser reads no answer
    ]  # fmt: skip


# --------------------------------------------------------------------------- consistency


def twin(rid: str, key: str, gold: str) -> dict:
    return record(rid, "pairwise", AB, gold, meta={"twin": key, "gold_letter": gold, "presentation": "x"})


def test_consistency_pairwise_twins():
    # one pair shown both ways: in t1 the gold sequence is A, in t2 it is B; 3 generations each
    cols = columns((twin("t1", "k", "A"), 3), (twin("t2", "k", "B"), 3))
    completions = [
        "A",  # t1 prefers gold; t2's preferences: gold (B), other (A), unparseable → 1 of 3 agree: 1/3
        "B",  # t1 prefers other; 1 of t2's 3 (its "A") prefers other: 1/3
        "C",  # unparseable: 0
        "B",  # t2 prefers gold; t1's: gold (A), other (B), unparseable → 1/3
        "A",  # t2 prefers other: t1's "B" → 1/3
        "maybe",  # unparseable: 0
    ]
    assert consistency(completions=completions, **cols) == pytest.approx([1 / 3, 1 / 3, 0.0, 1 / 3, 1 / 3, 0.0])
    # a judge that always says "A" prefers gold in t1 and other in t2: it never agrees with itself
    assert consistency(completions=["A"] * 6, **cols) == [0.0] * 6
    # one that always names the gold sequence agrees everywhere, whatever the letter
    assert consistency(completions=["A", "A", "A", "B", "B", "B"], **cols) == [1.0] * 6


def test_consistency_video_mcq_views():
    # one question, 3 views with options in other slots (slot j shows option perm[j]), 2 generations each
    meta = {"group": "q", "views": 3}
    v0 = record("q:v0", "video_mcq", ["A", "B", "C"], "A", meta={**meta, "perm": [0, 1, 2]})
    v1 = record("q:v1", "video_mcq", ["A", "B", "C"], "C", meta={**meta, "perm": [2, 1, 0]})
    v2 = record("q:v2", "video_mcq", ["A", "B", "C"], "B", meta={**meta, "perm": [1, 0, 2]})
    cols = columns((v0, 2), (v1, 2), (v2, 2))
    completions = [
        "A",  # v0 → option 0; the others: v1 "C"→0, "B"→1, v2 "B"→0, "D"→none: 2 of 4 agree → 0.5
        "C",  # v0 → option 2; others 0, 1, 0, none → 0
        "C",  # v1 → option 0; others v0 0, 2, v2 0, none → 2/4
        "B",  # v1 → option 1; none of 0, 2, 0, none → 0
        "B",  # v2 → option 0; others v0 0, 2, v1 0, 1 → 2/4
        "D",  # not a choice: unparseable, 0
    ]
    assert consistency(completions=completions, **cols) == [0.5, 0.0, 0.5, 0.0, 0.5, 0.0]


def test_consistency_none_outside_groups():
    lone = record("p", "pairwise", AB, "A", meta={"gold_letter": "A"})  # pairwise without a twin
    detect = record("d", "temporal_detect", YES_NO, "yes", n_frames=4)
    single = record("s:v0", "video_mcq", ["A", "B"], "A", meta={"group": "s", "views": 1, "perm": [0, 1]})
    cols = columns((twin("t1", "k", "A"), 1), (lone, 1), (detect, 1), (twin("t2", "k", "B"), 1), (single, 1))
    # t1 "A" and t2 "B" both prefer gold: 1 each; a question shown once has nothing to agree with: None
    assert consistency(completions=["A", "A", "yes", "B", "A"], **cols) == [1.0, None, None, 1.0, None]


def test_consistency_refuses_a_twin_missing_from_the_batch():
    # t2's twin is absent; counting distinct ids, t1's 2 generations are still one record
    cols = columns((twin("t1", "k", "A"), 2), (twin("u1", "m", "A"), 1), (twin("u2", "m", "B"), 1))
    with pytest.raises(
        RuntimeError, match=r"found 1 of the 2 records of question twin:k \(\['t1'\]\).*must meet in one generation batch"
    ):
        consistency(completions=["A", "A", "A", "B"], **cols)


def test_consistency_needs_the_mapping_back():
    bad = record("t1", "pairwise", AB, "A", meta={"twin": "k"})
    with pytest.raises(ValueError, match=r"record 't1' \(pairwise\): meta has no 'gold_letter'"):
        consistency(completions=["A"], **columns((bad, 1)))


def test_unknown_keyword_arguments_are_ignored():
    cols = columns((record("d", "temporal_detect", YES_NO, "no"), 1))
    extra = {"prompts": [[]], "completion_ids": [[1]], "trainer_state": None, "log_extra": print, "log_metric": print,
             "images": [[]], "source": ["x"]}  # fmt: skip
    assert [fn(completions=["no"], **cols, **extra) for fn in rewards.REWARDS.values()] == [[1.0], [None], [None]]


@pytest.mark.slow  # two launched processes: a few seconds more than the rest of this file
def test_consistency_gathers_the_group_over_processes(tmp_path):
    """Two processes, as TRL splits a generation batch: twin t1 on rank 0 and t2 on rank 1, and view
    w0's two generations one on each rank. Alone, rank 0 would miss t1's twin."""
    t1, t2 = twin("t1", "k", "A"), twin("t2", "k", "B")
    meta = {"group": "w", "views": 2}
    w0 = record("w:v0", "video_mcq", AB, "A", meta={**meta, "perm": [0, 1]})
    w1 = record("w:v1", "video_mcq", AB, "B", meta={**meta, "perm": [1, 0]})
    batch = {
        # t1: gold, gold, other; w0: option 0
        "0": {"completions": ["A", "A", "B", "A"], "columns": columns((t1, 3), (w0, 1))},
        # t2: gold, other, gold; w0: option 1; w1: option 0, option 0
        "1": {"completions": ["B", "A", "B", "B", "B", "B"], "columns": columns((t2, 3), (w0, 1), (w1, 2))},
    }
    (tmp_path / "batch.json").write_text(json.dumps(batch))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    probe = Path(__file__).with_name("rewards_probe.py")
    launch = [str(Path(sys.executable).parent / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2"]
    done = subprocess.run([*launch, str(probe), str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**env, "ACCELERATE_USE_CPU": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [g["world"] for g in got] == [2, 2] and all("error" not in g for g in got), got
    # rank 0: t1 gold vs t2's (gold, other, gold) → 2/3, 2/3; t1 other → 1/3; w0 option 0 vs w1's (0, 0) → 1
    assert got[0]["rewards"] == pytest.approx([2 / 3, 2 / 3, 1 / 3, 1.0])
    # rank 1: t2 gold vs t1's (gold, gold, other) → 2/3; other → 1/3; gold → 2/3; w0 option 1 → 0;
    # w1 option 0 vs w0's generations on both ranks (0, 1) → 1/2 each
    assert got[1]["rewards"] == pytest.approx([2 / 3, 1 / 3, 2 / 3, 0.0, 0.5, 0.5])
