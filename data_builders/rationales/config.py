"""``judgetrain build rationales``' typed config: every field a flag (``--field-name``) and a
``--config`` key, with the cross-field checks that report every problem at once. A leaf:
the command, the teachers and the items read it. Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal, get_args

from judgetrain.config import arg, comma_list

from ..core.args import OutputArgs
from ..core.common import BuildError

__all__ = ["BUILDER", "DEFAULT_GEMINI_MODEL", "TARGETS", "TEACHERS", "VERSION", "RationaleConfig"]

BUILDER = "rationales"
VERSION = "1.0.0"
Teacher = Literal["gemini", "local", "replay"]
Target = Literal["teacher", "gold"]
TEACHERS: tuple[str, ...] = get_args(Teacher)
TARGETS: tuple[str, ...] = get_args(Target)
DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"


@dataclass(kw_only=True)
class RationaleConfig(OutputArgs):
    """``judgetrain build rationales``: every field is a flag (``--field-name``) and a ``--config`` key."""

    strict: bool = arg(
        False,
        "fail the build when any record gets no usable teacher answer or a --replay line is bad "
        "(default: leave the record out of both datasets and list it under failures, and the "
        "bad line under skipped, in build.json)",
    )
    data: Path = arg(help="a built PRISM or MIRAGE dataset folder")
    teacher: Teacher = arg(help="gemini (google-genai SDK), local (a VLM here) or replay (a JSON Lines file)")
    model: str | None = arg(
        None, f"gemini: model name (unset: {DEFAULT_GEMINI_MODEL}); local: model folder, hub id or adapter folder"
    )
    replay: Path | None = arg(None, "replay: JSON Lines with id, rationale, answer (teacher, model optional)", metavar="FILE")
    target: Target = arg(
        "teacher",
        "the answer the SFT records teach: the teacher's (it becomes the label) or "
        "the gold label (records where the teacher disagrees are left out)",
    )
    splits: list[str] = arg([], "splits to distil, space- or comma-separated (unset: all)")
    limit: int | None = arg(None, "only the first N records of each split", metavar="N")
    cache: Path | None = arg(None, "teacher answer cache (unset: OUT/cache)", metavar="DIR")
    rpm: float = arg(60.0, "gemini: requests per minute, retries included, spread evenly")
    workers: int = arg(4, "gemini: concurrent requests")
    timeout: float = arg(120.0, "gemini: seconds per request attempt", metavar="S")
    attempts: int = arg(6, "gemini: attempts per request, the first included")
    retry_delay: float = arg(2.0, "gemini: first backoff delay and jitter in seconds; doubles per retry up to 60 s", metavar="S")
    base_url: str | None = arg(None, "gemini: API endpoint, e.g. a proxy (unset: the SDK's, or GOOGLE_GEMINI_BASE_URL)")
    batch_size: str = arg("auto", "local: generation batch size, or 'auto'")
    max_new_tokens: int = arg(1024, "local: generation budget per record")

    def __post_init__(self) -> None:
        self.out = Path(self.out) if self.out is not None else None
        self.data = Path(self.data) if self.data is not None else None
        for name in ("replay", "cache"):
            if getattr(self, name) is not None:
                setattr(self, name, Path(getattr(self, name)))
        self.splits = comma_list(self.splits)
        if isinstance(self.batch_size, str) and self.batch_size.strip().isdigit():
            # the field says str for HfArgumentParser, which would parse `int | str` as int and refuse "auto"
            self.batch_size = int(self.batch_size)  # type: ignore[assignment]

    def check(self) -> None:
        """Every cross-field problem at once, each naming the option and the fix."""
        problems = []
        if self.teacher not in TEACHERS:
            problems.append(f"--teacher {self.teacher!r}: choose one of {list(TEACHERS)}")
        if self.target not in TARGETS:
            problems.append(f"--target {self.target!r}: choose one of {list(TARGETS)}")
        if self.teacher == "replay" and self.replay is None:
            problems.append("--teacher replay needs --replay FILE (JSON Lines with id, rationale, answer)")
        if self.teacher != "replay" and self.replay is not None:
            problems.append(f"--replay is read only by --teacher replay, not --teacher {self.teacher}")
        if self.teacher == "local" and not self.model:
            problems.append("--teacher local needs --model (a model folder, hub id or adapter folder)")
        if self.teacher == "replay" and self.model:
            problems.append("--model is not used by --teacher replay (the replay file names its teacher and model)")
        for name, value, lo in (("--rpm", self.rpm, 0), ("--timeout", self.timeout, 0)):
            if not value > lo:
                problems.append(f"{name} {value}: must be greater than {lo}")
        for name, value in (
            ("--workers", self.workers),
            ("--attempts", self.attempts),
            ("--max-new-tokens", self.max_new_tokens),
            ("--limit", 1 if self.limit is None else self.limit),
        ):
            if value < 1:
                problems.append(f"{name} {value}: must be at least 1")
        if self.retry_delay < 0:
            problems.append(f"--retry-delay {self.retry_delay}: must be 0 or more")
        if self.batch_size != "auto" and not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            problems.append(f"--batch-size {self.batch_size!r}: give a positive integer or 'auto'")
        out, data = Path(self.out).resolve(), Path(self.data).resolve()
        if out == data or out.is_relative_to(data) or data.is_relative_to(out):
            problems.append(f"--out {self.out}: must be outside the --data folder {self.data} (and not contain it)")
        if problems:
            raise BuildError("invalid rationales build options:\n" + "\n".join(f"  - {p}" for p in problems))

    def args_json(self) -> dict:
        """The options as build.json records them (the base URL stays out: it may hold a proxy's credentials)."""
        d = asdict(self)
        d.pop("base_url")
        return json.loads(json.dumps(d, default=str))
