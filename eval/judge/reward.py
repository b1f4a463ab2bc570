"""Reward models in ``judgetrain eval judge`` (``--mode reward``, the default for a reward model):
one scalar per PRISM pointwise record (:func:`judgetrain.scoring.reward_scores`), each record
scored once, with the run folder, identity, resume and sharding of every judge run.

A reward model is ``--model`` (a reward run folder, its base recorded in ``adapter_config.json``:
``task_type: SEQ_CLS``), ``--model BASE --adapter RUN``, or ``--model BASE --mode reward`` (a base
checkpoint with a new, untrained head: the plumbing only). The selected records must all be
pointwise records of gold sequences and their perturbations (``--tasks pointwise``): the report
pairs each gold with each of its negatives (:mod:`judgetrain.eval.core.reward_pairs`), and a
selection that cannot be paired is refused before anything loads. Each row carries the record's
``reward`` and, for the first record of each chunk written, ``reward_check``: the same record
re-scored in a batch of two next to another record of the chunk, placed first (the symmetry check,
:mod:`judgetrain.eval.judge.reward_metrics`). Metrics and report: :mod:`.reward_metrics`,
:func:`judgetrain.eval.judge.report.report`.
Docs: "concepts/prism-mirage.md", "how-to/reward-models.md".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.args import parse_batch_size
from ..core.markdown import fmt, rate
from ..core.reward_pairs import REWARD_MODE
from ..core.runs import RUN_INFO, EvalInputError, dataset_identity, run_info
from ..core.sample import sample_identity
from ..core.sharded import run_sharded
from .reward_metrics import check_tolerance, judge_pair_rows

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

__all__ = [
    "RewardScorer",
    "check_records",
    "load_reward_scorer",
    "print_reward_summary",
    "reward_mode_problems",
    "reward_rows",
    "run_reward",
]


def reward_mode_problems(cfg: Any) -> list[str]:
    """What ``eval judge``'s config (its shared fields normalised) gets wrong about reward models;
    first, the default ``score`` mode becomes ``reward`` for a reward model (``--model`` or
    ``--adapter`` a reward run folder), and ``agree_with`` an absolute path."""
    from judgetrain.models.reward import is_reward_adapter

    given = [
        f"--{name} {path}" for name, path in (("model", cfg.model), ("adapter", cfg.adapter)) if path and is_reward_adapter(path)
    ]
    if given and cfg.mode == "score":
        cfg.mode = REWARD_MODE
    problems = []
    if given and cfg.mode != REWARD_MODE:
        problems.append(
            f"mode: {cfg.mode!r} reads generated text, but {given[0]} is a reward model (adapter_config.json task_type "
            "SEQ_CLS: one number per sequence); leave --mode out, or pass --mode reward"
        )
    if cfg.mode != REWARD_MODE:
        if cfg.agree_with is not None:
            problems.append(
                "agree_with: only a reward model's run (--mode reward) is compared with a generative judge; leave it out"
            )
        return problems
    if cfg.adapter and not is_reward_adapter(cfg.adapter):
        problems.append(
            f"adapter: {cfg.adapter} is a generative adapter, not a reward model's (its adapter_config.json has no task_type "
            "SEQ_CLS); give a reward run folder (`judgetrain train` with method: reward), or leave --mode reward out"
        )
    if cfg.prefill:
        problems.append("prefill: a reward model scores the prompt alone, with nothing after it; leave --prefill out")
    if cfg.agree_with is not None:
        cfg.agree_with = Path(cfg.agree_with).expanduser().resolve()
        if not (cfg.agree_with / RUN_INFO).is_file():
            problems.append(
                f"agree_with: {cfg.agree_with} holds no {RUN_INFO}; give the --out of a finished "
                "`judgetrain eval judge --model JUDGE --tasks pairwise …` run on the same data"
            )
    return problems


class RewardScorer:
    """A reward model and its processor as ``run_sharded`` drives a scorer: ``device``,
    ``score(items) -> rewards`` (input order) and ``render(prompt)`` (the text scored)."""

    def __init__(self, model: Any, processor: Any, batch_size: BatchSize = "auto") -> None:
        self.model, self.processor, self.batch_size = model, processor, batch_size

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> str:
        """The weights' dtype, as torch names it without ``torch.``."""
        return str(next(self.model.parameters()).dtype).replace("torch.", "")

    def score(self, items: Sequence[Mapping[str, Any]], batch_size: BatchSize | None = None) -> list[float]:
        from judgetrain.scoring import reward_scores

        size = self.batch_size if batch_size is None else batch_size
        return reward_scores(
            self.model, self.processor, items, batch_size=size, progress=False, sort_by_length=batch_size is None
        )

    def render(self, prompt: Sequence[Mapping[str, Any]]) -> str:
        from judgetrain.scoring.prompts import render_prompt

        return render_prompt(self.processor, prompt, None)


def load_reward_scorer(
    model: str, adapter: str | None, dtype: str | None, device: str | None, batch_size: BatchSize
) -> RewardScorer:
    """The :class:`RewardScorer` of ``model`` (+ ``adapter``): a reward run folder given as either is
    loaded onto its base (``model`` overriding the recorded one when both are given); a base alone
    gets a new head. ``dtype`` None: float32 on CPU, the checkpoint's on an accelerator, as the
    generative scorer loads; ``device`` None: CUDA when available."""
    import torch

    from judgetrain.models.reward import load_reward_model

    dev = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    kwargs: dict[str, Any] = {"dtype": dtype or ("float32" if dev.type == "cpu" else "auto")}
    if dev.type != "cpu":
        kwargs["device_map"] = str(dev)
    m, processor = load_reward_model(adapter, base=model, **kwargs) if adapter else load_reward_model(model, **kwargs)
    return RewardScorer(m, processor, batch_size)


def _reward_row(
    record: Mapping[str, Any], reward: float, model: str, adapter: str | None, subset: Callable[..., str] | None
) -> dict[str, Any]:
    meta = json.loads(record.get("meta") or "{}")
    return {
        "id": record["id"],
        "task": record["task"],
        "source": record["source"],
        "subset": subset(record, meta) if subset is not None else None,
        "layout": record["layout"],
        "perturbation": record["perturbation"],
        "position": record["position"],
        "n_frames": record["n_frames"],
        "gold_id": meta.get("gold_id"),
        "variant": meta.get("variant"),
        "score": meta.get("score"),
        "label": record["label"],
        "method": "reward",
        "reward": float(reward),
        "reward_check": None,
        "reward_check_tolerance": None,
        "model": model,
        "adapter": adapter,
    }


def reward_rows(
    scorer: Any,
    items: Sequence[Mapping[str, Any]],
    *,
    model: str = "",
    adapter: str | None = None,
    subset: Callable[..., str] | None = None,
) -> list[dict[str, Any]]:
    """Prediction rows of ``items`` (pointwise records), in order, each with its ``reward``; the first
    also with ``reward_check`` (re-scored in a batch of two after the last item, unsorted) and the
    tolerance its difference must meet. ``scorer``: a :class:`RewardScorer` (or anything with its
    ``score`` and ``dtype``); ``subset(record, meta)``: the row's subset name (None: not recorded)."""
    rows = [_reward_row(r, x, model, adapter, subset) for r, x in zip(items, scorer.score(items), strict=True)]
    if rows:
        again = scorer.score([items[-1], items[0]] if len(items) > 1 else [items[0]], batch_size=2)[-1]
        rows[0]["reward_check"] = float(again)
        rows[0]["reward_check_tolerance"] = check_tolerance(scorer.dtype, rows[0]["reward"])
    return rows


def check_records(
    ds: Any,
    idx: Sequence[int],
    data: Path,
    split: str,
    limit: int | None,
    subsets: Sequence[str] | None,
    *,
    sample: int | None = None,
) -> None:
    """Refuse a selection a reward run cannot pair, naming the fix: records that are not pointwise,
    or pointwise records that are no gold sequence with its perturbations."""
    from judgetrain.pairs import PairError, sequence_pairs

    cols = ds.select(idx).select_columns(["id", "task", "source", "layout", "perturbation", "meta"])
    other = Counter(t for t in cols["task"] if t != "pointwise")
    if other:
        raise EvalInputError(
            f"{data} [{split}]: a reward model scores one sequence per record and is evaluated on each gold sequence "
            f"against its perturbations, from PRISM pointwise records; the selection also holds "
            f"{', '.join(f'{n} {t}' for t, n in other.items())} record(s): pass --tasks pointwise"
        )
    try:
        pairs = sequence_pairs(cols["task"], cols["source"], cols["layout"], cols["perturbation"], cols["meta"], cols["id"])
    except PairError as e:
        cut = [f"--limit {limit} may cut a gold sequence off from its perturbations: raise it or leave it out"] if limit else []
        if sample:
            cut.append(f"--sample {sample} draws records one by one and may leave a gold sequence out: use --subsets instead")
        if subsets and "PRISM-Coherent" not in subsets:
            cut.append("--subsets leaves the gold sequences (PRISM-Coherent) out: add PRISM-Coherent")
        raise EvalInputError(f"{data} [{split}]: {e}" + "".join(f" ({c})" for c in cut)) from None
    if not pairs:
        raise EvalInputError(f"{data} [{split}]: the selected pointwise records hold no perturbed sequence to pair with its gold")


def run_reward(
    cfg: Any, state: Any, ds: Any, idx: Sequence[int], order: Sequence[str], *, evaluation: str, subset: Callable[..., str]
) -> dict[str, Any]:
    """:func:`judgetrain.eval.judge.command.run` for a reward model (``cfg.mode == "reward"``): the
    records ``idx`` of split ``ds`` (ids ``order``) checked, scored and reported into ``cfg.out``
    as a run of ``evaluation``, each row's subset named by ``subset(record, meta)``."""
    from .report import report

    check_records(ds, idx, cfg.data, cfg.split, cfg.limit, cfg.subsets, sample=cfg.sample)
    info = run_info(
        evaluation,
        cfg,
        data=dataset_identity(cfg.data, [cfg.split]),
        items=[order[i] for i in idx],
        world_size=state.num_processes,
        sampling=sample_identity(cfg),
    )
    info["data"] = str(cfg.data.resolve())
    if cfg.agree_with is not None:  # refused now, not after scoring: not a judge's run, or on other data
        judge_pair_rows(cfg.agree_with, info)
    position = {rid: i for i, rid in enumerate(order)}
    from judgetrain import records  # datasets: not loaded for --help

    def score(scorer: RewardScorer, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows = reward_rows(scorer, items, model=cfg.model, adapter=cfg.adapter, subset=subset)
        frames = records.frame_digests(ds, [position[r["id"]] for r in items])
        return [
            {**row, "prompt_text": scorer.render(r["prompt"]), "frames": f} for row, r, f in zip(rows, items, frames, strict=True)
        ]

    batch_size = parse_batch_size(cfg.batch_size)
    return run_sharded(
        state,
        cfg.out,
        info,
        ds,
        idx,
        order,
        score,
        report,
        model=cfg.model,
        adapter=cfg.adapter,
        dtype=cfg.dtype,
        batch_size=batch_size,
        desc="judge (reward)",
        progress=cfg.progress,
        overwrite=cfg.overwrite,
        load=lambda device: load_reward_scorer(cfg.model, cfg.adapter, cfg.dtype, device, batch_size),
        unit="sequence",
        always_report=True,  # cheap, and --agree-with (not identity) may have changed
    )


def print_reward_summary(metrics: Mapping[str, Any]) -> None:
    """The console summary of a reward run: pair accuracy per perturbation kind, the symmetry check, the agreement."""
    from rich.console import Console
    from rich.table import Table

    rw = metrics["reward"]
    t = Table(title=f"Reward model — {rw['n_pairs']} gold-vs-negative pairs (%; gold strictly higher, Wilson 95%)")
    for c in ("perturbation", "Acc", "ties", "n"):
        t.add_column(c, justify="left" if c == "perturbation" else "right")
    for kind, c in [*rw["by_perturbation"].items(), ("all", rw["all"])]:
        t.add_row(kind, rate(c["accuracy"], c["ci95"], c["n"]), str(c["ties"]), str(c["n"]))
    console = Console()
    console.print(t)
    s = rw["symmetry"]
    verdict = {True: "passed", False: "FAILED", None: "not run"}[s["passed"]]
    console.print(
        f"Symmetry check ({verdict}): {s['n_checked']} sequence(s) re-scored in another batch, largest difference "
        f"{fmt(s['max_abs_diff'], 8)}, {s['n_failed']} over tolerance"
    )
    a = rw.get("agreement")
    if a:
        g = a["agree"]
        console.print(f"Agreement with the generative judge: {rate(g['rate'], g['ci95'], g['n'])}")
