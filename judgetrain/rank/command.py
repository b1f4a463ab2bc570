"""Rank candidate image sequences with a trained reward model (best-of-N) and write their scores.

``judgetrain score --reward-model RUN --sequences MANIFEST --out DIR`` reads the candidate
manifest (:mod:`.manifest`), shows every candidate to the reward model as its training sequences
were shown (:mod:`.render`), scores each alone and ranks the candidates of each group (1 = the
highest reward). ``--out`` gets ``scores.jsonl`` (a line per candidate, in manifest order: id,
group, reward, rank, whether it is its group's pick, the reward model and its adapter's sha256,
the layout, the frames, the manifest's extra keys), ``best.jsonl`` (each group's pick),
``ranking.md`` (a table per group) and ``run.json``: what identifies the results (the adapter and
its base by content, the manifest's and every frame's sha256, the layout, dtype and pixel
bounds). A rerun with the same identity finds the results there and scores nothing; another one
into the folder is refused naming what differs, unless ``--overwrite``. The command holds
``--out``'s writer lock (:mod:`judgetrain.writer`) while it looks and writes.
Docs: "reference/commands/score.md", "how-to/reward-models.md".
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgetrain.config import ConfigError, arg
from judgetrain.errors import UserError

__all__ = ["OUTPUTS", "ScoreConfig", "ScoreOutError", "main", "make_parser", "score"]

SCORES, BEST, RANKING, RUN_INFO = "scores.jsonl", "best.jsonl", "ranking.md", "run.json"
OUTPUTS = (SCORES, BEST, RANKING, RUN_INFO)
COMMAND = "score"
SHOWN_GROUPS = 20  # groups printed after a run (ranking.md holds them all)


class ScoreOutError(UserError, FileExistsError):
    """``--out`` holds another ranking, or overlaps an input; the message says what differs and the ways out."""


@dataclass
class ScoreConfig:
    """``judgetrain score``'s options."""

    reward_model: Path = arg(
        help="a trained reward model: the output folder of a `method: reward` run of `judgetrain train` (or a checkpoint-N in it)",
        identity=True,
    )
    sequences: Path = arg(
        help='candidate manifest, JSON Lines: {"id", "group", "frames": [image paths], optional "title", "steps"} per line',
        identity=True,
    )
    out: Path = arg(help="folder for scores.jsonl, best.jsonl, ranking.md and run.json")
    base: str | None = arg(None, "base model folder or hub id, where the one the reward model records has moved")
    layout: str = arg(
        "auto",
        "PRISM pointwise layout the candidates are shown in (P0, P1, P2, P3, P5, P6); auto: the one the reward model "
        "trained on (its recipe's layouts or its datasets' build.json), P0 when it records none",
        identity=True,
    )
    dtype: str = arg("auto", "dtype to load the reward model in (auto: the checkpoint's; float32, bfloat16, …)", identity=True)
    batch_size: str = arg("auto", "candidates per forward pass: a positive integer, or auto (halved on out-of-memory)")
    min_pixels: int | None = arg(None, "smallest image area the processor resizes to (None: the processor's)", identity=True)
    max_pixels: int | None = arg(None, "largest image area the processor resizes to (None: the processor's)", identity=True)
    overwrite: bool = arg(False, "replace the ranking in --out when it holds another one (other files there stay)")
    wait: bool = arg(False, "when another process is writing --out, wait until it has finished instead of stopping at once")
    progress: bool = arg(True, "show progress bars (--no-progress: none)")


def _problems(cfg: ScoreConfig) -> list[str]:
    from judgetrain.data_builders.prism.layouts import POINTWISE_LAYOUTS
    from judgetrain.errors import did_you_mean

    problems = []
    if cfg.layout != "auto" and cfg.layout not in POINTWISE_LAYOUTS:
        problems.append(
            f"--layout {cfg.layout!r}: choose auto or one of {', '.join(POINTWISE_LAYOUTS)}"
            f"{did_you_mean(cfg.layout, POINTWISE_LAYOUTS)}"
        )
    if cfg.batch_size != "auto" and not (cfg.batch_size.isdigit() and int(cfg.batch_size) >= 1):
        problems.append(f"--batch-size {cfg.batch_size!r}: give a positive integer or auto")
    return problems


def score_identity(cfg: ScoreConfig, layout: str, candidates: Sequence[Any]) -> dict[str, Any]:
    """What the results depend on: the reward model's adapter and its base by content, the
    manifest's bytes and every frame's (in manifest order), the layout and how the model loads."""
    import torch

    from judgetrain.eval.core.runs import resolved_dtype
    from judgetrain.identity import adapter_identity, files_identity, model_identity, sha256_file
    from judgetrain.models.adapters import adapter_base

    frames = [f for c in candidates for f in c.frames]
    base = adapter_base(cfg.reward_model, cfg.base)
    return {
        "reward_model": {"adapter": adapter_identity(cfg.reward_model), "base": model_identity(base)},
        "sequences": {"sha256": sha256_file(cfg.sequences), "frames": files_identity(frames)},
        "layout": layout,
        # as it loads: "auto" is the checkpoint's own dtype, so `--dtype float32` of a float32 checkpoint is the same run
        "dtype": resolved_dtype(cfg.dtype, base, "cuda" if torch.cuda.is_available() else "cpu"),
        "min_pixels": cfg.min_pixels,
        "max_pixels": cfg.max_pixels,
    }


def _done(out: Path, identity: Mapping[str, Any], overwrite: bool) -> bool:
    """Whether ``out`` holds these very results (nothing to do); another ranking there is refused
    (:class:`ScoreOutError`, naming each difference old → new) unless ``overwrite``."""
    from judgetrain.identity import differences

    if out.exists() and not out.is_dir():
        raise ScoreOutError(f"--out {out}: a file, not a folder; give a folder for the ranking")
    info_file = out / RUN_INFO
    if not info_file.is_file():
        return False
    try:
        old = json.loads(info_file.read_text())
    except ValueError:
        old = {}
    same = old.get("command") == COMMAND and old.get("identity") == identity
    if same and old.get("finished") and all((out / name).is_file() for name in OUTPUTS) and not overwrite:
        return True
    if same or overwrite:
        return False
    diff = (
        differences(old.get("identity"), identity)
        if old.get("command") == COMMAND
        else [f"run.json: another command's run ({old.get('command') or old.get('evaluation') or 'unreadable'})"]
    )
    raise ScoreOutError(
        f"--out {out} holds another ranking (old → new):\n"
        + "\n".join(f"  - {d}" for d in diff)
        + f"\nWrite this one elsewhere (--out NEW_FOLDER), or pass --overwrite to replace the ranking in {out}."
    )


def _rows(cfg: ScoreConfig, candidates: Sequence[Any], ranked: Sequence[Any], layout: str) -> list[dict[str, Any]]:
    from judgetrain.identity import sha256_file

    weights = Path(cfg.reward_model) / "adapter_model.safetensors"
    digest = sha256_file(weights) if weights.is_file() else None
    rows = []
    for c, r in zip(candidates, ranked, strict=True):
        row = {"id": r.id, "group": r.group, "reward": r.reward, "rank": r.rank, "best": r.best, "group_size": r.group_size}
        row |= {"reward_model": str(cfg.reward_model), "adapter_sha256": digest, "layout": layout}
        row["frames"] = [str(f) for f in c.frames]
        if c.extra:
            row["meta"] = c.extra
        rows.append(row)
    return rows


def ranking_markdown(rows: Sequence[Mapping[str, Any]], header: str, groups: int | None = None) -> str:
    """Each group's candidates by rank (the group's pick marked ★), the first ``groups`` groups (None: all)."""
    from judgetrain.eval.core.markdown import rows_markdown

    order = list(dict.fromkeys(r["group"] for r in rows))
    shown = order if groups is None else order[:groups]
    table = [
        (str(g), str(r["rank"]), ("★ " if r["best"] else "") + str(r["id"]), f"{r['reward']:.5g}")
        for g in shown
        for r in sorted((r for r in rows if r["group"] == g), key=lambda r: (r["rank"], not r["best"]))
    ]
    more = f"\n… and {len(order) - len(shown)} more groups\n" if len(shown) < len(order) else ""
    return header + rows_markdown(("group", "rank", "candidate", "reward"), table) + more


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _write(out: Path, cfg: ScoreConfig, rows: list[dict[str, Any]], info: dict[str, Any]) -> None:
    """The results, each file written whole (:mod:`judgetrain.io`); ``run.json`` goes first (a
    killed write leaves it unfinished, so a rerun scores again) and is stamped finished last."""
    from judgetrain.config import jsonable
    from judgetrain.identity import git_state
    from judgetrain.io import write_json, write_rows, write_text

    out.mkdir(parents=True, exist_ok=True)
    git = git_state()
    info = {
        **info,
        "config": jsonable(cfg),
        "candidates": len(rows),
        "groups": len({r["group"] for r in rows}),
        "git_commit": git["commit"],
        "git_dirty": git["dirty"],
        "command_line": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "started": _now(),
        "finished": None,
    }
    write_json(out / RUN_INFO, info)
    write_rows(out / SCORES, rows)
    write_rows(out / BEST, [r for r in rows if r["best"]])
    header = (
        f"# Best-of-N ranking\n\nReward model: `{cfg.reward_model}`; candidates: `{cfg.sequences}` "
        f"({len(rows)} in {info['groups']} groups); layout {info['layout']} ({info['layout_from']}).\n"
        "Rank 1 = the highest reward; ★ = the group's pick (best.jsonl).\n\n"
    )
    write_text(out / RANKING, ranking_markdown(rows, header))
    write_json(out / RUN_INFO, {**info, "finished": _now()})


def score(cfg: ScoreConfig) -> tuple[Path, bool]:
    """Rank ``cfg.sequences`` with ``cfg.reward_model`` into ``cfg.out``; returns ``(out, scored)``,
    ``scored`` False when ``out`` already held these results."""
    from judgetrain import writer
    from judgetrain.overlap import overlap

    from .manifest import read_candidates
    from .render import choose_layout
    from .scorer import RewardModelScorer, check_reward_model, rank_rewards

    problems = _problems(cfg)
    if problems:
        raise ConfigError(problems)
    check_reward_model(cfg.reward_model)
    candidates = read_candidates(cfg.sequences)
    out = Path(cfg.out)
    clash = overlap(out, {"--reward-model": cfg.reward_model, "--sequences": cfg.sequences}, whole=False)
    if clash:
        raise ScoreOutError(clash)
    with writer.held(out, wait=cfg.wait):
        layout, why = choose_layout(cfg.layout, cfg.reward_model)
        identity = score_identity(cfg, layout, candidates)
        if _done(out, identity, cfg.overwrite):
            return out, False
        print(f"Scoring {len(candidates)} candidates in layout {layout} ({why}) with {cfg.reward_model}", flush=True)
        scorer = RewardModelScorer(
            cfg.reward_model,
            base=cfg.base,
            layout=layout,
            dtype=cfg.dtype,
            batch_size=cfg.batch_size if cfg.batch_size == "auto" else int(cfg.batch_size),
            min_pixels=cfg.min_pixels,
            max_pixels=cfg.max_pixels,
            progress=cfg.progress,
        )
        rewards = scorer(candidates)
        ranked = rank_rewards([c.id for c in candidates], [c.group for c in candidates], rewards)
        rows = _rows(cfg, candidates, ranked, layout)
        info = {"command": COMMAND, "identity": identity, "layout": layout, "layout_from": why}
        _write(out, cfg, rows, info)
    return out, True


def make_parser():
    from judgetrain.config import make_parser as make_config_parser

    return make_config_parser(
        ScoreConfig,
        "judgetrain score",
        __doc__.strip().splitlines()[0],
        "examples:\n"
        "  judgetrain quickstart   # first: the tiny models the reward recipe names\n"
        "  judgetrain build prism --out data/prism-pointwise --synthetic 8 --layouts P0 --modes pointwise\n"
        "  judgetrain train recipes/tiny/qwen3vl-prism-reward.yaml   # a tiny reward model (CPU, seconds)\n"
        "  python -m judgetrain.rank.candidates --out data/candidates --groups 3   # gold, swapped, shuffled, reversed\n"
        "  judgetrain score --reward-model runs/tiny-qwen3vl-prism-reward --sequences data/candidates/candidates.jsonl "
        "--out results/best-of-n\n",
        usage="judgetrain score --reward-model RUN --sequences MANIFEST --out DIR [--layout auto|P0…] [--overwrite] [--wait]",
    )


def main(cfg: ScoreConfig) -> int:
    out, scored = score(cfg)
    rows = [json.loads(line) for line in (out / SCORES).read_text().splitlines() if line.strip()]
    print(ranking_markdown(rows, "", SHOWN_GROUPS), end="")
    if not scored:
        print(f"Nothing to do: {out} already holds this ranking (pass --overwrite to score again)")
    print(f"Scores: {out / SCORES}; each group's pick: {out / BEST}; ranking: {out / RANKING}")
    return 0
