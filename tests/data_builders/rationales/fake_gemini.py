"""A local stand-in for the Gemini REST API (``generateContent``), for tests of the real ``google-genai`` SDK.

Gemini is a paid external service, the one thing the tests may replace. This
server speaks its protocol on 127.0.0.1: ``POST /{v1,v1beta}/models/{model}:generateContent``
with the API key in ``x-goog-api-key``, the request body the SDK sends
(``contents`` with ``text`` and ``inlineData`` parts, ``generationConfig`` with
``responseMimeType`` / ``responseSchema``) and the response shape of the real
API (``candidates[0].content.parts[0].text``, ``finishReason``,
``usageMetadata``, ``modelVersion``, ``responseId``) or its error shape
(``{"error": {"code", "message", "status", "details"}}``).

Faults are scripted per distinct request content, in order of first arrival:
``script[k]`` is the list of outcomes for the attempts at the k-th distinct
content (``"ok"``, ``"429"``, ``"500"``, ``"timeout"``: hold the response longer
than the client waits, then answer, ``"malformed"``: a 200 whose body is not
JSON, ``"schema"``: a 200 whose text breaks the response schema); attempts past
the list, and contents past the script, get ``"ok"``. Content is identified by
the sha256 of the request's ``contents`` (images included), so a test can
count calls per content and see that nothing is asked twice.

The answer of an ``"ok"`` is ``responder(body, digest)`` → ``(rationale, answer)``;
the default draws the answer from the schema's ``enum`` by the digest and
writes the digest into the rationale, so a test can trace each record's text
back to the request that produced it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH = re.compile(r"^/(v1|v1beta)/models/([^/:]+):generateContent$")
OUTCOMES = ("ok", "429", "500", "timeout", "malformed", "schema")


@dataclass(frozen=True)
class Call:
    """One request as the server saw it."""

    n: int  # 1-based arrival order
    t: float  # time.monotonic() at arrival
    digest: str
    outcome: str
    model: str
    answer: str | None = None
    rationale: str | None = None


def inline_images(body: dict) -> list[tuple[str, bytes]]:
    """(MIME type, bytes) of every inline image of a request, in order. Proto3 JSON
    parsing, which the API uses, accepts camelCase and snake_case field names and
    both base64 alphabets; the SDK sends ``inlineData`` with ``mime_type`` and URL-safe base64."""
    out = []
    for content in body["contents"]:
        for part in content["parts"]:
            data = part.get("inlineData", part.get("inline_data"))
            if data is not None:
                raw = data["data"].replace("-", "+").replace("_", "/")
                out.append((data.get("mimeType", data.get("mime_type")), base64.b64decode(raw + "=" * (-len(raw) % 4))))
    return out


def default_responder(body: dict, digest: str) -> tuple[str, str]:
    choices = body["generationConfig"]["responseSchema"]["properties"]["answer"]["enum"]
    answer = choices[int(digest[:8], 16) % len(choices)]
    return f"[{digest[:16]}] Step 1 matches its image. Step 2 is out of order, so the sequence is judged {answer}.", answer


class FakeGemini:
    """The server, run in a thread; use as a context manager. ``url`` is its base URL."""

    def __init__(self, key: str, *, script: Sequence[Sequence[str]] = (), hold: float = 2.0,
                 responder: Callable[[dict, str], tuple[str, str]] = default_responder, delay: float = 0.0):
        for outcomes in script:
            bad = [o for o in outcomes if o not in OUTCOMES]
            if bad:
                raise ValueError(f"unknown outcome(s) {bad}; use {OUTCOMES}")
        self.key = key
        self.script = [list(s) for s in script]
        self.hold = hold  # seconds a "timeout" response is held back
        self.delay = delay  # seconds every response waits (to let a test kill a client mid-run)
        self.responder = responder
        self.calls: list[Call] = []
        self.bodies: dict[str, dict] = {}
        self._order: dict[str, int] = {}  # digest -> index of first arrival
        self._attempts: Counter = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # -- what tests read
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def successes(self) -> Counter:
        """Per content digest, how many valid answers were sent."""
        return Counter(c.digest for c in self.calls if c.outcome == "ok")

    def outcomes(self) -> Counter:
        return Counter(c.outcome for c in self.calls)

    def answered(self) -> dict[str, Call]:
        """digest -> the ok call that answered it."""
        return {c.digest: c for c in self.calls if c.outcome == "ok"}

    # -- server
    def __enter__(self) -> FakeGemini:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet test output
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _send(self, h: BaseHTTPRequestHandler, code: int, body: bytes) -> None:
        try:
            h.send_response(code)
            h.send_header("Content-Type", "application/json; charset=UTF-8")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout): the real API's late answer goes nowhere either

    def _error(self, h: BaseHTTPRequestHandler, code: int, status: str, message: str, details: list | None = None) -> None:
        error = {"code": code, "message": message, "status": status}
        if details:
            error["details"] = details
        self._send(h, code, json.dumps({"error": error}).encode())

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        m = PATH.match(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length)
        if not m:
            return self._error(h, 404, "NOT_FOUND", f"Method not found: {h.path}")
        if h.headers.get("x-goog-api-key") != self.key:
            return self._error(h, 400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
                               [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
                                 "domain": "googleapis.com"}])
        body = json.loads(raw)
        digest = hashlib.sha256(json.dumps(body["contents"], sort_keys=True).encode()).hexdigest()
        with self._lock:
            k = self._order.setdefault(digest, len(self._order))
            attempt = self._attempts[digest]
            self._attempts[digest] += 1
            planned = self.script[k] if k < len(self.script) else []
            outcome = planned[attempt] if attempt < len(planned) else "ok"
            self.bodies[digest] = body
            n = len(self.calls) + 1
        answer = rationale = None
        if outcome == "ok":
            rationale, answer = self.responder(body, digest)
        with self._lock:  # recorded on arrival: a client killed while waiting still made this call
            self.calls.append(Call(n, arrived, digest, outcome, m.group(2), answer, rationale))
        if self.delay:
            time.sleep(self.delay)
        if outcome == "429":
            return self._error(h, 429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.",
                               [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}])
        if outcome == "500":
            return self._error(h, 500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting")
        if outcome == "timeout":
            time.sleep(self.hold)  # the client has given up by now: this answer reaches no one
            rationale, answer = self.responder(body, digest)
        if outcome == "malformed":
            return self._send(h, 200, b'{"candidates": [{"content": {"parts": [{"text": "{\\"rationale\\"')
        # "schema": valid JSON text without the required answer
        text = json.dumps({"rationale": rationale, "answer": answer} if outcome != "schema" else {"rationale": "I think"})
        images = len(inline_images(body))
        usage = {"promptTokenCount": 258 * images + 40, "candidatesTokenCount": len(text) // 4, "thoughtsTokenCount": 100}
        usage["totalTokenCount"] = sum(usage.values())
        response = {
            "candidates": [{"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": usage,
            "modelVersion": m.group(2),
            "responseId": digest[:22],
        }
        self._send(h, 200, json.dumps(response).encode())
