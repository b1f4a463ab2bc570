"""The teachers that write rationales: Gemini through the ``google-genai`` SDK (structured JSON answers, the
SDK's retries, a client-side rate limit), a local VLM through the scoring engine, and a replay of an earlier
export. Each turns the items to ask about into a :class:`TeacherRun`, reading and filling the answer cache.

Docs: "concepts/prism-mirage.md".
"""

from __future__ import annotations

import io
import json
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgetrain.jsonl import optional_text, read_jsonl
from judgetrain.jsonl import text as text_field

from ..core.common import BuildError, Skip
from .config import DEFAULT_GEMINI_MODEL, RationaleConfig
from .items import Item, TeacherAnswer, TeacherCache, TeacherRun, from_cache, load_rows, row_at, settle
from .prompts import ANSWER_LINE, JSON_FIELDS, check_answer, split_answer

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

# The SDK's own default set of retryable statuses, stated so build.json shows it.
RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)
# A rejected key or an unknown model fails every item alike: stop instead of recording thousands of failures.
FATAL_STATUS_CODES = (401, 403, 404)


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
        return {
            "type": "OBJECT",
            "properties": {
                "rationale": {"type": "STRING", "description": "step-by-step reasoning, written before the answer"},
                "answer": {"type": "STRING", "enum": list(choices)},
            },
            "required": ["rationale", "answer"],
            "propertyOrdering": ["rationale", "answer"],
        }

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
            raise BuildError(
                "--teacher gemini: no API key. Set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment; "
                "it is read from there only and never written to any output"
            )
        retry = types.HttpRetryOptions(
            attempts=self.cfg.attempts,
            initial_delay=self.cfg.retry_delay,
            max_delay=60.0,
            exp_base=2.0,
            jitter=self.cfg.retry_delay,
            http_status_codes=list(RETRY_STATUS_CODES),
        )
        options = types.HttpOptions(
            base_url=self.cfg.base_url,
            timeout=math.ceil(self.cfg.timeout * 1000),
            retry_options=retry,
            client_args={"event_hooks": {"request": [self._on_request]}},
        )
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
        config = types.GenerateContentConfig(
            response_mime_type="application/json",
            response_schema=types.Schema.model_validate(self.schema(item.choices)),
            system_instruction=system,
        )
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
        return TeacherAnswer(
            obj["rationale"].strip(), obj["answer"], self.label, {k: v for k, v in usage.items() if k.endswith("_count")}
        )

    def run(self, items: Sequence[Item], data: Path, progress: bool) -> TeacherRun:
        from tqdm.auto import tqdm

        out = TeacherRun()
        todo = from_cache(items, self.cache, out)
        if not todo:
            return out
        client, types = self._client()
        datasets_by_split: dict[str, Any] = {}
        load_lock = threading.Lock()

        def ask(item: Item) -> TeacherAnswer | str:
            with load_lock:
                ds = datasets_by_split.get(item.split)
                if ds is None:
                    ds = datasets_by_split[item.split] = load_rows(data, item.split)
                images = [im["bytes"] for im in row_at(ds, item.index)["images"]]
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
                        settle(out, pending.pop(fut), fut.result())
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
        todo = list(from_cache(items, self.cache, out).values())
        if not todo:
            return out
        # "auto" or, from RationaleConfig.__post_init__, an int (check() refuses anything else)
        batch_size: BatchSize = "auto" if self.cfg.batch_size == "auto" else int(self.cfg.batch_size)
        scorer = Scorer.from_pretrained(self.model, batch_size=batch_size, progress=False)
        # Chunks of a few batches: finished answers reach the cache as they come, so a kill loses one chunk at most.
        chunk = 4 * (scorer.batch_size if isinstance(scorer.batch_size, int) else 8)
        rows = {}
        with tqdm(total=len(todo), desc=f"generating with {Path(self.model).name}", unit="item", disable=not progress) as bar:
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                recs = []
                for item, *_ in part:
                    if item.split not in rows:
                        rows[item.split] = load_rows(data, item.split)
                    images = [Image.open(io.BytesIO(im["bytes"])) for im in row_at(rows[item.split], item.index)["images"]]
                    recs.append(item.record(images))
                gens = scorer.generate(recs, max_new_tokens=self.cfg.max_new_tokens)
                for group, rec, gen in zip(part, recs, gens, strict=True):
                    parsed = split_answer(gen.text, parser_for_record(rec))
                    got: TeacherAnswer | str
                    if isinstance(parsed, tuple):
                        got = TeacherAnswer(parsed[0], parsed[1], self.label, {"generated_tokens": gen.num_tokens})
                        self.cache.put(group[0].key, got, model=self.model)
                    else:
                        cut = ", cut at --max-new-tokens" if gen.truncated else ""
                        got = f"{parsed} ({gen.num_tokens} tokens{cut}): {gen.text[:120]!r}"
                    settle(out, group, got)
                    out.counters["calls"] += 1
                bar.update(len(part))
        return out


class ReplayTeacher:
    """Rationales exported earlier: JSON Lines with ``id``, ``rationale``, ``answer`` (``teacher``, ``model`` optional)."""

    name = "replay"
    closing = ANSWER_LINE  # the prompt is not sent anywhere; only the with-rationale instruction matters

    def __init__(self, cfg: RationaleConfig, cache: TeacherCache, all_ids: Mapping[str, tuple[str, ...]]):
        assert cfg.replay is not None  # RationaleConfig.check() requires --replay FILE with --teacher replay
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
            rid, owner = None, None  # owner: the id this line is the first line of
            try:
                if item.row is None:  # a line that is not a JSON object: its problem
                    raise ValueError(item.problem)
                rid = text_field(item.row, "id", "the id of a record of the --data dataset", ids=True)
                if rid not in self.all_ids:
                    raise ValueError(f"id {rid!r} is not a record of the --data dataset; fix the id or drop the line")
                if rid in first_line:  # the first line of an id stands, good or bad
                    raise ValueError(f"id {rid!r} already given on line {first_line[rid]}; keep one line per record")
                first_line[rid], owner = item.line, rid
                got[rid] = self._answer(item.row, self.all_ids[rid])
            except ValueError as e:
                skips.append(Skip(str(self.path), item.line, str(e), rid))
                if owner is not None:
                    unusable[owner] = f"its line {self.path}:{item.line} is bad: {e}"
        if len(skips) == 1 and self.strict:  # the one bad line is the whole message
            raise BuildError(f"--replay: {skips[0]} (--strict: fix it, or rerun without --strict to leave its record out)")
        if skips and self.strict:
            shown = "\n".join(f"  - {s}" for s in skips[:50])
            raise BuildError(
                f"--replay: {len(skips)} bad line(s):\n{shown}"
                + ("\n  …" if len(skips) > 50 else "")
                + "\nfix them, or rerun without --strict to leave their records out"
            )
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


def make_teacher(cfg: RationaleConfig, cache: TeacherCache, all_ids: Mapping[str, tuple[str, ...]]):
    """The teacher ``--teacher`` names; ``all_ids`` (id -> choices over every source split) checks replay lines."""
    if cfg.teacher == "gemini":
        return GeminiTeacher(cfg, cache)
    if cfg.teacher == "local":
        return LocalTeacher(cfg, cache)
    return ReplayTeacher(cfg, cache, all_ids)
