"""PhaseFusion evaluation: video multiple-choice questions over phase-offset frame grids and option orderings (paper 001).

``judgetrain eval phasefusion`` as a command.

Its typed configuration (:class:`PhaseFusionConfig`), the resumable run loop over a
manifest's questions (:func:`run`, :func:`evaluate`) and the CLI (:func:`make_parser`,
:func:`main`). Orderings, the prompt, grids and decoding are
:mod:`judgetrain.mcq`'s, arms and pooling :mod:`judgetrain.eval.phasefusion.views`, one
question's scoring :mod:`judgetrain.eval.phasefusion.passes`, metrics and the report in
:mod:`judgetrain.eval.phasefusion.report`. Docs: "reference/commands/eval-phasefusion.md", "concepts/phasefusion.md".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from judgetrain.config import ConfigError, arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.identity import sha256_file
from judgetrain.video import SAMPLERS

from ..core.args import EvalArgs, parse_batch_size
from ..core.prefill import RunPrefill, run_prefill
from ..core.runs import run_info
from ..core.sample import sample_identity, sampled
from .views import NAMED_ARMS, parse_arms, parse_origins

__all__ = ["DEFAULT_ARMS", "PhaseFusionConfig", "evaluate", "finished_questions", "main", "make_parser", "media_identity", "run"]

EVALUATION = "phasefusion"
DEFAULT_ARMS = "single,fusion,vote,union,dense32"
# What run.json records of the device the model ran on (kept from the first run when a rerun loads no model).
_DEVICE_KEYS = ("device", "model_dtype", "memory_kind", "family")


# --------------------------------------------------------------------------- configuration


def _check_sizes(budget: int, phases: int, n_orderings: int) -> list[str]:
    """One problem per size below 1, naming the field."""
    return [
        f"{name}: must be >= 1, got {value}"
        for name, value in (("budget", budget), ("phases", phases), ("orderings", n_orderings))
        if value < 1
    ]


def _origin_parts(spec: Any) -> list[Any] | None:
    """``--origins`` as given (``"0,1/6"``, ``["0", "1/6"]``, ``[0, 0.25]``) as one list of
    values, comma-separated words split; numbers and fractions are kept as they are (a
    float such as ``1 / 6`` is read by :func:`~judgetrain.video.parse_fraction`)."""
    if spec is None:
        return None
    items = [spec] if isinstance(spec, (str, int, float, Fraction)) else list(spec)
    out: list[Any] = []
    for x in items:
        out += [p.strip() for p in x.split(",") if p.strip()] if isinstance(x, str) else [x]
    return out


@dataclass(kw_only=True)
class PhaseFusionConfig(EvalArgs):
    """``judgetrain eval phasefusion``: every field is a flag (``--field-name``) and a ``--config`` key.

    Fields marked identity (model, adapter, dtype, budget, phases, orderings, arms,
    origins, prefill, max_side), the manifest's sha256 and that of every video read
    (:func:`media_identity`) are what a run folder must agree on to resume. ``arms``
    and ``origins`` are normalised here (``origins`` ``None`` becomes its default, ``0``
    and ``1/(2S)``), so equal settings written differently are the same run."""

    manifest: Path = arg(
        help="video-MCQ manifest (JSON Lines; `judgetrain build video-mcq` writes one); its sha256 "
        "and that of every video read are part of the run's identity"
    )
    budget: int = arg(8, "frames per grid, b", identity=True)
    phases: int = arg(3, "phase grids fused, S", identity=True)
    orderings: int = arg(10, "option orderings per question, K (the identity first)", identity=True)
    arms: list[str] = arg(
        DEFAULT_ARMS.split(","),
        f"arms to score (space- or comma-separated): {', '.join(NAMED_ARMS)}, "
        f"dense<N> (e.g. dense32), and the samplers {', '.join(SAMPLERS)}",
        identity=True,
    )
    origins: list[str] | None = arg(
        None,
        "grid origins in steps of the b-frame grid, each in [0, 1) (space- or "
        "comma-separated, e.g. 0,1/6; default: 0 and the half-step shift 1/(2S))",
        identity=True,
    )
    max_side: int | None = arg(
        360,
        "resize frames so the longer side is at most this many pixels (App. A; null in a --config file: as decoded)",
        identity=True,
    )
    frame_cache: Path | None = arg(None, "folder to keep decoded frames in across runs (keyed by video and max_side)")
    latency_lines: int = arg(
        100,
        "time decoding + scoring at batch 1 (paper 001 Table S8) on the questions of the "
        "manifest's first N lines; each of their grids is decoded again and its views "
        "scored one at a time; 0 turns it off",
    )
    batch_size: str = arg("auto", "frame grids per forward pass, or 'auto' (a question's S phase grids in one batch)")
    limit: int | None = arg(
        None,
        "score only the first N questions of the manifest (a larger N later extends the "
        "run; a smaller one restricts the metrics to those N)",
    )

    def __post_init__(self) -> None:
        common = self.common_problems()  # listed after this command's own
        self.manifest = Path(self.manifest)
        self.frame_cache = Path(self.frame_cache) if self.frame_cache else None
        self.arms = comma_list(self.arms)
        problems = _check_sizes(self.budget, self.phases, self.orderings)
        try:
            arms, _ = parse_arms(self.arms, self.budget, self.phases)
            self.arms = [a.name for a in arms]
        except ValueError as e:
            problems.append(f"arms: {e}")
        try:
            self.origins = [str(o) for o in parse_origins(_origin_parts(self.origins), max(self.phases, 1))]
        except ValueError as e:
            problems.append(f"origins: {e}")
        if self.latency_lines < 0:
            problems.append(f"latency_lines: must be >= 0 (0 turns the batch-1 timing off), got {self.latency_lines}")
        if self.max_side is not None and self.max_side < 1:
            problems.append(f"max_side: must be >= 1 pixel, got {self.max_side}")
        problems += common
        if problems:
            raise ConfigError(problems, "eval phasefusion configuration")


# --------------------------------------------------------------------------- the run


def evaluate(model: str, manifest: str | os.PathLike, out: str | os.PathLike, **fields: Any) -> dict[str, Any]:
    """Score the manifest's questions under every arm, origin and ordering into run folder
    ``out``; ``fields`` are the other :class:`PhaseFusionConfig` fields (``n_orderings=`` is
    still read as ``orderings=``). See :func:`run`."""
    if "n_orderings" in fields:
        if "orderings" in fields:
            raise TypeError("evaluate() got both orderings= and its old name n_orderings=; pass orderings= only")
        fields["orderings"] = fields.pop("n_orderings")
    fields.pop("command", None)  # run.json records the command line itself
    return run(PhaseFusionConfig(model=str(model), manifest=Path(manifest), out=Path(out), **fields))


def media_identity(manifest: str | os.PathLike, questions: list[Any]) -> dict[str, str]:
    """``{video, relative to the manifest's folder: sha256}`` of the videos ``questions``
    read (:func:`judgetrain.identity.sha256_file`, cached by path, size and times): a video
    replaced in place under an unchanged manifest is other data, and byte-identical
    videos in another folder are the same. A missing video is left out (its question
    gets an error row and is retried)."""
    root = Path(manifest).resolve().parent
    out: dict[str, str] = {}
    for q in questions:
        video = Path(q.video)
        if video.is_file():
            key = os.path.relpath(video.resolve(), root)
            out[key] = out.get(key) or sha256_file(video)
    return dict(sorted(out.items()))


def finished_questions(rows: list[dict[str, Any]]) -> set[str]:
    """Ids whose closing ``question`` row is among ``rows``: the rows of any other question
    (a kill mid-question, or a question whose video failed) are redone on the next run."""
    return {r["id"] for r in rows if r.get("kind") == "question"}


class _Questions:
    """This process's share of a run: one frame cache (so each video it scores is decoded
    once), the scorer's loader and memory meter, and the questions that failed."""

    def __init__(self, cfg: PhaseFusionConfig, prefill: RunPrefill):
        from judgetrain.video import FrameCache

        self.cfg = cfg
        self.prefill = prefill
        _, self.grids = parse_arms(cfg.arms, cfg.budget, cfg.phases)
        self.origins = parse_origins(cfg.origins, cfg.phases)
        self.cache = FrameCache(cfg.max_side, cache_dir=cfg.frame_cache)
        self.memory: Any = None
        self.n_errors = 0

    def load(self, device: str | None) -> Any:
        from .passes import load_scorer

        cfg = self.cfg
        # the run's prefill as text; load_scorer reads "none" as no prefill
        scorer, self.memory = load_scorer(
            cfg.model,
            cfg.adapter,
            cfg.dtype,
            parse_batch_size(cfg.batch_size),
            self.prefill.text or "none",
            self.grids,
            cfg.budget,
            device=device,
        )
        return scorer

    def describe(self, scorer: Any) -> dict[str, Any]:
        """What run.json records of the device the model ran on."""
        return {
            "device": str(scorer.device),
            "model_dtype": str(scorer.dtype).replace("torch.", ""),
            "memory_kind": self.memory.kind,
            "family": scorer.family.name if scorer.family else None,
        }

    def predict(self, scorer: Any, questions: list[Any]) -> list[dict[str, Any]]:
        """Every row of ``questions``; a video that cannot be decoded gives that question an error row."""
        from judgetrain.mcq.frames import decode_question
        from judgetrain.mcq.manifest import ManifestError
        from judgetrain.video import VideoDecodeError

        from .passes import score_question

        rows: list[dict[str, Any]] = []
        for q in questions:
            try:
                decoded = decode_question(q, self.cache, self.grids, self.origins, self.cfg.budget, self.cfg.latency_lines)
            except (VideoDecodeError, ManifestError) as e:  # this question only: recorded, counted
                rows.append(
                    {
                        "id": q.id,
                        "kind": "error",
                        "benchmark": q.benchmark,
                        "video": str(q.video),
                        "line": q.line,
                        "error": str(e),
                    }
                )
                self.n_errors += 1
                continue
            rows += score_question(q, decoded, scorer, self.cfg.orderings, self.memory)
        return rows


def run(cfg: PhaseFusionConfig) -> dict[str, Any]:
    """Score the questions ``cfg`` selects under every arm, origin and ordering into ``cfg.out``.

    Resumable: questions whose rows are complete in the folder's predictions are
    skipped, the rows of unfinished ones removed and redone; a folder holding a run of
    another identity (settings marked identity, the manifest's content, the content of a
    video both runs read, the model, the adapter) is refused, naming what differs, unless ``cfg.overwrite``. ``run.json`` is
    written once the manifest and the model have loaded, so a run that fails before
    that leaves the folder as it was. A question whose video cannot be decoded gets an
    ``error`` row (counted in ``metrics.json``) and is retried on the next run. Under
    ``accelerate launch`` with several processes the questions still to score are
    strided over processes (each decodes its own videos once), and the main process
    merges their rows in manifest order and reports (:func:`~judgetrain.eval.core.sharded.run_sharded`).
    ``cfg.prefill``: ``None`` (the model's own: what closes the thinking block a reasoning
    checkpoint's chat template opens; :func:`~judgetrain.eval.core.prefill.run_prefill`),
    ``""`` for none, or literal text; the text used is in ``run.json``. Returns ``{"out",
    "n_questions", "n_scored", "n_errors", "world_size", "metrics"}`` (``n_questions``:
    the questions selected; ``n_scored`` / ``n_errors``: this process's, in this call;
    ``metrics`` on the main process only).
    """
    from judgetrain.mcq.manifest import load_manifest

    from ..core.sharded import process_state, run_sharded
    from .report import report

    state = process_state("judgetrain.eval.phasefusion", cfg.collective_timeout)
    questions = load_manifest(cfg.manifest)  # a bad manifest fails here, naming file:line: field
    idx = list(range(len(questions) if cfg.limit is None else min(cfg.limit, len(questions))))
    if cfg.sample is not None:  # each benchmark and answer letter in the sample before any twice
        idx = sampled(idx, [(questions[i].benchmark, questions[i].answer) for i in idx], cfg.sample, cfg.sample_seed)
    order = [q.id for q in questions]
    # the manifest's bytes and the videos' (each question's rows come from one video's content): a manifest or a
    # video rewritten in place is other data, never mixed with its old predictions
    data = {"sha256": sha256_file(cfg.manifest), "media": media_identity(cfg.manifest, [questions[i] for i in idx])}
    prefill = run_prefill(cfg.model, cfg.adapter, cfg.prefill)  # a reasoning checkpoint's, unless --prefill
    sampling = sample_identity(cfg, ("benchmark", "answer"))
    items = [order[i] for i in idx]
    info = run_info(EVALUATION, cfg, data=data, items=items, world_size=state.num_processes, prefill=prefill, sampling=sampling)
    info["manifest"] = str(cfg.manifest.resolve())
    shard = _Questions(cfg, prefill)
    # `eval report --rerun-of` stays; with no model loaded in this call, what the first run learnt of the device stays
    result = run_sharded(
        state,
        cfg.out,
        info,
        questions,
        idx,
        order,
        shard.predict,
        report,
        model=cfg.model,
        adapter=str(cfg.adapter) if cfg.adapter else None,
        dtype=cfg.dtype,
        batch_size=parse_batch_size(cfg.batch_size),
        desc="PhaseFusion",
        progress=cfg.progress,
        overwrite=cfg.overwrite,
        load=shard.load,
        describe=shard.describe,
        carry=("rerun_of", *_DEVICE_KEYS),
        finished=finished_questions,
        chunk=1,
        unit="question",
    )
    return {
        "out": result["out"],
        "n_questions": len(idx),
        "n_scored": result["n_scored"] - shard.n_errors,
        "n_errors": shard.n_errors,
        "world_size": result["world_size"],
        "metrics": result["metrics"],
    }


# --------------------------------------------------------------------------- CLI


def make_parser():
    return make_config_parser(
        PhaseFusionConfig,
        "judgetrain eval phasefusion",
        "PhaseFusion (paper 001): score video multiple-choice questions over S phase-offset frame grids and K option "
        "orderings, fuse the option posteriors, and report cost, accuracy and stability per arm (Table 1 layout).",
        "examples:\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family qwen3-vl\n"
        "  judgetrain build video-mcq --out data/vmcq-4 --synthetic 4\n"
        "  judgetrain eval phasefusion --model quickstart/models/qwen3-vl --manifest data/vmcq-4/manifest.jsonl \\\n"
        "      --budget 4 --phases 2 --orderings 2 --arms single,fusion,vote,union,dense8 --sample 2 --out results/pf-q3\n"
        "  judgetrain eval report results/pf-q3     # metrics, report and plots again, from predictions.jsonl\n"
        "  judgetrain eval phasefusion --model quickstart/models/qwen3-vl --manifest data/vmcq-4/manifest.jsonl \\\n"
        "      --budget 4 --phases 2 --orderings 2 --arms single,fusion,vote,union,dense8 --sample 2 --out results/pf-q3-again\n"
        "  judgetrain eval report results/pf-q3 --rerun-of results/pf-q3-again   # + the re-run floor across two runs\n"
        "\nthe paper's setting (Table 1) on a real checkpoint (docs: concepts/phasefusion.md).\n",
    )


def main(cfg: PhaseFusionConfig) -> int:
    from .report import print_summary

    result = run(cfg)
    if result["metrics"] is None:  # a process other than the main one of a multi-process launch
        return 0
    if result["n_scored"] == 0 and result["n_errors"] == 0:
        print("Nothing left to score: every selected question was already in predictions.jsonl.", flush=True)
    print_summary(result["metrics"], result["out"])
    return 0
