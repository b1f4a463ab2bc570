"""Rationale-distilled SFT records: a teacher's step-level rationale and answer for each PRISM / MIRAGE record (paper 002 §5E, F.1, Table S6).

Paper 002 distils step-level chain-of-thought rationales from Gemini-2.5-Flash
and trains judges on them "alongside the scalar score" (§5E, F.1). This
builder takes a built PRISM or MIRAGE dataset (``--data``), asks a teacher
about every pairwise and pointwise record, and writes two SFT datasets that
``judgetrain.train`` consumes unchanged.

**What the teacher sees**: the record's own prompt (same images, same layout,
same steps), whose instruction ends, instead of the builder's "commit to your
answer before any explanation", with :data:`REASON_FIRST` (go through the steps
one by one, then decide) and a format sentence: for ``gemini`` the JSON fields
(:data:`JSON_FIELDS`; a response schema with ``rationale`` before ``answer``, in
that property order so the model writes its reasoning before its verdict, and
``answer`` restricted to the record's choices), for ``local`` a last line
``Answer: X`` (:data:`ANSWER_LINE`). The teacher is never shown the gold label.

**Teachers** (``--teacher``):

- ``gemini``: the ``google-genai`` SDK (``--model``, default
  ``gemini-2.5-flash``). The key is read from the environment only
  (``GOOGLE_API_KEY`` or ``GEMINI_API_KEY``, the SDK's precedence) and is never
  written anywhere. Retries are the SDK's own (``HttpRetryOptions``: tenacity,
  exponential backoff with jitter on 408/429/500/502/503/504 and on timeouts
  and connection errors; ``--attempts``, ``--retry-delay``), the per-request
  timeout is ``HttpOptions.timeout`` (``--timeout``). ``--rpm`` spaces every
  HTTP request the SDK sends (retries included: the limiter is an httpx request
  hook) evenly, one per 60/rpm seconds, over ``--workers`` threads. The base URL
  is the SDK's (``GOOGLE_GEMINI_BASE_URL`` in the environment, or
  ``--base-url``), so a proxy works as it does for any SDK user. A rejected key
  or an unknown model stops the build at once (every item would fail alike).
- ``local``: any registry VLM (``--model``: a folder, hub id or adapter folder),
  :meth:`judgetrain.scoring.Scorer.generate` greedy, ``--max-new-tokens``; the
  answer is read by :func:`judgetrain.scoring.parser_for_record` and must stand
  alone on the last line, the rationale is the text before that line.
- ``replay``: rationales exported earlier (``--replay FILE``), JSON Lines with
  ``id``, ``rationale``, ``answer`` (a string member of the record's choices)
  and optionally ``teacher`` and ``model``, read with
  :func:`judgetrain.jsonl.read_jsonl` (split on ``\\n`` only, each line decoded
  on its own). A bad line (not UTF-8, not JSON, not an object, an unknown or
  repeated id, an unusable answer) is listed under ``skipped`` in ``build.json``
  as ``file:line: reason`` (``--strict``: the build fails, listing them); a
  record without a usable line is a failure. Every build writes
  ``OUT/rationales.jsonl`` in this format, so a Gemini build replays into
  byte-identical records.

**Failures**: after the SDK's retries are exhausted, a malformed response body,
a response that breaks the schema (not JSON, a missing field, an answer outside
the choices, an empty rationale) or an unparseable local generation: the record
is left out of both SFT datasets and listed under ``failures`` in their
``build.json`` with its id and the reason. Nothing is filled in. Failures are
not cached, so rerunning the same command retries exactly them.

**Cache** (``--cache``, default ``OUT/cache``): one JSON file per finished
answer, written atomically (temp file, fsync, rename), named by the sha256 of
(teacher, model, prompt as sent, response schema or decoding settings, sha256
of every image). A rerun, or a rerun after a kill, reads finished answers from
it and calls the teacher only for the rest; two records with the same prompt
and images cost one call.

**Outputs** (``OUT/``), each a complete task-record dataset with the source's
splits (``records.save``, with ``build.json``; a split without one answered
record is left out), rows in source order, ids kept:

- ``with_rationale/``: completion = the rationale, a newline, ``Answer: X``;
  the prompt's instruction is the reasoning-first one (:data:`REASON_FIRST` +
  :data:`ANSWER_LINE`), so prompt and completion agree. (Paper 002's A.3 prompt
  commits to the answer before any rationale; a rationale-then-answer target
  needs the instruction to say so.)
- ``score_only/``: the source prompt unchanged, completion = ``X``.
- ``rationales.jsonl`` (the replay format), ``teacher_answers.png``.

``X`` follows ``--target``: ``teacher`` (default; paper 002 distils the
teacher's rationale *and* score) makes X the teacher's answer, which becomes
the record's ``label``; ``gold`` keeps the builder's label and leaves out (under
``skipped``, reason ``disagree``) the records whose teacher answer differs,
since a rationale arguing for one answer followed by another would teach the
judge to contradict itself. Either way ``meta`` gains ``teacher``
(``"gemini:gemini-2.5-flash"``), ``teacher_answer``, ``teacher_rationale``,
``gold_label``, ``target`` and ``sft_variant``.

**Statistics** (``build.json`` ``statistics``, printed): per task and layout the
records asked, the success rate and the rationale length in words and
characters, mean ± sample std (paper 002 Table S6 reports characters); the
teacher's answer distribution next to the gold one, its agreement with gold,
and for pointwise the share of scores in {1, 2} (the paper's 91 % "binary
collapse", Figure S2).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from judgetrain import records
from judgetrain.config import OutputArgs, arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.jsonl import optional_text, read_jsonl
from judgetrain.jsonl import text as text_field

from .common import BuildError, Skip, finish_summary
from .mirage import MIRAGE_INSTRUCTION
from .prism import PAIRWISE_INSTRUCTION, POINTWISE_INSTRUCTION, instruction_for

BUILDER = "rationales"
VERSION = "1.0.0"
TEACHERS = ("gemini", "local", "replay")
TARGETS = ("teacher", "gold")
VARIANTS = ("with_rationale", "score_only")
DEFAULT_GEMINI_MODEL = "gemini-2.5-flash"
EXPORT_FILE = "rationales.jsonl"
PLOT_FILE = "teacher_answers.png"
CACHE_FORMAT = 1
# The SDK's own default set of retryable statuses, stated so build.json shows it.
RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)
# A rejected key or an unknown model fails every item alike: stop instead of recording thousands of failures.
FATAL_STATUS_CODES = (401, 403, 404)

# The instruction each source builder ends its prompts with, per task.
BASE_INSTRUCTIONS = {
    "prism": {"pairwise": PAIRWISE_INSTRUCTION, "pointwise": POINTWISE_INSTRUCTION},
    "mirage": {"pairwise": MIRAGE_INSTRUCTION},
}
# Where the builders' "answer first" sentence starts; everything before it (role, rubric) is kept.
COMMIT = "Commit to your"
REASON_FIRST = {
    "pairwise": ("Reason before you answer: go through the steps one by one and, for each sequence, say whether its image "
                 "shows the step and whether the images follow the order of the steps; then decide."),
    "pointwise": ("Reason before you answer: go through the steps one by one and say whether the image shows the step and "
                  "whether the images follow the order of the steps; then give the score the scale assigns."),
}
ANSWER_LINE = {
    "pairwise": 'End with your verdict alone on the last line, written "Answer: A" or "Answer: B".',
    "pointwise": 'End with your score alone on the last line, written "Answer: N" with N a digit from 1 to 5.',
}
JSON_FIELDS = {
    "pairwise": 'Reply in JSON: your step-by-step reasoning in "rationale", then the letter of the better sequence, A or B, in "answer".',
    "pointwise": 'Reply in JSON: your step-by-step reasoning in "rationale", then your score, a digit from 1 to 5, in "answer".',
}
ANSWER_PREFIX = "Answer: "


# --------------------------------------------------------------------------- prompts and completions


def teacher_instruction(builder: str, task: str, layout: str, closing: str) -> str:
    """The builder's instruction for ``task`` under ``layout`` with its commit-first
    sentence replaced by :data:`REASON_FIRST` and ``closing`` (the output format)."""
    base = BASE_INSTRUCTIONS[builder][task]
    if COMMIT not in base:
        raise BuildError(f"the {builder} {task} instruction no longer contains {COMMIT!r}; update "
                         "judgetrain.data_builders.rationales.COMMIT to the sentence that asks for the answer first")
    return instruction_for(task, layout, base[: base.index(COMMIT)] + REASON_FIRST[task] + " " + closing)


def rewrite_prompt(prompt: Sequence[Mapping[str, Any]], *, builder: str, task: str, layout: str, closing: str,
                   rid: str) -> list[dict]:
    """``prompt`` (a record's messages) with its closing instruction replaced by
    :func:`teacher_instruction`; everything before it (images, steps, layout
    text) unchanged. BuildError when the prompt does not end with the builder's
    instruction (a dataset built by another version of the builder)."""
    old = instruction_for(task, layout, BASE_INSTRUCTIONS[builder][task])
    messages = [{"role": m["role"], "content": [dict(c) for c in m["content"]]} for m in prompt]
    last = messages[-1]["content"][-1]
    if last.get("type") != "text" or not last["text"].endswith(old):
        raise BuildError(f"record {rid!r}: its prompt does not end with the {builder} {task} instruction for layout {layout}; "
                         f"rebuild the dataset with the current `judgetrain build {builder}`")
    last["text"] = last["text"][: len(last["text"]) - len(old)] + teacher_instruction(builder, task, layout, closing)
    return messages


def with_rationale_completion(rationale: str, answer: str) -> str:
    """The with-rationale SFT target: the rationale, then ``Answer: X`` on its own last line."""
    return f"{rationale.strip()}\n{ANSWER_PREFIX}{answer}"


def split_answer(text: str, parser: Callable[[str], str | None]) -> tuple[str, str] | str:
    """``(rationale, answer)`` from a generation asked to end with ``Answer: X``, or
    the reason it cannot be used: no answer the parser reads, an answer that is
    not alone on the last line, or nothing before that line."""
    answer = parser(text)
    lines = text.strip().splitlines()
    if answer is None or not lines:
        return "no parseable answer in the generated text"
    if parser(lines[-1]) != answer:
        return f"the answer {answer!r} is not alone on the last line"
    rationale = "\n".join(lines[:-1]).strip()
    if not rationale:
        return "no rationale before the answer line"
    return rationale, answer


def prompt_text(prompt: Sequence[Mapping[str, Any]]) -> str:
    """A canonical rendering of a message list for the cache key: roles, texts and
    image placeholders in order (the images themselves are keyed by their hashes)."""
    return json.dumps([[m["role"], [c["text"] if c["type"] == "text" else "<image>" for c in m["content"]]] for m in prompt],
                      ensure_ascii=False)


def _sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


# --------------------------------------------------------------------------- items, answers, cache


@dataclass(frozen=True)
class Item:
    """One record to ask about. ``prompt`` is what the teacher is sent; ``key`` its cache key."""

    id: str
    split: str
    index: int
    task: str
    layout: str
    choices: tuple[str, ...]
    label: str
    n_frames: int
    prompt: tuple = field(repr=False)
    image_hashes: tuple[str, ...] = field(repr=False)
    key: str = ""

    def record(self, images: list) -> dict:
        """The scoring engine's view of the item (its parser comes from task, choices and n_frames)."""
        return {"id": self.id, "task": self.task, "choices": list(self.choices), "n_frames": self.n_frames,
                "prompt": [dict(m) for m in self.prompt], "images": images}


@dataclass(frozen=True)
class TeacherAnswer:
    """A teacher's usable answer: its rationale and its choice, as a member of the record's choices."""

    rationale: str
    answer: str
    teacher: str
    usage: dict = field(default_factory=dict)


class TeacherCache:
    """Finished teacher answers on disk, one JSON file per content key, written atomically."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @staticmethod
    def key(*, teacher: str, model: str, prompt: str, settings: Mapping[str, Any], image_hashes: Sequence[str]) -> str:
        """sha256 of everything that determines the answer: teacher, model, prompt as
        sent, the response schema / decoding settings, and the images' sha256."""
        return _sha256(json.dumps({"format": CACHE_FORMAT, "teacher": teacher, "model": model, "prompt": prompt,
                                   "settings": settings, "images": list(image_hashes)}, sort_keys=True))

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> TeacherAnswer | None:
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            entry = json.loads(path.read_text())
            return TeacherAnswer(entry["rationale"], entry["answer"], entry["teacher"], entry.get("usage") or {})
        except (ValueError, KeyError, TypeError) as e:
            raise BuildError(f"{path}: not a teacher cache entry ({e}); delete the file and rerun to ask again") from None

    def put(self, key: str, answer: TeacherAnswer, **extra: Any) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps({"key": key, **asdict(answer), **extra}, sort_keys=True, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


class RateLimiter:
    """Request starts spaced evenly, one per ``60 / rpm`` seconds, shared by all threads."""

    def __init__(self, rpm: float):
        self.interval = 60.0 / rpm
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


@dataclass
class TeacherRun:
    """What a teacher returned: per item id an answer or a failure reason, and counters."""

    answers: dict[str, TeacherAnswer] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    counters: Counter = field(default_factory=Counter)
    skipped: list[Skip] = field(default_factory=list)  # bad input lines (replay), each naming file:line


def _load_rows(data: Path, split: str):
    """The split in arrow format: rows as stored, images as ``{"bytes", "path"}``,
    nothing decoded, nothing written (a cast would put a cache file in the input folder)."""
    return records.load(data)[split].with_format("arrow")


def _row(ds: Any, index: int) -> dict:
    return ds[index].to_pylist()[0]


# --------------------------------------------------------------------------- teachers


class GeminiTeacher:
    """Gemini through the ``google-genai`` SDK: structured JSON answers, the SDK's retries, a client-side rate limit."""

    name = "gemini"
    closing = JSON_FIELDS

    def __init__(self, cfg: RationaleConfig, cache: TeacherCache):
        self.cfg = cfg
        self.model = cfg.model or DEFAULT_GEMINI_MODEL
        self.label = f"{self.name}:{self.model}"
        self.cache = cache
        self.limiter = RateLimiter(cfg.rpm)
        self._lock = threading.Lock()
        self._http_requests = 0

    @staticmethod
    def schema(choices: Sequence[str]) -> dict:
        """The response schema (OpenAPI subset, as the Gemini API takes it)."""
        return {"type": "OBJECT",
                "properties": {"rationale": {"type": "STRING", "description": "step-by-step reasoning, written before the answer"},
                               "answer": {"type": "STRING", "enum": list(choices)}},
                "required": ["rationale", "answer"], "propertyOrdering": ["rationale", "answer"]}

    def settings(self, item: Item) -> dict:
        return {"response_mime_type": "application/json", "response_schema": self.schema(item.choices)}

    def _on_request(self, request: Any) -> None:
        # An httpx request hook runs for every attempt the SDK makes, so retries are rate-limited and counted too.
        self.limiter.wait()
        with self._lock:
            self._http_requests += 1

    def _client(self):
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise BuildError("--teacher gemini needs the google-genai SDK: pip install 'judgetrain[gemini]'") from None
        key = next((os.environ[v] for v in ("GOOGLE_API_KEY", "GEMINI_API_KEY") if os.environ.get(v)), None)
        if not key:
            raise BuildError("--teacher gemini: no API key. Set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment; "
                             "it is read from there only and never written to any output")
        retry = types.HttpRetryOptions(attempts=self.cfg.attempts, initial_delay=self.cfg.retry_delay, max_delay=60.0,
                                       exp_base=2.0, jitter=self.cfg.retry_delay, http_status_codes=list(RETRY_STATUS_CODES))
        options = types.HttpOptions(base_url=self.cfg.base_url, timeout=math.ceil(self.cfg.timeout * 1000), retry_options=retry,
                                    client_args={"event_hooks": {"request": [self._on_request]}})
        return genai.Client(api_key=key, http_options=options), types

    def _contents(self, item: Item, images: list[bytes], types: Any) -> tuple[list, str | None]:
        from PIL import Image

        system, contents, k = None, [], 0
        for m in item.prompt:
            parts = []
            for c in m["content"]:
                if c["type"] == "text":
                    parts.append(types.Part.from_text(text=c["text"]))
                else:
                    with Image.open(io.BytesIO(images[k])) as im:
                        mime = Image.MIME[im.format]
                    parts.append(types.Part.from_bytes(data=images[k], mime_type=mime))
                    k += 1
            if m["role"] == "system":
                system = "\n\n".join(c["text"] for c in m["content"] if c["type"] == "text")
            else:
                contents.append(types.Content(role="user" if m["role"] == "user" else "model", parts=parts))
        return contents, system

    def _ask(self, client: Any, types: Any, item: Item, images: list[bytes]) -> TeacherAnswer | str:
        import httpx
        from google.genai import errors

        contents, system = self._contents(item, images, types)
        config = types.GenerateContentConfig(response_mime_type="application/json",
                                             response_schema=types.Schema.model_validate(self.schema(item.choices)),
                                             system_instruction=system)
        attempts = f"after {self.cfg.attempts} attempt(s)"
        try:
            response = client.models.generate_content(model=self.model, contents=contents, config=config)
        except errors.APIError as e:
            text = f"HTTP {e.code} {e.status or ''}: {(e.message or '').strip()[:200]}"
            if e.code in FATAL_STATUS_CODES or "API_KEY_INVALID" in str(e.details):
                raise BuildError(f"Gemini refused the request ({text}); check GEMINI_API_KEY and --model {self.model}") from None
            return f"{text} ({attempts})" if e.code in RETRY_STATUS_CODES else text
        except httpx.TimeoutException:
            return f"timed out ({self.cfg.timeout:g} s per attempt, {attempts})"
        except httpx.TransportError as e:
            return f"connection failed: {type(e).__name__}: {e} ({attempts})"
        except ValueError as e:  # the SDK parses the body itself: a body that is not the API's JSON lands here
            return f"malformed response body: {type(e).__name__}: {str(e)[:200]}"
        return self._read(response, item)

    def _read(self, response: Any, item: Item) -> TeacherAnswer | str:
        cand = (response.candidates or [None])[0]
        finish = getattr(getattr(cand, "finish_reason", None), "name", None)
        text = response.text
        why = f" (finish reason {finish})" if finish and finish != "STOP" else ""
        if not text:
            blocked = getattr(getattr(response, "prompt_feedback", None), "block_reason", None)
            return f"no text in the response{why}" + (f"; prompt blocked: {blocked}" if blocked else "")
        try:
            obj = json.loads(text)
        except ValueError:
            return f"the response text is not JSON{why}: {text[:120]!r}"
        problem = check_answer(obj, item.choices)
        if problem:
            return problem + why
        usage = response.usage_metadata.model_dump(exclude_none=True, mode="json") if response.usage_metadata else {}
        return TeacherAnswer(obj["rationale"].strip(), obj["answer"], self.label,
                             {k: v for k, v in usage.items() if k.endswith("_count")})

    def run(self, items: Sequence[Item], data: Path, progress: bool) -> TeacherRun:
        from tqdm.auto import tqdm

        out = TeacherRun()
        todo = _from_cache(items, self.cache, out)
        if not todo:
            return out
        client, types = self._client()
        datasets_by_split: dict[str, Any] = {}
        load_lock = threading.Lock()

        def ask(item: Item) -> TeacherAnswer | str:
            with load_lock:
                ds = datasets_by_split.get(item.split)
                if ds is None:
                    ds = datasets_by_split[item.split] = _load_rows(data, item.split)
                images = [im["bytes"] for im in _row(ds, item.index)["images"]]
            got = self._ask(client, types, item, images)
            if isinstance(got, TeacherAnswer):
                self.cache.put(item.key, got, model=self.model)
            return got

        pool = ThreadPoolExecutor(max_workers=self.cfg.workers, thread_name_prefix="gemini")
        try:
            pending = {pool.submit(ask, group[0]): group for group in todo.values()}
            with tqdm(total=len(pending), desc=f"asking {self.model}", unit="item", disable=not progress) as bar:
                while pending:
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        _settle(out, pending.pop(fut), fut.result())
                        out.counters["calls"] += 1
                        bar.update(1)
        finally:
            # On an error or Ctrl-C: queued items are dropped, calls in flight finish and are cached (they are
            # paid for); a second Ctrl-C abandons them.
            pool.shutdown(wait=True, cancel_futures=True)
            out.counters["http_requests"] = self._http_requests
        return out


class LocalTeacher:
    """A local VLM through the scoring engine: greedy generation, answer on the last line."""

    name = "local"
    closing = ANSWER_LINE

    def __init__(self, cfg: RationaleConfig, cache: TeacherCache):
        self.cfg = cfg
        self.model = str(cfg.model)
        self.label = f"{self.name}:{self.model}"
        self.cache = cache

    def settings(self, item: Item) -> dict:
        return {"decoding": "greedy", "max_new_tokens": self.cfg.max_new_tokens}

    def run(self, items: Sequence[Item], data: Path, progress: bool) -> TeacherRun:
        from PIL import Image
        from tqdm.auto import tqdm

        from judgetrain.scoring import Scorer, parser_for_record

        out = TeacherRun()
        todo = list(_from_cache(items, self.cache, out).values())
        if not todo:
            return out
        scorer = Scorer.from_pretrained(self.model, batch_size=self.cfg.batch_size, progress=False)
        # Chunks of a few batches: finished answers reach the cache as they come, so a kill loses one chunk at most.
        chunk = 4 * (scorer.batch_size if isinstance(scorer.batch_size, int) else 8)
        rows = {}
        with tqdm(total=len(todo), desc=f"generating with {Path(self.model).name}", unit="item", disable=not progress) as bar:
            for start in range(0, len(todo), chunk):
                part = todo[start:start + chunk]
                recs = []
                for item, *_ in part:
                    if item.split not in rows:
                        rows[item.split] = _load_rows(data, item.split)
                    images = [Image.open(io.BytesIO(im["bytes"])) for im in _row(rows[item.split], item.index)["images"]]
                    recs.append(item.record(images))
                gens = scorer.generate(recs, max_new_tokens=self.cfg.max_new_tokens)
                for group, rec, gen in zip(part, recs, gens, strict=True):
                    got = split_answer(gen.text, parser_for_record(rec))
                    if isinstance(got, tuple):
                        got = TeacherAnswer(got[0], got[1], self.label, {"generated_tokens": gen.num_tokens})
                        self.cache.put(group[0].key, got, model=self.model)
                    else:
                        cut = ", cut at --max-new-tokens" if gen.truncated else ""
                        got = f"{got} ({gen.num_tokens} tokens{cut}): {gen.text[:120]!r}"
                    _settle(out, group, got)
                    out.counters["calls"] += 1
                bar.update(len(part))
        return out


class ReplayTeacher:
    """Rationales exported earlier: JSON Lines with ``id``, ``rationale``, ``answer`` (``teacher``, ``model`` optional)."""

    name = "replay"
    closing = ANSWER_LINE  # the prompt is not sent anywhere; only the with-rationale instruction matters

    def __init__(self, cfg: RationaleConfig, cache: TeacherCache, all_ids: Mapping[str, tuple[str, ...]]):
        self.path = Path(cfg.replay)
        self.strict = cfg.strict
        self.label = f"{self.name}:{self.path.name}"
        self.all_ids = all_ids  # id -> choices, over every split of the source dataset

    def settings(self, item: Item) -> dict:
        return {}

    def read(self) -> tuple[dict[str, TeacherAnswer], dict[str, str], list[Skip]]:
        """Every line of the replay file (:func:`judgetrain.jsonl.read_jsonl`), checked: the
        answers by id, why the line of an id was unusable (its record becomes a failure), and a
        :class:`Skip` naming ``file:line`` for every bad line. ``strict``: BuildError listing them."""
        if not self.path.is_file():
            raise BuildError(f"--replay {self.path}: no such file")
        got: dict[str, TeacherAnswer] = {}
        unusable: dict[str, str] = {}
        first_line: dict[str, int] = {}
        skips: list[Skip] = []
        for item in read_jsonl(self.path):
            rid, owns = None, False  # owns: this is the first line of a record's id
            try:
                if item.problem:
                    raise ValueError(item.problem)
                rid = text_field(item.row, "id", "the id of a record of the --data dataset", ids=True)
                if rid not in self.all_ids:
                    raise ValueError(f"id {rid!r} is not a record of the --data dataset; fix the id or drop the line")
                if rid in first_line:  # the first line of an id stands, good or bad
                    raise ValueError(f"id {rid!r} already given on line {first_line[rid]}; keep one line per record")
                first_line[rid], owns = item.line, True
                got[rid] = self._answer(item.row, self.all_ids[rid])
            except ValueError as e:
                skips.append(Skip(str(self.path), item.line, str(e), rid))
                if owns:
                    unusable[rid] = f"its line {self.path}:{item.line} is bad: {e}"
        if skips and self.strict:
            shown = "\n".join(f"  - {s}" for s in skips[:50])
            raise BuildError(f"--replay: {len(skips)} bad line(s):\n{shown}" + ("\n  …" if len(skips) > 50 else "")
                             + "\nfix them, or rerun without --strict to leave their records out")
        return got, unusable, skips

    def _answer(self, row: dict, choices: tuple[str, ...]) -> TeacherAnswer:
        """One replay line's answer; ``ValueError`` saying what is wrong."""
        problem = check_answer(row, choices)
        if problem:
            raise ValueError(problem)
        teacher, model = (optional_text(row, k, "a name, or leave it out") for k in ("teacher", "model"))
        return TeacherAnswer(row["rationale"].strip(), row["answer"], ":".join(x for x in (teacher, model) if x) or self.label)

    def run(self, items: Sequence[Item], data: Path, progress: bool) -> TeacherRun:
        given, unusable, skips = self.read()
        out = TeacherRun(skipped=skips)
        for item in items:
            if item.id in given:
                out.answers[item.id] = given[item.id]
            else:
                out.failures[item.id] = unusable.get(item.id, f"no line for this id in {self.path}")
        return out


def check_answer(obj: Any, choices: Sequence[str]) -> str | None:
    """Why a teacher's JSON answer is unusable, or None: it must be an object with a
    non-empty string ``rationale`` and an ``answer`` string among ``choices``."""
    if not isinstance(obj, dict):
        return f"the answer is JSON but not an object: {str(obj)[:80]!r}"
    missing = [k for k in ("rationale", "answer") if k not in obj]
    if missing:
        return f"the answer lacks {missing}"
    if not isinstance(obj["rationale"], str) or not obj["rationale"].strip():
        return "empty rationale"
    if not isinstance(obj["answer"], str) or obj["answer"] not in choices:
        return f"answer {obj['answer']!r} is not one of the choices {list(choices)} (give it as a string)"
    return None


def _from_cache(items: Sequence[Item], cache: TeacherCache, out: TeacherRun) -> dict[str, list[Item]]:
    """Fill ``out`` from the cache; return the items still to ask grouped by key
    (one call per distinct prompt, its answer shared by the group)."""
    todo: dict[str, list[Item]] = {}
    for item in items:
        if item.key in todo:
            todo[item.key].append(item)
            continue
        hit = cache.get(item.key)
        if hit is None:
            todo[item.key] = [item]
        else:
            out.answers[item.id] = hit
            out.counters["cache_hits"] += 1
    return todo


def _settle(out: TeacherRun, group: Sequence[Item], got: TeacherAnswer | str) -> None:
    for item in group:
        if isinstance(got, TeacherAnswer):
            out.answers[item.id] = got
        else:
            out.failures[item.id] = got


# --------------------------------------------------------------------------- the build


@dataclass(kw_only=True)
class RationaleConfig(OutputArgs):
    """``judgetrain build rationales``: every field is a flag (``--field-name``) and a ``--config`` key."""

    strict: bool = arg(False, "fail the build when any record gets no usable teacher answer or a --replay line is bad "
                              "(default: leave the record out of both datasets and list it under failures, and the "
                              "bad line under skipped, in build.json)")
    data: Path = arg(help="a built PRISM or MIRAGE dataset folder")
    teacher: Literal[TEACHERS] = arg(
        help="gemini (google-genai SDK), local (a VLM here) or replay (a JSON Lines file)")
    model: str | None = arg(None, f"gemini: model name (unset: {DEFAULT_GEMINI_MODEL}); local: model folder, hub id or "
                            "adapter folder")
    replay: Path | None = arg(None, "replay: JSON Lines with id, rationale, answer (teacher, model optional)", metavar="FILE")
    target: Literal[TARGETS] = arg("teacher", "the answer the SFT records teach: the teacher's (it becomes the label) or "
                                   "the gold label (records where the teacher disagrees are left out)")
    splits: list[str] = arg([], "splits to distil, space- or comma-separated (unset: all)")
    limit: int | None = arg(None, "only the first N records of each split", metavar="N")
    cache: Path | None = arg(None, "teacher answer cache (unset: OUT/cache)", metavar="DIR")
    rpm: float = arg(60.0, "gemini: requests per minute, retries included, spread evenly")
    workers: int = arg(4, "gemini: concurrent requests")
    timeout: float = arg(120.0, "gemini: seconds per request attempt", metavar="S")
    attempts: int = arg(6, "gemini: attempts per request, the first included")
    retry_delay: float = arg(2.0, "gemini: first backoff delay and jitter in seconds; doubles per retry up to 60 s",
                             metavar="S")
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
            self.batch_size = int(self.batch_size)

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
        for name, value in (("--workers", self.workers), ("--attempts", self.attempts), ("--max-new-tokens", self.max_new_tokens),
                            ("--limit", 1 if self.limit is None else self.limit)):
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


def make_teacher(cfg: RationaleConfig, cache: TeacherCache, all_ids: Mapping[str, tuple[str, ...]]):
    if cfg.teacher == "gemini":
        return GeminiTeacher(cfg, cache)
    if cfg.teacher == "local":
        return LocalTeacher(cfg, cache)
    return ReplayTeacher(cfg, cache, all_ids)


def collect_items(data: Path, builder: str, splits: Sequence[str], limit: int | None, teacher) -> list[Item]:
    """The records to ask about (the first ``limit`` of each split, in order), with
    the teacher's prompt and cache key."""
    items = []
    for split in splits:
        ds = _load_rows(data, split)
        n = len(ds) if limit is None else min(limit, len(ds))
        for i, row in enumerate(records._raw_rows(ds.select(range(n)))):
            if row["task"] not in BASE_INSTRUCTIONS[builder]:
                raise BuildError(f"{data} {split} row {i} (id {row['id']!r}): task {row['task']!r} has no teacher prompt; "
                                 f"rationales are distilled for {sorted(BASE_INSTRUCTIONS[builder])} records of {builder}")
            prompt = rewrite_prompt(row["prompt"], builder=builder, task=row["task"], layout=row["layout"],
                                    closing=teacher.closing[row["task"]], rid=row["id"])
            hashes = tuple(_sha256(im["bytes"]) for im in row["images"])
            item = Item(row["id"], split, i, row["task"], row["layout"], tuple(row["choices"]), row["label"], row["n_frames"],
                        tuple(prompt), hashes)
            settings = teacher.settings(item)
            key = TeacherCache.key(teacher=teacher.name, model=getattr(teacher, "model", ""), prompt=prompt_text(prompt),
                                   settings=settings, image_hashes=hashes)
            items.append(replace(item, key=key))
    return items


def sft_rows(data: Path, builder: str, split: str, plan_json: str):
    """The SFT records of one split and variant (generator for ``Dataset.from_generator``)."""
    plan = json.loads(plan_json)
    ds = _load_rows(data, split)
    for entry in plan["rows"]:
        row = _row(ds, entry["index"])
        rec = dict(row)
        answer = entry["target_answer"]
        if plan["variant"] == "with_rationale":
            rec["prompt"] = rewrite_prompt(row["prompt"], builder=builder, task=row["task"], layout=row["layout"],
                                           closing=ANSWER_LINE[row["task"]], rid=row["id"])
            text = with_rationale_completion(entry["rationale"], answer)
        else:
            text = answer
        rec["completion"] = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
        rec["label"] = answer
        meta = json.loads(row["meta"])
        meta.update(teacher=entry["teacher"], teacher_answer=entry["answer"], teacher_rationale=entry["rationale"],
                    gold_label=row["label"], target=plan["target"], sft_variant=plan["variant"])
        rec["meta"] = json.dumps(meta, sort_keys=True)
        yield rec


def _mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    import numpy as np

    if not values:
        return None, None
    return float(np.mean(values)), (float(np.std(values, ddof=1)) if len(values) > 1 else None)


def statistics(items: Sequence[Item], run: TeacherRun) -> dict:
    """Table S6 per task and layout (asked, success rate, rationale words and
    characters, mean ± sample std) and the teacher's answer distribution per task
    next to gold, with agreement and, for pointwise, the share of scores in {1, 2}."""
    from sklearn.metrics import accuracy_score

    lengths: dict[str, dict[str, dict]] = {}
    answers: dict[str, dict] = {}
    for task in sorted({i.task for i in items}):
        of_task = [i for i in items if i.task == task]
        lengths[task] = {}
        for layout in sorted({i.layout for i in of_task}) + ["all"]:
            asked = [i for i in of_task if layout in ("all", i.layout)]
            got = [run.answers[i.id].rationale for i in asked if i.id in run.answers]
            words, words_sd = _mean_std([len(r.split()) for r in got])
            chars, chars_sd = _mean_std([len(r) for r in got])
            lengths[task][layout] = {"asked": len(asked), "answered": len(got), "success_rate": len(got) / len(asked),
                                     "words_mean": words, "words_std": words_sd, "chars_mean": chars, "chars_std": chars_sd}
        pairs = [(i.label, run.answers[i.id].answer) for i in of_task if i.id in run.answers]
        choices = list(of_task[0].choices)
        teacher = Counter(a for _, a in pairs)
        entry = {"answered": len(pairs), "choices": choices,
                 "teacher": {c: teacher.get(c, 0) for c in choices},
                 "gold": {c: Counter(g for g, _ in pairs).get(c, 0) for c in choices},
                 "agreement_with_gold": float(accuracy_score([g for g, _ in pairs], [a for _, a in pairs])) if pairs else None}
        if task == "pointwise":
            entry["share_1_2"] = (teacher.get("1", 0) + teacher.get("2", 0)) / len(pairs) if pairs else None
        answers[task] = entry
    return {"rationale_length": lengths, "teacher_answers": answers}


def plot_answers(stats: Mapping[str, Any], path: Path) -> None:
    """Teacher vs. gold answer shares per task (paper 002 Figure S2, left, for pointwise)."""
    from judgetrain.plotting import pyplot

    plt = pyplot()
    tasks = list(stats["teacher_answers"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.2 * len(tasks), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        s = stats["teacher_answers"][task]
        n = max(s["answered"], 1)
        xs = range(len(s["choices"]))
        ax.bar([x - 0.2 for x in xs], [100 * s["teacher"][c] / n for c in s["choices"]], width=0.4, label="teacher", color="#C44E52")
        ax.bar([x + 0.2 for x in xs], [100 * s["gold"][c] / n for c in s["choices"]], width=0.4, label="gold", color="#4C72B0")
        ax.set_xticks(list(xs), s["choices"])
        ax.set_ylabel("share of answered records (%)")
        extra = f", {100 * s['share_1_2']:.0f}% in {{1,2}}" if s.get("share_1_2") is not None else ""
        ax.set_title(f"{task}: teacher vs. gold (n={s['answered']}{extra})", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def build(cfg: RationaleConfig) -> dict[str, dict]:
    """Ask the teacher, write both SFT datasets; returns ``{variant: build.json}``."""
    import datasets

    cfg.check()
    data, out = Path(cfg.data), Path(cfg.out).resolve()
    src_info = records.read_build_info(data)
    builder = src_info.get("builder")
    if builder not in BASE_INSTRUCTIONS:
        raise BuildError(f"--data {data} was built by {builder!r}; rationales are distilled for {sorted(BASE_INSTRUCTIONS)} "
                         "datasets (`judgetrain build prism` / `judgetrain build mirage`)")
    source = records.load(data)
    splits = list(cfg.splits or source)
    if [s for s in splits if s not in source]:
        raise BuildError(f"--splits {','.join(splits)}: {data} has the splits {sorted(source)}")
    all_ids = {}
    for ds in source.values():
        cols = ds.select_columns(["id", "choices"]).to_dict()
        all_ids.update(zip(cols["id"], map(tuple, cols["choices"])))
    cache = TeacherCache(cfg.cache or out / "cache")
    teacher = make_teacher(cfg, cache, all_ids)
    items = collect_items(data, builder, splits, cfg.limit, teacher)
    run = teacher.run(items, data, cfg.progress)
    for s in run.skipped:
        print(f"warning: skipped {s}", file=sys.stderr)

    stats = statistics(items, run)
    failures = [{"id": i.id, "split": i.split, "reason": run.failures[i.id]} for i in items if i.id in run.failures]
    if failures and cfg.strict:
        raise BuildError(f"--strict: {len(failures)} record(s) got no usable teacher answer (first: {failures[0]['id']}: "
                         f"{failures[0]['reason']}); rerun (the cache keeps every finished answer) or drop --strict to "
                         "leave them out")
    disagree = [{"id": i.id, "split": i.split, "reason": f"disagree: teacher {run.answers[i.id].answer}, gold {i.label}"}
                for i in items if i.id in run.answers and cfg.target == "gold" and run.answers[i.id].answer != i.label]
    left_out = {d["id"] for d in disagree}
    teacher_info = {"name": teacher.name, "label": teacher.label, "model": getattr(teacher, "model", None)}
    if cfg.teacher == "gemini":
        teacher_info["retry"] = {"attempts": cfg.attempts, "initial_delay_s": cfg.retry_delay, "max_delay_s": 60.0,
                                 "exp_base": 2.0, "jitter_s": cfg.retry_delay, "status_codes": list(RETRY_STATUS_CODES),
                                 "timeouts_and_connection_errors": True}
    tokens = Counter()
    for a in run.answers.values():
        tokens.update({k: v for k, v in a.usage.items() if isinstance(v, int)})
    counts = {"asked": len(items), "answered": len(run.answers), "failed": len(failures), "bad_lines": len(run.skipped),
              "success_rate": len(run.answers) / len(items) if items else None, "disagree": len(disagree),
              "cache_hits": run.counters["cache_hits"], "calls": run.counters["calls"],
              "http_requests": run.counters["http_requests"], "tokens": dict(sorted(tokens.items()))}

    work = out.with_name(out.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    infos = {}
    for variant in VARIANTS:
        splits_out = {}
        for split in splits:
            rows = []
            for i in items:
                if i.split != split or i.id not in run.answers or i.id in left_out:
                    continue
                a = run.answers[i.id]
                rows.append({"index": i.index, "rationale": a.rationale, "answer": a.answer, "teacher": a.teacher,
                             "target_answer": a.answer if cfg.target == "teacher" else i.label})
            if not rows:  # an empty split saves as no shard at all, which load_from_disk then cannot read back
                continue
            plan_json = json.dumps({"variant": variant, "target": cfg.target, "rows": rows}, sort_keys=True)
            splits_out[split] = datasets.Dataset.from_generator(
                sft_rows, features=records.FEATURES, cache_dir=str(work),
                gen_kwargs={"data": str(data), "builder": builder, "split": split, "plan_json": plan_json},
                fingerprint=records.make_id(BUILDER, variant, split, src_info["splits"][split]["content_hash"], plan_json))
        info = {
            "builder": BUILDER, "version": VERSION, "variant": variant, "seed": src_info.get("seed"), "args": cfg.args_json(),
            "source": {"path": str(data), "builder": builder, "version": src_info.get("version"),
                       "splits": {s: src_info["splits"][s]["content_hash"] for s in splits}},
            "teacher": teacher_info,
            "protocol": {
                "target": cfg.target,
                "completion": "rationale, newline, 'Answer: X'" if variant == "with_rationale" else "X alone",
                "instruction": ("the source's, its commit-first sentence replaced by REASON_FIRST + ANSWER_LINE"
                                if variant == "with_rationale" else "the source's, unchanged"),
                "label": "the teacher's answer (meta.gold_label keeps the builder's)" if cfg.target == "teacher"
                         else "the builder's label; records where the teacher disagrees are left out",
            },
            "counts": {"records": {s: len(d) for s, d in splits_out.items()}, "teacher": counts},
            "statistics": stats,
            "failures": failures,
            "skipped": disagree + [asdict(s) for s in run.skipped],
        }
        infos[variant] = records.save(datasets.DatasetDict(splits_out), out / variant, info)
    shutil.rmtree(work, ignore_errors=True)

    from judgetrain.io import write_rows

    write_rows(out / EXPORT_FILE, ({"id": i.id, "rationale": run.answers[i.id].rationale, "answer": run.answers[i.id].answer,
                                    **_teacher_fields(run.answers[i.id].teacher)} for i in items if i.id in run.answers))
    if run.answers:
        plot_answers(stats, out / PLOT_FILE)
    else:
        (out / PLOT_FILE).unlink(missing_ok=True)
    return infos


def _teacher_fields(label: str) -> dict:
    teacher, _, model = label.partition(":")
    return {"teacher": teacher, "model": model} if model else {"teacher": teacher}


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        RationaleConfig, "judgetrain build rationales",
        "Distil a teacher's step-level rationales and answers for a PRISM / MIRAGE dataset into two SFT datasets "
        "(paper 002 §5E, F.1): OUT/with_rationale (rationale, then 'Answer: X') and OUT/score_only (X).",
        "examples:\n"
        "  export GEMINI_API_KEY=...   # read from the environment only, never written anywhere\n"
        "  judgetrain build rationales --data data/prism --out data/prism-rationales --teacher gemini --rpm 300 --workers 8\n"
        "  judgetrain build rationales --data data/prism --out data/prism-qwen --teacher local --model Qwen/Qwen3-VL-32B-Instruct\n"
        "  judgetrain build rationales --data data/prism --out data/prism-replayed --teacher replay --replay data/prism-rationales/rationales.jsonl\n"
        "  judgetrain build rationales --config rationales.yaml --out data/prism-gemini   # YAML keys are the fields below\n"
        "A killed or partly failed run: rerun the same command; finished answers come from the cache, failures are asked again.\n")


def _fmt(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.1f} ± {std:.1f}" if std is not None else f"{mean:.1f}"


def print_summary(infos: Mapping[str, dict], out: Path) -> None:
    """Teacher calls and failures, Table S6 (success and rationale length per layout), answer distributions."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    info = infos[VARIANTS[0]]
    c = info["counts"]["teacher"]
    rate = f"{100 * c['success_rate']:.1f}%" if c["success_rate"] is not None else "–"
    console.print(f"Teacher {info['teacher']['label']}: {c['answered']} of {c['asked']} record(s) answered ({rate}); "
                  f"{c['cache_hits']} from the cache, {c['calls']} asked now"
                  + (f" ({c['http_requests']} HTTP requests)" if c["http_requests"] else ""))
    t = Table(title="Rationales per layout (Table S6)")
    for col in ("task", "layout", "asked", "success", "words (mean ± sd)", "chars (mean ± sd)"):
        t.add_column(col, justify="left" if col in ("task", "layout") else "right")
    for task, layouts in info["statistics"]["rationale_length"].items():
        for layout, s in layouts.items():
            t.add_row(task, layout, str(s["asked"]), f"{100 * s['success_rate']:.1f}%",
                      _fmt(s["words_mean"], s["words_std"]), _fmt(s["chars_mean"], s["chars_std"]))
    console.print(t)
    t = Table(title="Teacher answers vs. gold")
    for col in ("task", "answer", "teacher", "gold"):
        t.add_column(col, justify="left" if col == "task" else "right")
    notes = []
    for task, s in info["statistics"]["teacher_answers"].items():
        n = max(s["answered"], 1)
        for ch in s["choices"]:
            t.add_row(task, ch, f"{s['teacher'][ch]} ({100 * s['teacher'][ch] / n:.0f}%)", f"{s['gold'][ch]} ({100 * s['gold'][ch] / n:.0f}%)")
        if s["agreement_with_gold"] is not None:
            notes.append(f"{task}: teacher agrees with gold on {100 * s['agreement_with_gold']:.1f}%")
        if s.get("share_1_2") is not None:
            notes.append(f"{task}: teacher scores in {{1,2}}: {100 * s['share_1_2']:.1f}% (paper 002: 91%, 'binary collapse')")
    console.print(t)
    for note in notes:
        console.print("  " + note)
    if info["failures"]:
        console.print(f"[yellow]{len(info['failures'])} record(s) failed and were left out (id and reason under 'failures' in "
                      "build.json); rerun the same command to ask for them again[/yellow]")
    plot = f"; answer plot: {out / PLOT_FILE}" if (out / PLOT_FILE).is_file() else ""
    print(f"Teacher answers: {out / EXPORT_FILE} (replay format){plot}", flush=True)
    for variant, vinfo in infos.items():
        finish_summary(console, vinfo, out / variant)


def main(cfg: RationaleConfig) -> int:
    infos = build(cfg)
    print_summary(infos, Path(cfg.out))
    return 0
