"""An evaluation run in wandb (``--report_to wandb`` on ``eval timecatch|judge|phasefusion``).

Once a run has written ``metrics.json``, :func:`log_run` opens one wandb run named after the
run folder, in the project ``$WANDB_PROJECT`` (default ``judgetrain``, where training and
``judgetrain sweep`` log), with ``run.json`` as its config, and logs:

- every number of ``metrics.json`` in the run summary (final values, one each: no history,
  so no one-point charts), nested keys joined by ``/``
  (``table2/main/temporal_detect/clevrer/accuracy``; list entries by index, ``…/ci95/0``);
- a ``wandb.Table`` ``item_table``, one row per prediction (a PhaseFusion run: one per pass, each
  view and ordering): id, task, source, gold, prediction, correct, the top probability, the
  posterior over the choices (JSON text, ``{"yes": 0.61, "no": 0.39}``, the probabilities
  ``predictions.jsonl`` holds), the prompt as text (``<image>`` where a frame goes), which
  view (PhaseFusion), and the frames the model saw as one ``wandb.Image``, side by side in
  prompt order. Frames come from the dataset records (``run.json``'s ``data`` and
  ``split``, joined by id) or the video (PhaseFusion); only the first
  ``$JUDGETRAIN_WANDB_IMAGE_ROWS`` rows (default 200) carry them, so a 20,000-item run
  stays a small upload.

Offline-safe as training is (``judgetrain.train.outputs.configure_reporting``): without
``WANDB_API_KEY``, a key in ``~/.netrc`` or a ``WANDB_MODE``, the run is written offline
under ``$WANDB_DIR`` (default the run folder: ``RUN/wandb/offline-run-…``) for a later
``wandb sync``, which the last line printed names. The offline run is whole in that folder:
wandb's staging area (the item table and its frame images, until ``wandb sync`` uploads them)
and its cache go to ``RUN/wandb/artifacts/staging`` and ``RUN/wandb/cache`` instead of the
home folder (``WANDB_DATA_DIR``, ``WANDB_CACHE_DIR``, unless set). The table is the
``run_table`` artifact; ``files/media/table/*.table.json`` is wandb's flat copy of it, with
``"Image"`` where a frame strip goes. A repeated report of one folder resumes its wandb run
(``id=…, resume="allow"``; the id kept in ``RUN/wandb/judgetrain-run.json``) rather than
opening a second one of the same name; offline, that is a new ``offline-run-…-ID`` folder
with the same id (sync the newest, printed). Keys are never logged: wandb reads them from
the environment itself, and config keys that look like secrets are left out.

Docs: "how-to/wandb.md", "concepts/identity.md".
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, cast

from judgetrain.config import ConfigError
from judgetrain.errors import UserError
from judgetrain.io import write_json

from .runs import METRICS, read_run

__all__ = [
    "DEFAULT_IMAGE_ROWS",
    "DEFAULT_WANDB_PROJECT",
    "IMAGE_ROWS_ENV",
    "ITEM_COLUMNS",
    "REPORT_TO",
    "RUN_ID_FILE",
    "TABLE_KEY",
    "filmstrip",
    "flat_metrics",
    "image_rows_limit",
    "item_rows",
    "log_run",
    "reports_to_wandb",
    "run_config",
    "stored_run_id",
    "wandb_mode",
]

REPORT_TO = ("none", "wandb")  # what an evaluation's --report_to takes (transformers' spelling)
DEFAULT_IMAGE_ROWS = 200
IMAGE_ROWS_ENV = "JUDGETRAIN_WANDB_IMAGE_ROWS"
DEFAULT_WANDB_PROJECT = "judgetrain"  # training's and the sweep's project (judgetrain.train.outputs)
TABLE_KEY = "item_table"  # not "items": metrics.json has an items block (selected, evaluated)
STRIP_HEIGHT = 128  # frames taller than this are scaled down in the table's image
STRIP_GAP = 2  # white pixels between two frames
ITEM_COLUMNS = [
    "id",
    "task",
    "source",
    "view",
    "gold",
    "prediction",
    "correct",
    "top_prob",
    "posterior",
    "prompt",
    "n_frames",
    "frames",
]
# run.json keys that are bulky and say nothing a wandb filter needs (item ids, content hashes)
_CONFIG_DROP = ("items", "identity", "argv")
RUN_ID_FILE = "judgetrain-run.json"  # in RUN/wandb/: the wandb run id a repeated report resumes
# wandb's folders outside its run folder, by environment variable: where they go under RUN/wandb ("": RUN/wandb
# itself, the staging area then RUN/wandb/artifacts/staging). WANDB_CONFIG_DIR stays: it holds the user's settings
# (base_url, entity); WANDB_ARTIFACT_DIR is where artifacts are downloaded to, which logging never does.
_HOME_DIRS = {"WANDB_DATA_DIR": "", "WANDB_CACHE_DIR": "cache"}
_SECRET = re.compile(r"token|secret|password|passwd|api[_-]?key|credential", re.I)


def reports_to_wandb(report_to: str | Sequence[str] | None) -> bool:
    """Whether a ``report_to`` value (a name, a list of names, ``None``) names wandb."""
    if not report_to:
        return False
    return "wandb" in ([report_to] if isinstance(report_to, str) else list(report_to))


def flat_metrics(metrics: Any, prefix: str = "") -> dict[str, float | int | bool]:
    """The numbers (and booleans) of ``metrics`` under flat keys: nested mappings joined by
    ``/``, list entries by their index; strings and ``None`` are left out."""
    out: dict[str, float | int | bool] = {}
    if isinstance(metrics, Mapping):
        items: Any = ((str(k), v) for k, v in metrics.items())
    elif isinstance(metrics, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(metrics))
    else:
        if isinstance(metrics, (bool, int, float)) and prefix:
            out[prefix] = metrics
        return out
    for key, value in items:
        out.update(flat_metrics(value, f"{prefix}/{key}" if prefix else key))
    return out


def run_config(info: Mapping[str, Any]) -> dict[str, Any]:
    """``run.json`` as a wandb config: without the item ids, the identity hashes and ``argv``
    (``command`` stays), the number of items kept; keys that look like secrets left out."""

    def clean(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: clean(v) for k, v in value.items() if not _SECRET.search(str(k))}
        return value

    config = {k: v for k, v in info.items() if k not in _CONFIG_DROP}
    config["n_items"] = (info.get("items") or {}).get("n")
    return clean(config)


def wandb_mode() -> Literal["offline"] | None:
    """``"offline"`` when no key is configured and ``WANDB_MODE`` is unset (training's rule),
    else ``None``: wandb's own choice (online with a key, or what ``WANDB_MODE`` says)."""
    from judgetrain.wandb_mode import offline_without_a_key

    return "offline" if offline_without_a_key() else None


def image_rows_limit() -> int:
    """How many table rows carry their frames: ``$JUDGETRAIN_WANDB_IMAGE_ROWS``, default 200."""
    text = os.environ.get(IMAGE_ROWS_ENV)
    if text is None or text == "":
        return DEFAULT_IMAGE_ROWS
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ConfigError(
            [
                f"{IMAGE_ROWS_ENV}={text!r}: give how many rows of the wandb item table carry their "
                f"frames, a whole number >= 0 (default {DEFAULT_IMAGE_ROWS})"
            ],
            "environment",
        )
    return value


def filmstrip(frames: Sequence[Any], height: int = STRIP_HEIGHT):
    """One RGB image of ``frames`` (PIL images or HxWx3 uint8 arrays) left to right, every frame
    scaled to the tallest one's height or ``height``, whichever is less, ``STRIP_GAP`` white
    pixels between two; ``None`` for no frames."""
    from PIL import Image

    images = [f.convert("RGB") if isinstance(f, Image.Image) else Image.fromarray(f).convert("RGB") for f in frames]
    if not images:
        return None
    h = min(height, max(im.height for im in images))
    scaled = [im if im.height == h else im.resize((max(1, round(im.width * h / im.height)), h)) for im in images]
    strip = Image.new("RGB", (sum(im.width for im in scaled) + STRIP_GAP * (len(scaled) - 1), h), "white")
    x = 0
    for im in scaled:
        strip.paste(im, (x, 0))
        x += im.width + STRIP_GAP
    return strip


def _prompt_text(messages: Sequence[Mapping[str, Any]] | None) -> str | None:
    """A chat as text, one ``role: …`` line block per message, ``<image>`` where a frame goes."""
    if not messages:
        return None
    blocks = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            text = content
        else:
            text = "".join("<image>" if c.get("type") == "image" else str(c.get("text") or "") for c in content or [])
        blocks.append(f"{m.get('role', '?')}: {text}")
    return "\n".join(blocks)


def _posterior(choices: Sequence[Any] | None, probs: Sequence[float] | None) -> tuple[str | None, float | None]:
    """The posterior as JSON text ``{choice: p}`` (as ``predictions.jsonl`` holds it) and its top probability."""
    if not choices or probs is None:
        return None, None
    post = {str(c): float(p) for c, p in zip(choices, probs, strict=True)}
    top = max(post.values())
    return json.dumps(post), (top if math.isfinite(top) else None)


def _records(info: Mapping[str, Any]) -> Any:
    """The dataset split a record-based run read (``run.json``'s ``data``, ``split``), or ``None``
    with a warning when it is no longer there."""
    from judgetrain import records

    data, split = info.get("data"), info.get("split")
    try:
        return records.load(data)[split] if data and split else None
    except (OSError, KeyError, UserError) as e:
        print(
            f"warning: wandb items table: prompts and frames left out, the records of {data} [{split}] did not load ({e})",
            file=sys.stderr,
            flush=True,
        )
        return None


def _record_rows(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any], image_rows: int) -> list[list[Any]]:
    """Table rows of a run scored on dataset records (TimeCatch, judge): one per prediction."""
    import wandb

    ds = _records(info)
    where = {i: k for k, i in enumerate(ds["id"])} if ds is not None else {}
    prompts = ds.select_columns(["prompt"]) if ds is not None else None
    out = []
    for n, r in enumerate(rows):
        k = where.get(r["id"])
        post, top = _posterior(r.get("choices"), r.get("probs"))
        prompt = r.get("prompt") or (_prompt_text(prompts[k]["prompt"]) if prompts is not None and k is not None else None)
        frames = ds[k]["images"] if k is not None and n < image_rows else []
        strip = filmstrip(frames)
        out.append(
            [
                r["id"],
                r.get("task"),
                r.get("source"),
                None,
                _text(r.get("label")),
                _text(r.get("prediction")),
                r.get("correct"),
                top,
                post,
                prompt,
                r.get("n_frames"),
                wandb.Image(strip, caption=f"{len(frames)} frames") if strip is not None else None,
            ]
        )
    return out


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else json.dumps(value)


def _pass_rows(rows: Sequence[Mapping[str, Any]], image_rows: int) -> list[list[Any]]:
    """Table rows of a PhaseFusion run: one per pass (view × ordering) of a finished question."""
    import wandb

    from judgetrain.mcq.views import mcq_prompt
    from judgetrain.video import decode_frames

    questions = {r["id"]: r for r in rows if r.get("kind") == "question"}
    out: list[list[Any]] = []
    unreadable: set[str] = set()
    for r in rows:
        q = questions.get(r["id"])
        if r.get("kind") != "pass" or q is None:
            continue
        options = list(q["options"])
        post, top = _posterior(options, r["posterior"])
        prompt = _prompt_text(mcq_prompt(q["question"], options, r["perm"], len(r["frames"])))
        strip = None
        if len(out) < image_rows and q["video"] not in unreadable:
            try:
                strip = filmstrip(decode_frames(q["video"], r["frames"], max_side=2 * STRIP_HEIGHT))
            except (OSError, ValueError) as e:  # moved or rewritten since the run: the row goes without frames
                unreadable.add(q["video"])
                print(f"warning: wandb item table: frames of {q['video']} left out ({e})", file=sys.stderr, flush=True)
        view = f"{r['grid']} origin {r['origin']} phase {r['phase']} ordering {r['ordering']}"
        out.append(
            [
                r["id"],
                "video_mcq",
                r.get("benchmark"),
                view,
                options[q["answer"]],
                options[r["pred"]],
                r.get("correct"),
                top,
                post,
                prompt,
                len(r["frames"]),
                wandb.Image(strip, caption=f"frames {r['frames']}") if strip is not None else None,
            ]
        )
    return out


def item_rows(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any], image_rows: int) -> list[list[Any]]:
    """The ``item_table``'s rows (:data:`ITEM_COLUMNS`) of a run's prediction ``rows``; frames
    on the first ``image_rows`` only."""
    if any(r.get("kind") == "pass" for r in rows):
        return _pass_rows(rows, image_rows)
    return _record_rows(rows, info, image_rows)


@contextmanager
def _wandb_dirs(wandb_dir: Path) -> Iterator[None]:
    """Point wandb's own folders outside its run folder (:data:`_HOME_DIRS`: the artifact
    staging area, which holds the item table and its frame images until ``wandb sync``
    uploads them, and the cache with the wandb-core service's logs) into ``wandb_dir``
    while a run is logged, so an offline run is whole inside the run folder. wandb reads
    them from the environment only (``wandb.env``; no ``wandb.Settings`` field), so they are
    set here and restored afterwards; one the user set is left as it is."""
    saved = {name: os.environ.get(name) for name in _HOME_DIRS}
    try:
        for name, sub in _HOME_DIRS.items():
            os.environ.setdefault(name, str(wandb_dir / sub if sub else wandb_dir))
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def stored_run_id(run_dir: str | os.PathLike) -> str | None:
    """The wandb run id an earlier report of ``run_dir`` logged under (:data:`RUN_ID_FILE`), or None."""
    path = Path(run_dir) / "wandb" / RUN_ID_FILE
    try:
        return json.loads(path.read_text()).get("run_id") or None
    except (OSError, ValueError, AttributeError):
        return None


def _open_run(run_dir: Path, folder: Path, cfg: Mapping[str, Any], project: str):
    """``wandb.init`` for ``run_dir``: the run an earlier report opened when there is one
    (``WANDB_RUN_ID`` / ``WANDB_RESUME`` in the environment win, as in training), whose id is
    then stored in the run folder for the next report."""
    import wandb

    run_id = os.environ.get("WANDB_RUN_ID") or stored_run_id(run_dir)
    resume = os.environ.get("WANDB_RESUME", "allow") if run_id else None
    run = wandb.init(
        project=project,
        name=run_dir.resolve().name,
        dir=str(folder),
        mode=wandb_mode(),
        job_type="eval",
        config=dict(cfg),
        id=run_id,
        resume=cast(Any, resume),
        reinit="create_new",
    )
    (run_dir / "wandb").mkdir(parents=True, exist_ok=True)
    write_json(run_dir / "wandb" / RUN_ID_FILE, {"run_id": run.id})
    return run


def log_run(run_dir: str | os.PathLike, cfg: Mapping[str, Any] | None = None, *, image_rows: int | None = None) -> Path:
    """Log a finished run folder to wandb (see the module docstring): its metrics (in the run
    summary) and its items table. ``cfg``: the wandb config (default: :func:`run_config` of
    ``run.json``); ``image_rows``: rows carrying frames (default :func:`image_rows_limit`).
    Returns the wandb run's local folder (``…/wandb/offline-run-…`` offline)."""
    import wandb

    run_dir = Path(run_dir)
    rows, info = read_run(run_dir, "run the evaluation before logging it to wandb")
    if not (run_dir / METRICS).is_file():
        raise FileNotFoundError(f"{run_dir} holds no {METRICS}; run `judgetrain eval report {run_dir}` first")
    metrics = flat_metrics(json.loads((run_dir / METRICS).read_text()))
    limit = image_rows_limit() if image_rows is None else image_rows
    table = wandb.Table(columns=list(ITEM_COLUMNS), data=item_rows(rows, info, limit))
    folder = Path(os.environ.get("WANDB_DIR") or run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    project = os.environ.get("WANDB_PROJECT", DEFAULT_WANDB_PROJECT)
    with _wandb_dirs(folder / "wandb"):
        run = _open_run(run_dir, folder, cfg if cfg is not None else run_config(info), project)
        try:
            run.summary.update(metrics)  # final values, one each: the summary, not a one-step history
            run.log({TABLE_KEY: table})
            local, offline, run_id = Path(run.sync_dir), run.offline, run.id
            where = f"offline: sync with `wandb sync {local}`" if offline else f"project {project} ({run.url})"
        finally:
            run.finish()
            # finish() returns before wandb's service has written the run's file; teardown waits for it, and
            # leaves no settings behind for a later wandb run of this process (a training run's own folder)
            wandb.teardown()
    n_images = sum(row[-1] is not None for row in table.data)
    print(
        f"wandb: logged {len(metrics)} metrics (run summary) and {len(table.data)} items ({n_images} with their "
        f"frames; {IMAGE_ROWS_ENV} sets how many) of {run_dir} as run {run_id}, {where}",
        file=sys.stderr,
        flush=True,
    )
    return local
