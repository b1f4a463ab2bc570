"""``judgetrain build video-mcq --from egoschema|mvbench|videomme|nextqa``: read a benchmark's
published annotation files (EgoSchema, MVBench, Video-MME, NExT-QA; their field names are in the
docstrings of ``_egoschema``, ``_mvbench``, ``_videomme`` and ``_nextqa``) into one manifest beside its
videos, with every unusable question located and counted in build.json. README: "`judgetrain build video-mcq`"."""

from __future__ import annotations

import csv
import io
import json
import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from judgetrain.config import arg, jsonable
from judgetrain.jsonl import json_kind, parse_json, read_jsonl
from judgetrain.mcq.manifest import check_line

from ..core.args import BuildArgs
from ..core.common import BuildError, Skip
from .common import BUILD_INFO, BUILDER, VERSION, manifest_row, post_init_base, raise_problems, write_manifest

__all__ = [
    "CONVERTERS",
    "MVBENCH_TASKS",
    "NEXTQA_COLUMNS",
    "NEXTQA_MAP",
    "Benchmark",
    "ConvertConfig",
    "build_converted",
    "convert",
]

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


@dataclass
class _Item:
    """One converted question before its video is checked: where it came from, and its manifest fields."""

    path: str  # the annotation file (JSON Lines), or "file[index]" (an item of a JSON list, a parquet row)
    line: int | None  # the line of a JSON Lines file
    id: str | None  # None when the item is too broken to name
    video: Path | None = None  # absolute
    question: Any = None
    options: Any = None
    answer: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: tuple[str, str] | None = None  # (kind, what is wrong) when the annotation itself is unusable

    @property
    def where(self) -> str:
        """``file:line`` or ``file[index]``, for messages."""
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass(frozen=True)
class _Row:
    """One item of an annotation file, as read: the object, or what is wrong with its line."""

    path: str
    line: int | None
    index: int  # 0-based position among the file's items
    row: Any
    problem: str | None = None

    def check(self, keys: Sequence[str], fmt: str, id_key: str | None) -> _Item | None:
        """None when the row is an object with ``keys``; else the item that reports why not."""
        problem = self.problem
        if problem is None and not isinstance(self.row, dict):
            problem = f"not an object ({json_kind(self.row)}); each item is an object with {', '.join(keys)} ({fmt})"
        missing = [k for k in keys if k not in self.row] if problem is None else []
        if missing:
            problem = f"field(s) {', '.join(repr(m) for m in missing)} missing; is this {fmt}? (the item has {sorted(self.row)})"
        if problem is None:
            return None
        rid = self.row.get(id_key) if id_key and isinstance(self.row, dict) else None
        kind = "bad line" if self.problem else "bad annotation"
        return _Item(self.path, self.line, None if rid is None else str(rid), problem=(kind, problem))


def _read_json(path: Path) -> Any:
    """A plain JSON file, parsed whole; an error names the file (and the line, for bad JSON)."""
    if not path.is_file():
        raise BuildError(f"{path}: no such annotation file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BuildError(f"{path}: not valid UTF-8 at byte {e.start}; save the file as UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BuildError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except (ValueError, RecursionError):  # a 4,301-digit number, arrays nested 100,000 deep: said as parse_json says them
        raise BuildError(f"{path}: {parse_json(text)[0]}") from None


def _annotation_rows(path: Path, what: str) -> list[_Row]:
    """The items of an annotation file: JSON Lines (``.jsonl``) through
    :func:`judgetrain.jsonl.read_jsonl`, so that a line that is not UTF-8, not JSON or not
    an object is one located bad item and the others are read; any other file is one JSON
    list (``what`` names it in the error when it is not a list)."""
    if path.suffix == ".jsonl":
        if not path.is_file():
            raise BuildError(f"{path}: no such annotation file")
        return [_Row(str(path), it.line, i, it.row, it.problem) for i, it in enumerate(read_jsonl(path))]
    rows = _read_json(path)
    if not isinstance(rows, list):
        raise BuildError(f"{path}: expected {what} (a JSON list of questions, or JSON Lines with one per line)")
    return [_Row(f"{path}[{i}]", None, i, row) for i, row in enumerate(rows)]


def _egoschema(annotations: Path, videos: Path, answers: Path | None) -> list[_Item]:
    """EgoSchema (github.com/egoschema/EgoSchema): ``questions.json``, a list of ``{"q_uid",
    "google_drive_id", "question", "option 0", …, "option 4"}``, and ``subset_answers.json``
    (``answers``; default: beside the questions), a mapping ``q_uid → correct option index`` for
    the public 500-question subset. Video: ``videos/<q_uid>.mp4``. Questions without a public
    answer are marked so (skipped and counted). ``id`` = ``q_uid``."""
    rows = _annotation_rows(annotations, "EgoSchema's questions.json")
    answers = answers or annotations.with_name("subset_answers.json")
    key = _read_json(answers)
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
        item = _Item(
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


def _mvbench(annotations: Path, videos: Path) -> list[_Item]:
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
        for r in _annotation_rows(path, "an MVBench task file"):
            bad = r.check(["video", "question", "candidates", "answer"], "an MVBench task file", None)
            if bad is not None:
                items.append(replace(bad, id=f"{task}-{r.index:04d}"))
                continue
            row = r.row
            extra = {"task": task} | {k: row[k] for k in ("start", "end") if k in row}
            cands, gold = row["candidates"], row["answer"]
            answer = cands.index(gold) if isinstance(cands, list) and cands.count(gold) == 1 else None
            item = _Item(
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


def _videomme_rows(path: Path) -> list[_Row]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return [_Row(f"{path}[{i}]", None, i, row) for i, row in enumerate(pq.read_table(path).to_pylist())]
    return _annotation_rows(path, "Video-MME rows (a parquet file, a JSON list, or JSON Lines)")


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


def _videomme(annotations: Path, videos: Path) -> list[_Item]:
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
        item = _Item(
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


def _csv_rows(path: Path, columns: Sequence[str], header_of: Sequence[str], fmt: str) -> list[_Row]:
    """The records of a CSV file with a header line, as :class:`_Row` objects keyed by the
    header's names; ``line`` is the record's first line (a quoted field may span lines). A
    file whose header lacks one of ``columns`` (``header_of`` is ``fmt``'s whole header, for
    the message), or that the csv module cannot parse, raises BuildError naming the file and
    line; a record with the wrong number of fields or with bytes that are not UTF-8 is one
    located bad item, and the others are read."""
    if not path.is_file():
        raise BuildError(f"{path}: no such annotation file")
    # surrogateescape keeps a stray byte in its record, so that one bad line does not sink the file
    text = path.read_bytes().decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [name.strip() for name in next(reader, [])]
        missing = [c for c in columns if c not in header]
        if missing:
            shown = ",".join(header).encode("utf-8", "surrogateescape").decode("utf-8", "replace") or "empty"
            raise BuildError(
                f"{path}:1: column(s) {', '.join(missing)} missing from the header line; is this {fmt}? "
                f"(its header is {shown}; expected {','.join(header_of)})"
            )
        rows: list[_Row] = []
        start = reader.line_num + 1
        for record in reader:
            line, start = start, reader.line_num + 1
            if not record:  # a blank line
                continue
            # a record with more or fewer fields than the header is reported as the problem below
            row = dict(zip(header, record, strict=False))
            problem = None
            if len(record) != len(header):
                problem = f'{len(record)} fields, but the header has {len(header)}; quote a field that holds a comma ("a, b")'
            bad = next((k for k, v in zip(header, record, strict=False) if any("\udc80" <= ch <= "\udcff" for ch in v)), None)
            if bad is not None:
                problem = f"not valid UTF-8 (in column {bad!r}); save the file as UTF-8"
                row = {k: v.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for k, v in row.items()}
            rows.append(_Row(str(path), line, len(rows), row, problem))
    except csv.Error as e:
        raise BuildError(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None
    return rows


def _whole_number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


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


def _nextqa(annotations: Path, videos: Path, video_map: Path | None) -> list[_Item]:
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
    paths = _read_json(video_map)
    if not isinstance(paths, dict):
        raise BuildError(
            f"{video_map}: expected NExT-QA's {NEXTQA_MAP} (an object video id -> NExTVideo path, "
            f'e.g. {{"4882821564": "1104/4882821564"}}), got {json_kind(paths)}'
        )
    items = []
    for r in _csv_rows(annotations, _NEXTQA_USED, NEXTQA_COLUMNS, _NEXTQA_FORMAT):
        row = r.row
        vid, qid = row.get("video", "").strip(), row.get("qid", "").strip()
        key = f"{vid}_{qid}" if vid and qid else None
        bad = r.check(_NEXTQA_USED, _NEXTQA_FORMAT, None)
        if bad is not None:
            items.append(replace(bad, id=key))
            continue
        answer, number, rel = _whole_number(row["answer"]), _whole_number(qid), paths.get(vid)
        options, gold, repeated = _distinct_options([row[f"a{j}"] for j in range(5)], answer)
        extra = {"video_id": vid, "qtype": row["type"].strip()}  # qid is in the id (and manifest_row's first parameter)
        if repeated:
            extra["repeated_options"] = repeated
        found = isinstance(rel, str) and rel.strip() != ""
        item = _Item(r.path, r.line, key, videos / f"{rel}.mp4" if found else None, row["question"], options, gold, extra)
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


Benchmark = Literal["egoschema", "mvbench", "videomme", "nextqa"]
CONVERTERS: dict[Benchmark, str] = {"egoschema": "EgoSchema", "mvbench": "MVBench", "videomme": "Video-MME", "nextqa": "NExT-QA"}


@dataclass(kw_only=True)
class ConvertConfig(BuildArgs):
    """``judgetrain build video-mcq --from BENCHMARK``: a benchmark conversion's settings, each a flag
    (``--field-name``) and a ``--config`` key of the command (:class:`VideoMcqConfig`)."""

    source: Benchmark | None = arg(None, "convert a benchmark's published annotations (YAML key: source)", aliases=["--from"])
    annotations: Path | None = arg(
        None,
        "EgoSchema questions.json, an MVBench task JSON (or its json/ folder), "
        "Video-MME parquet/JSON, a NExT-QA split CSV (benchmark conversion)",
        metavar="FILE",
    )
    answers: Path | None = arg(None, "EgoSchema subset_answers.json; unset: the one beside --annotations", metavar="FILE")
    video_map: Path | None = arg(
        None, f"NExT-QA {NEXTQA_MAP} (video id -> NExTVideo path); unset: the one beside --annotations", metavar="FILE"
    )
    videos: Path | None = arg(None, "the benchmark's video folder, inside --out (benchmark conversion)", metavar="DIR")
    sample: int | None = arg(
        None, "keep random.Random(seed).sample(usable, N) (paper 001 App. A: 500, seed 42; benchmark conversion)", metavar="N"
    )
    probe: bool = arg(False, "read every video's frame count and fps into num_frames / duration (benchmark conversion)")

    def __post_init__(self) -> None:
        post_init_base(self, ConvertConfig)
        self.out = Path(self.out) if self.out is not None else None
        for name in ("annotations", "answers", "video_map", "videos"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))

    def convert_problems(self) -> list[str]:
        problems = []
        if self.source not in CONVERTERS:
            problems.append(
                f"--from {self.source!r}: choose one of {', '.join(CONVERTERS)}"
                if self.source is not None
                else f"--from: give the benchmark to convert, one of {', '.join(CONVERTERS)}"
            )
        if self.annotations is None or self.videos is None:
            problems.append(f"--from {self.source or 'BENCHMARK'} needs --annotations FILE and --videos DIR")
        if self.annotations is not None and not self.annotations.exists():
            problems.append(f"--annotations {self.annotations}: no such file or folder")
        if self.videos is not None and not self.videos.is_dir():
            problems.append(f"--videos {self.videos}: no such folder")
        elif self.videos is not None and not self.videos.resolve().is_relative_to(Path(self.out).resolve()):
            problems.append(
                f"--videos {self.videos} is not inside --out {self.out}: manifest paths stay inside the manifest's "
                f"folder; write the manifest above the videos, e.g. --out {self.videos.parent}"
            )
        if self.answers is not None and self.source != "egoschema":
            problems.append("--answers is for EgoSchema only (its answers come in a separate file)")
        if self.video_map is not None and self.source != "nextqa":
            problems.append(f"--video-map is for NExT-QA only (its {NEXTQA_MAP})")
        problems += self._nextqa_problems()
        if self.sample is not None and self.sample < 1:
            problems.append(f"--sample {self.sample}: keep at least one question")
        return problems

    def _nextqa_problems(self) -> list[str]:
        if self.source != "nextqa" or self.annotations is None or not self.annotations.exists():
            return []
        if self.annotations.is_dir():
            return [
                f"--annotations {self.annotations}: a folder; give one NExT-QA split, e.g. "
                f"--annotations {self.annotations / 'val.csv'}"
            ]
        video_map = self.video_map or self.annotations.with_name(NEXTQA_MAP)
        if not video_map.is_file():
            return [
                f"--video-map {video_map}: no such file; NExT-QA's {NEXTQA_MAP} lies beside train.csv, val.csv "
                "and test.csv in dataset/nextqa/ (or give its path with --video-map FILE)"
            ]
        return []

    def check(self) -> None:
        """Every problem at once, each naming the option and the fix."""
        raise_problems(self.convert_problems())


def convert(
    source: Benchmark, annotations: str | os.PathLike, videos: str | os.PathLike, out: str | os.PathLike, **options: Any
) -> dict[str, Any]:
    """Convert a benchmark's annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``):
    :func:`build_converted` of ``ConvertConfig(source=…, annotations=…, videos=…, out=…, **options)``
    (options: ``answers``, ``video_map``, ``sample``, ``seed``, ``probe``, ``strict``, ``progress``)."""
    return build_converted(
        ConvertConfig(source=source, annotations=Path(annotations), videos=Path(videos), out=Path(out), **options)
    )


def build_converted(cfg: ConvertConfig) -> dict[str, Any]:
    """Convert ``cfg.source``'s annotation file(s) into ``out/manifest.jsonl`` (+ ``out/build.json``).

    ``cfg.source`` is a key of :data:`CONVERTERS`; ``cfg.videos`` must lie inside ``cfg.out``.
    Questions with a missing (or, with ``probe``, unreadable) video or an
    inconsistent annotation are listed in build.json's ``skipped`` (file[item],
    id, reason) and counted; ``strict`` raises instead. Returns build.json's content.

    Every annotation file may be JSON Lines (``.jsonl``, one item per line); a plain JSON file is
    parsed whole, and an error in it (not UTF-8, not JSON) names the file. NExT-QA's CSV must
    have its columns (a missing one names the file, line 1 and the expected header). Also left out, located
    (``file[index]`` or ``file:line``) and counted: an item that lacks a field, a JSON Lines line
    that is not UTF-8, not JSON or not an object, a CSV record with the wrong number of fields,
    and a repeated id. ``probe`` reads every
    video's frame count and fps (PyAV) into ``num_frames`` and ``duration``; ``sample`` keeps
    ``random.Random(seed).sample(usable, sample)``, the subsets of paper 001 App. A (seed 42).
    """
    from tqdm.auto import tqdm

    from judgetrain.io import write_json

    cfg.check()
    source, annotations, out = cfg.source, cfg.annotations, cfg.out
    assert source is not None  # check() refused a missing --from
    out.mkdir(parents=True, exist_ok=True)
    items = _benchmark_items(cfg)

    skipped: list[Skip] = []
    kinds: Counter = Counter()
    rows: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for item in tqdm(items, desc=f"{source} videos", unit="question", disable=not cfg.progress):
        row, problem = _converted_row(item, source, out, cfg.probe, seen)
        if problem is not None:
            kind, reason = problem
            if cfg.strict:
                named = f" (id {item.id})" if item.id is not None else ""
                raise BuildError(f"{item.where}{named}: {reason} (--strict makes this an error)")
            skipped.append(Skip(item.path, item.line, reason, item.id))
            kinds[kind] += 1
            continue
        assert row is not None and item.id is not None  # a row, and its id, come with no problem
        seen[item.id] = item.where
        rows.append(row)
    usable = len(rows)
    if cfg.sample is not None:
        if not 1 <= cfg.sample <= len(rows):
            raise BuildError(f"--sample {cfg.sample}: {len(rows)} usable questions; choose 1..{len(rows)}")
        rows = random.Random(cfg.seed).sample(rows, cfg.sample)  # paper 001 App. A: random.Random(42).sample
    if not rows:
        raise BuildError(f"{annotations}: no usable question ({len(skipped)} skipped; first: {skipped[0] if skipped else '-'})")
    manifest = write_manifest(out, rows)
    info = {
        "builder": BUILDER,
        "version": VERSION,
        "source": source,
        "benchmark": CONVERTERS[source],
        "args": {f.name: jsonable(getattr(cfg, f.name)) for f in fields(ConvertConfig)},
        "seed": cfg.seed,
        "manifest": manifest.name,
        "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in _annotation_files(cfg)],
        "counts": {
            "annotated": len(items),
            "usable": usable,
            "questions": len(rows),
            "skipped": len(skipped),
            "skipped_by_reason": dict(kinds),
            "options": dict(Counter(str(len(r["options"])) for r in rows)),
            "answer_position": dict(Counter(str(r["answer"]) for r in rows)),
        },
        "skipped": [asdict(s) for s in skipped],
    }
    write_json(out / BUILD_INFO, info)
    return info


def _converted_row(
    item: _Item, source: str, out: Path, probe: bool, seen: Mapping[str, str]
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """The manifest row of one converted question, or (kind, reason) why it cannot be used."""
    from judgetrain.video import VideoDecodeError
    from judgetrain.video import probe as probe_video

    if item.problem is not None:
        return None, item.problem
    # only an item with a problem lacks its id (too broken to name) or its video (not in NExT-QA's map)
    assert item.id is not None and item.video is not None
    if item.id in seen:
        return None, ("duplicate id", f"id {item.id!r} is already used by {seen[item.id]}")
    if "\x00" in str(item.video):  # pathlib would call it missing
        return None, (
            "bad annotation",
            f"video: {str(item.video)!r} holds a NUL byte (\\x00), which no file path can; fix the annotation",
        )
    if item.video.is_dir():
        return None, ("missing video", f"video: {item.video} is a folder, not a video file; put the video there")
    if not item.video.is_file():
        return None, ("missing video", f"video not found: {item.video}")
    duration = num_frames = None
    if probe:
        try:
            info = probe_video(item.video)
        except (VideoDecodeError, OSError, ValueError, RecursionError, MemoryError) as e:  # one video's failure is its skip
            what = str(e) if isinstance(e, (VideoDecodeError, OSError)) else f"{item.video}: {type(e).__name__}: {e}"
            return None, ("unreadable video", f"unreadable video: {what}")
        duration, num_frames = info.duration_s, info.n_frames
    rel = Path(os.path.relpath(item.video.absolute(), out.absolute())).as_posix()
    row = manifest_row(item.id, rel, item.question, item.options, item.answer, source, duration, num_frames, **item.extra)
    _, bad = check_line(row, out)  # the loader's own checks, so that the manifest always loads
    return (None, ("bad annotation", "; ".join(bad))) if bad else (row, None)


def _benchmark_items(cfg: ConvertConfig) -> list[_Item]:
    """Every question of ``cfg.source``'s annotation file(s), each with its problem if it has one."""
    assert cfg.annotations is not None and cfg.videos is not None  # ConvertConfig.check() requires both
    if cfg.source == "egoschema":
        return _egoschema(cfg.annotations, cfg.videos, cfg.answers)
    if cfg.source == "nextqa":
        return _nextqa(cfg.annotations, cfg.videos, cfg.video_map)
    return (_mvbench if cfg.source == "mvbench" else _videomme)(cfg.annotations, cfg.videos)


def _annotation_files(cfg: ConvertConfig) -> list[Path]:
    assert cfg.annotations is not None  # ConvertConfig.check() requires it
    files = _mvbench_files(cfg.annotations)
    if cfg.source == "egoschema":
        files.append(cfg.answers or cfg.annotations.with_name("subset_answers.json"))
    if cfg.source == "nextqa":
        files.append(cfg.video_map or cfg.annotations.with_name(NEXTQA_MAP))
    return files
