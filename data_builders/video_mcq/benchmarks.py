"""The four benchmarks ``judgetrain build video-mcq --from egoschema|mvbench|videomme|nextqa``
converts: one reader per benchmark's published annotation files (EgoSchema, MVBench, Video-MME,
NExT-QA; their field names are in the docstrings of ``_egoschema``, ``_mvbench``, ``_videomme`` and
``_nextqa``), each turning them into located :class:`~.annotations.Item` objects, the unusable
ones carrying their problem. Docs: "concepts/phasefusion.md"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from judgetrain.jsonl import json_kind

from ..core.common import BuildError
from .annotations import AnnotationRow, Item, annotation_rows, csv_rows, read_json, whole_number

__all__ = [
    "CONVERTERS",
    "MVBENCH_TASKS",
    "NEXTQA_COLUMNS",
    "NEXTQA_MAP",
    "Benchmark",
    "annotation_files",
    "benchmark_items",
]

Benchmark = Literal["egoschema", "mvbench", "videomme", "nextqa"]
CONVERTERS: dict[Benchmark, str] = {"egoschema": "EgoSchema", "mvbench": "MVBench", "videomme": "Video-MME", "nextqa": "NExT-QA"}

# MVBench's data_list: task file -> video sub-folder of MVBench's video/ folder, and whether the items are frame folders.
MVBENCH_TASKS: dict[str, tuple[str, bool]] = {
    "action_sequence": ("star/Charades_v1_480", False),
    "action_prediction": ("star/Charades_v1_480", False),
    "action_antonym": ("ssv2_video", False),
    "fine_grained_action": ("Moments_in_Time_Raw/videos", False),
    "unexpected_action": ("FunQA_test/test", False),
    "object_existence": ("clevrer/video_validation", False),
    "object_interaction": ("star/Charades_v1_480", False),
    "object_shuffle": ("perception/videos", False),
    "moving_direction": ("clevrer/video_validation", False),
    "action_localization": ("sta/sta_video", False),
    "scene_transition": ("scene_qa/video", False),
    "action_count": ("perception/videos", False),
    "moving_count": ("clevrer/video_validation", False),
    "moving_attribute": ("clevrer/video_validation", False),
    "state_change": ("perception/videos", False),
    "fine_grained_pose": ("nturgbd", False),
    "character_order": ("perception/videos", False),
    "egocentric_navigation": ("vlnqa", False),
    "episodic_reasoning": ("tvqa/frames_fps3_hq", True),
    "counterfactual_inference": ("clevrer/video_validation", False),
}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# NExT-QA's multiple-choice CSVs (doc-doc/NExT-QA dataset/nextqa/{train,val,test}.csv) and the map beside them
NEXTQA_COLUMNS = ("video", "frame_count", "width", "height", "question", "answer", "qid", "type", "a0", "a1", "a2", "a3", "a4")
NEXTQA_MAP = "map_vid_vidorID.json"
_NEXTQA_USED = ("video", "question", "answer", "qid", "type", "a0", "a1", "a2", "a3", "a4")
_NEXTQA_FORMAT = "a NExT-QA multiple-choice CSV (dataset/nextqa/train.csv, val.csv or test.csv)"


def _egoschema(annotations: Path, videos: Path, answers: Path | None) -> list[Item]:
    """EgoSchema (github.com/egoschema/EgoSchema): ``questions.json``, a list of ``{"q_uid",
    "google_drive_id", "question", "option 0", …, "option 4"}``, and ``subset_answers.json``
    (``answers``; default: beside the questions), a mapping ``q_uid → correct option index`` for
    the public 500-question subset. Video: ``videos/<q_uid>.mp4``. Questions without a public
    answer are marked so (skipped and counted). ``id`` = ``q_uid``."""
    rows = annotation_rows(annotations, "EgoSchema's questions.json")
    answers = answers or annotations.with_name("subset_answers.json")
    key = read_json(answers)
    if not isinstance(key, dict):
        raise BuildError(f"{answers}: expected EgoSchema's subset_answers.json (an object q_uid -> option index)")
    fields = ["q_uid", "question"] + [f"option {i}" for i in range(5)]
    items = []
    for r in rows:
        bad = r.check(fields, "EgoSchema questions.json", "q_uid")
        if bad is not None:
            items.append(bad)
            continue
        row = r.row
        uid = str(row["q_uid"])
        item = Item(
            r.path,
            r.line,
            uid,
            videos / f"{uid}.mp4",
            row["question"],
            [row[f"option {j}"] for j in range(5)],
            key.get(uid),
            {k: row[k] for k in ("google_drive_id",) if k in row},
        )
        if uid not in key:
            item.problem = ("no public answer", f"no answer in {answers.name} (only the public subset has answers)")
        items.append(item)
    return items


def _mvbench_files(annotations: Path) -> list[Path]:
    if not annotations.is_dir():
        return [annotations]
    return sorted(p for p in annotations.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())


def _mvbench(annotations: Path, videos: Path) -> list[Item]:
    """MVBench (OpenGVLab/MVBench): one JSON list per task (``json/<task>.json``; ``annotations``
    a file or the folder), items ``{"video", "question", "candidates": [...], "answer": <text of
    the correct candidate>}``, plus ``"start"``/``"end"`` (seconds) for the bounded tasks, kept in
    ``extra``. ``videos`` is MVBench's ``video/`` folder; each task's videos lie in the sub-folder
    of :data:`MVBENCH_TASKS` (the benchmark's own ``data_list``); a task not listed there reads
    ``videos/<video>``. ``episodic_reasoning`` is stored as frame folders, not videos, and is
    marked so. ``id`` = ``<task>-<index in the file>``; ``answer`` = the candidate's index."""
    files = _mvbench_files(annotations)
    if not files:
        raise BuildError(f"{annotations}: no MVBench task files (*.json, *.jsonl) in this folder")
    items = []
    for path in files:
        task = path.stem
        folder, frames = MVBENCH_TASKS.get(task, ("", False))
        for r in annotation_rows(path, "an MVBench task file"):
            bad = r.check(["video", "question", "candidates", "answer"], "an MVBench task file", None)
            if bad is not None:
                items.append(replace(bad, id=f"{task}-{r.index:04d}"))
                continue
            row = r.row
            extra = {"task": task} | {k: row[k] for k in ("start", "end") if k in row}
            cands, gold = row["candidates"], row["answer"]
            answer = cands.index(gold) if isinstance(cands, list) and cands.count(gold) == 1 else None
            item = Item(
                r.path,
                r.line,
                f"{task}-{r.index:04d}",
                videos / folder / str(row["video"]),
                row["question"],
                cands,
                answer,
                extra,
            )
            if frames:
                item.problem = (
                    "frame folders",
                    f"task {task} is stored as frame folders, not videos; PhaseFusion needs video files",
                )
            elif answer is None:
                item.problem = ("bad annotation", f"answer {gold!r} is not exactly one of the candidates {cands!r}")
            items.append(item)
    return items


def _videomme_rows(path: Path) -> list[AnnotationRow]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [AnnotationRow(f"{path}[{i}]", None, i, row) for i, row in enumerate(pq.read_table(path).to_pylist())]
    return annotation_rows(path, "Video-MME rows (a parquet file, a JSON list, or JSON Lines)")


def _videomme_options(raw: Any) -> tuple[list[str], str | None]:
    """Options without their ``"A. "`` prefixes, and what is wrong with them (or None)."""
    options, problem = [], None
    for j, option in enumerate(raw if isinstance(raw, list) else []):
        letter, sep, body = str(option).partition(". ")
        if j >= len(_LETTERS) or letter != _LETTERS[j] or not sep:
            problem = f"option {j} {option!r} does not start with '{_LETTERS[j % len(_LETTERS)]}. '"
        options.append(body.strip() if sep else str(option))
    if not options:
        problem = f"options must be a list like ['A. …', 'B. …'], got {raw!r}"
    return options, problem


def _videomme(annotations: Path, videos: Path) -> list[Item]:
    """Video-MME (lmms-lab/Video-MME): ``videomme/test-00000-of-00001.parquet`` (or the same rows
    as JSON / JSON Lines) with ``video_id``, ``duration`` (the category ``short``/``medium``/
    ``long``, not seconds: kept as ``extra.duration_category``), ``domain``, ``sub_category``,
    ``url``, ``videoID`` (the YouTube id; video ``videos/<videoID>.mp4``), ``question_id``,
    ``task_type``, ``question``, ``options`` (``["A. …", "B. …", "C. …", "D. …"]``, letter
    prefixes removed) and ``answer`` (a letter). ``id`` = ``question_id``."""
    items = []
    for r in _videomme_rows(annotations):
        bad = r.check(["videoID", "question_id", "question", "options", "answer"], "Video-MME (test parquet)", "question_id")
        if bad is not None:
            items.append(bad)
            continue
        row = r.row
        options, problem = _videomme_options(row["options"])
        letter = row["answer"]
        answer = (
            _LETTERS.index(letter)
            if isinstance(letter, str) and len(letter) == 1 and letter in _LETTERS[: len(options)]
            else None
        )
        if answer is None and problem is None:
            problem = f"answer {letter!r} is not one of the option letters {_LETTERS[: len(options)]}"
        extra = {
            "video_id": row.get("video_id"),
            "duration_category": row.get("duration"),
            "domain": row.get("domain"),
            "sub_category": row.get("sub_category"),
            "task_type": row.get("task_type"),
        }
        item = Item(
            r.path,
            r.line,
            str(row["question_id"]),
            videos / f"{row['videoID']}.mp4",
            row["question"],
            options,
            answer,
            {k: v for k, v in extra.items() if v is not None},
        )
        item.problem = None if problem is None else ("bad annotation", problem)
        items.append(item)
    return items


def _distinct_options(raw: list[str], answer: int | None) -> tuple[list[str], int | None, list[int]]:
    """NExT-QA repeats an option's text in a few questions (3 of val.csv's 4,996, 8 of test.csv's):
    the options with each text once (first occurrence kept), the answer's index among them, and
    the 0-based indices (into a0..a4) of the repeats dropped."""
    options, repeated = [], []
    for j, text in enumerate(raw):
        if text in options:
            repeated.append(j)
        else:
            options.append(text)
    gold = options.index(raw[answer]) if answer is not None and answer < len(raw) else answer
    return options, gold, repeated


def _nextqa(annotations: Path, videos: Path, video_map: Path | None) -> list[Item]:
    """NExT-QA multiple choice (github.com/doc-doc/NExT-QA): one split's CSV,
    ``dataset/nextqa/{train,val,test}.csv``, with the columns :data:`NEXTQA_COLUMNS`:
    ``answer`` is the 0-based index of the correct one of ``a0`` … ``a4``, ``qid`` the
    question's number within its video, ``type`` the question type (``CW``/``CH`` causal,
    ``TN``/``TC``/``TP`` temporal, ``DL``/``DC``/``DO`` descriptive; kept as ``extra.qtype``, the
    video id as ``extra.video_id``).
    ``video_map`` (default: :data:`NEXTQA_MAP` beside the CSV) maps the numeric ``video`` to its
    NExTVideo path (``"1104/4882821564"``); video ``videos/<path>.mp4``. ``id`` =
    ``<video>_<qid>``, NExT-QA's own question key (its eval_mc.py), so predictions join with the
    benchmark's result files. ``frame_count``, ``width`` and ``height`` are not copied: ``probe``
    measures the file itself. Texts are kept as written (lower case, no question mark). An option
    whose text repeats an earlier one's is dropped and its index listed in ``extra.repeated_options``
    (the answer then points at the text's first occurrence), so that the paper's 4,996 val
    questions all convert and the manifest's options stay distinct."""
    video_map = video_map or annotations.with_name(NEXTQA_MAP)
    paths = read_json(video_map)
    if not isinstance(paths, dict):
        raise BuildError(
            f"{video_map}: expected NExT-QA's {NEXTQA_MAP} (an object video id -> NExTVideo path, "
            f'e.g. {{"4882821564": "1104/4882821564"}}), got {json_kind(paths)}'
        )
    items = []
    for r in csv_rows(annotations, _NEXTQA_USED, NEXTQA_COLUMNS, _NEXTQA_FORMAT):
        row = r.row
        vid, qid = row.get("video", "").strip(), row.get("qid", "").strip()
        key = f"{vid}_{qid}" if vid and qid else None
        bad = r.check(_NEXTQA_USED, _NEXTQA_FORMAT, None)
        if bad is not None:
            items.append(replace(bad, id=key))
            continue
        answer, number, rel = whole_number(row["answer"]), whole_number(qid), paths.get(vid)
        options, gold, repeated = _distinct_options([row[f"a{j}"] for j in range(5)], answer)
        extra = {"video_id": vid, "qtype": row["type"].strip()}  # qid is in the id (and manifest_row's first parameter)
        if repeated:
            extra["repeated_options"] = repeated
        found = isinstance(rel, str) and rel.strip() != ""
        item = Item(r.path, r.line, key, videos / f"{rel}.mp4" if found else None, row["question"], options, gold, extra)
        problems = []
        if answer is None or answer > 4:
            problems.append(
                (
                    "bad annotation",
                    f"answer {row['answer']!r} is not an option index 0..4 (NExT-QA's answer "
                    "is the 0-based index of the correct one of a0..a4)",
                )
            )
        if number is None:
            problems.append(
                (
                    "bad annotation",
                    f"qid {qid!r} is not a whole number (NExT-QA's qid numbers the questions of one video: 0, 1, 2, …)",
                )
            )
        if not found:
            how = "is not in" if rel is None else f"maps to {rel!r}, not a NExTVideo path '<group>/{vid}', in"
            problems.append(
                (
                    "not in the video map",
                    f"video {vid!r} {how} {video_map}; pass the {NEXTQA_MAP} of the same NExT-QA release (--video-map FILE)",
                )
            )
        if problems:
            item.problem = (problems[0][0], "; ".join(reason for _, reason in problems))
        items.append(item)
    return items


def benchmark_items(
    source: Benchmark, annotations: Path, videos: Path, answers: Path | None, video_map: Path | None
) -> list[Item]:
    """Every question of ``source``'s annotation file(s) (``annotations``: a file, or MVBench's
    folder of task files), each with its absolute video path under ``videos`` and its problem if
    it has one. ``answers`` is EgoSchema's answer file, ``video_map`` NExT-QA's map (None: the one
    beside ``annotations``); the other benchmarks ignore them."""
    if source == "egoschema":
        return _egoschema(annotations, videos, answers)
    if source == "nextqa":
        return _nextqa(annotations, videos, video_map)
    return (_mvbench if source == "mvbench" else _videomme)(annotations, videos)


def annotation_files(source: Benchmark, annotations: Path, answers: Path | None, video_map: Path | None) -> list[Path]:
    """The files :func:`benchmark_items` reads for ``source`` (for build.json's ``sources``):
    ``annotations`` (MVBench's task files when it is a folder), plus EgoSchema's answers or
    NExT-QA's video map (the ones beside ``annotations`` when None)."""
    files = _mvbench_files(annotations)
    if source == "egoschema":
        files.append(answers or annotations.with_name("subset_answers.json"))
    if source == "nextqa":
        files.append(video_map or annotations.with_name(NEXTQA_MAP))
    return files
