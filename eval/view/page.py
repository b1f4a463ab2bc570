"""Write the run browser: one static page set for one run or several runs on the same items.

:func:`write_view` writes into ``out``: ``index.html`` (the page), ``app.js`` and
``style.css`` (:mod:`.assets`, the package's ``templates/``), ``data/meta.js`` (the runs,
their reports and figures and, for several runs, :mod:`.compare`'s table of them side by
side), ``data/items-NNNN.js`` (the item table, :data:`TABLE_CHUNK` items a file) and
``data/detail-NNNN.js`` (each item's prompt, frames and posteriors, :data:`DETAIL_CHUNK` a
file, loaded when an item is opened), ``runs/K/*.png`` (each run's figures) and
``thumbs/`` (:mod:`.thumbs`). The data are JavaScript files that set globals and load by
``<script>``, since a page opened from ``file://`` may not ``fetch()`` its own JSON; nothing
is fetched from the network. Items are matched across runs by id.
Docs: "how-to/run-browser.md".
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from judgetrain.io import no_nan, write_bytes, write_text

from .assets import STATIC_FILES, index_html, static_file
from .compare import compare_table
from .items import dataset_images, load_run
from .markdown import to_html
from .thumbs import Thumbs, resolve_frames

__all__ = ["DETAIL_CHUNK", "TABLE_CHUNK", "write_pages", "write_view"]

TABLE_CHUNK = 5000
DETAIL_CHUNK = 200


def _js(name: str, *values: Any) -> str:
    # JSON is JavaScript; a call with it is loadable by <script> from file://, where fetch() is refused
    return f"{name}({','.join(json.dumps(no_nan(v), separators=(',', ':'), allow_nan=False) for v in values)});\n"


def _run_meta(k: int, run: Mapping[str, Any], name: str, out: Path) -> dict[str, Any]:
    """A run's overview: its settings, report as HTML and figures (copied into ``runs/K``)."""
    info, folder = run["info"], out / "runs" / str(k)
    folder.mkdir(parents=True, exist_ok=True)
    figures = []
    for png in sorted(Path(run["dir"]).glob("*.png")):
        write_bytes(folder / png.name, png.read_bytes())
        figures.append(f"runs/{k}/{png.name}")
    report = to_html(run["report"], lambda src: f"runs/{k}/{Path(src).name}") if run["report"] else ""
    return {
        "name": name,
        "evaluation": run["evaluation"],
        "dir": str(Path(run["dir"]).resolve()),
        "model": info.get("model"),
        "adapter": info.get("adapter"),
        "data": info.get("data") or info.get("manifest"),
        "split": info.get("split"),
        "n": len(run["items"]),
        "report": report,
        "figures": figures,
        "warnings": run["warnings"],
    }


def _summary(it: Mapping[str, Any] | None) -> list[Any] | None:
    if it is None:
        return None
    return [it["pred"], it["correct"], it["top"], it["margin"], it["flipped"]]


def _detail(it: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if it is None:
        return None
    keys = (
        "prompt",
        "prompt_kind",
        "frames",
        "frames_note",
        "choices",
        "probs",
        "pred",
        "gold",
        "correct",
        "main",
        "passes",
        "extra",
    )
    return {k: it[k] for k in keys}


def write_pages(runs: Sequence[Mapping[str, Any]], names: Sequence[str], out: str | os.PathLike) -> Path:
    """Write the page set of ``runs`` (:func:`.items.load_run`, frames already resolved to
    thumbnails) into ``out``; returns ``out/index.html``."""
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    by_run = [{it["id"]: it for it in run["items"]} for run in runs]
    ids = list(dict.fromkeys(it["id"] for run in runs for it in run["items"]))
    table, first = [], [next(r[i] for r in by_run if i in r) for i in ids]
    for i, it in zip(ids, first, strict=True):
        table.append([i, it["task"], it["source"], it["gold"], [_summary(r.get(i)) for r in by_run]])
    table_files = []
    for c, start in enumerate(range(0, max(len(table), 1), TABLE_CHUNK)):
        table_files.append(f"data/items-{c:04d}.js")
        write_text(out / table_files[-1], _js("JT.addItems", table[start : start + TABLE_CHUNK]))
    for c, start in enumerate(range(0, len(ids), DETAIL_CHUNK)):
        chunk = {i: [_detail(r.get(i)) for r in by_run] for i in ids[start : start + DETAIL_CHUNK]}
        write_text(out / f"data/detail-{c:04d}.js", _js("JT.addDetail", c, chunk))
    metas = [_run_meta(k, run, n, out) for k, (run, n) in enumerate(zip(runs, names, strict=True))]
    meta = {
        "runs": metas,
        # several runs: one table side by side (eval compare's cells) and each figure in a row, a column per run
        "compare": compare_table([r["dir"] for r in runs], names) if len(runs) > 1 else None,
        "figure_names": list(dict.fromkeys(Path(f).name for m in metas for f in m["figures"])),
        "n_items": len(ids),
        "detail_chunk": DETAIL_CHUNK,
        "tasks": sorted({str(t[1]) for t in table if t[1] is not None}),
        "sources": sorted({str(t[2]) for t in table if t[2] is not None}),
    }
    write_text(out / "data/meta.js", _js("JT.setMeta", meta))
    for name in STATIC_FILES:
        write_text(out / name, static_file(name))
    write_text(out / "index.html", index_html(" vs ".join(names), ["data/meta.js", *table_files]))
    return out / "index.html"


def write_view(
    run_dirs: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    names: Sequence[str] | None = None,
    *,
    progress: bool = True,
    store: str | os.PathLike | None = None,
) -> Path:
    """Read each run folder, make the thumbnails its items need (``store``: the shared
    thumbnail store, default :mod:`.thumbs`'), write the page set into ``out``; returns the
    ``index.html`` path. ``names``: one per run (default: the folders' names)."""
    names = list(names) if names else [Path(d).resolve().name for d in run_dirs]
    if len(names) != len(run_dirs):
        raise ValueError(f"--names gives {len(names)} name(s) for {len(run_dirs)} run(s); give one per run")
    thumbs = Thumbs(out, store)
    runs = []
    for d, name in zip(run_dirs, names, strict=True):
        run = load_run(d)
        missing = [
            it["id"]
            for it in run["items"]
            for g in it["frames"] or []
            if any(ref[0] == "sha256" and not thumbs.have(ref[1]) for ref in g["refs"])
        ]
        images = dataset_images(run["info"], list(dict.fromkeys(missing))) if missing else None
        run["warnings"] += resolve_frames(run["items"], thumbs, images, progress=progress, desc=f"thumbnails of {name}")
        runs.append(run)
    return write_pages(runs, names, out)
