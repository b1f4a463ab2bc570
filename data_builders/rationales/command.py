"""``judgetrain build rationales``: distil a teacher's step-level rationale and answer for every pairwise and
pointwise record of a built PRISM / MIRAGE dataset into two SFT datasets, ``with_rationale`` and
``score_only`` (paper 002 §5E, F.1, Table S6). This module is the command (parser, build, main); its config
is :mod:`.config`, the prompts and answer checks :mod:`.prompts`, items and the answer cache
:mod:`.items`, the teachers :mod:`.teachers`, records, statistics and the summary :mod:`.export`.

Docs: "reference/commands/build-rationales.md", "concepts/prism-mirage.md".
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from judgetrain import records
from judgetrain.config import make_parser as make_config_parser

from ..core.common import BuildError
from ..core.identity import build_identity
from ..core.outfolder import already_built
from .config import BUILDER, VERSION, RationaleConfig
from .export import EXPORT_FILE, PLOT_FILE, VARIANTS, plot_answers, print_summary, sft_rows, statistics, write_export
from .items import Item, TeacherCache, TeacherRun, collect_items
from .prompts import BASE_INSTRUCTIONS
from .teachers import RETRY_STATUS_CODES, make_teacher

__all__ = ["Distillation", "build", "main", "make_parser"]


# --------------------------------------------------------------------------- the build


@dataclass(frozen=True)
class Distillation:
    """One teacher run over the source dataset and what ``build.json`` reports about it."""

    data: Path
    builder: str
    src_info: dict
    splits: list[str]
    items: list[Item]
    run: TeacherRun
    stats: dict
    failures: list[dict]  # records without a usable answer: {"id", "split", "reason"}
    disagree: list[dict]  # --target gold: records left out because the teacher disagrees
    teacher: dict  # name, label, model (and the retry policy for gemini)


def read_source(data: Path, splits: Sequence[str]) -> tuple[dict, str, dict, list[str]]:
    """The source's build info, builder, dataset and the splits to distil; BuildError
    for a dataset no rationale prompt is written for, or an unknown split."""
    src_info = records.read_build_info(data)
    builder = src_info.get("builder")
    if builder not in BASE_INSTRUCTIONS:
        raise BuildError(
            f"--data {data} was built by {builder!r}; rationales are distilled for {sorted(BASE_INSTRUCTIONS)} "
            "datasets (`judgetrain build prism` / `judgetrain build mirage`)"
        )
    source = records.load(data)
    splits = list(splits or source)
    if [s for s in splits if s not in source]:
        raise BuildError(f"--splits {','.join(splits)}: {data} has the splits {sorted(source)}")
    return src_info, builder, source, splits


def choices_by_id(source) -> dict[str, tuple[str, ...]]:
    """id -> choices over every split of the source dataset (what a replay line is checked against)."""
    all_ids: dict[str, tuple[str, ...]] = {}
    for ds in source.values():
        cols = ds.select_columns(["id", "choices"]).to_dict()
        all_ids.update(zip(cols["id"], map(tuple, cols["choices"]), strict=True))
    return all_ids


def failed_records(items: Sequence[Item], run: TeacherRun, strict: bool) -> list[dict]:
    """The records without a usable teacher answer, in item order; ``strict``: BuildError when there is any."""
    failures = [{"id": i.id, "split": i.split, "reason": run.failures[i.id]} for i in items if i.id in run.failures]
    if failures and strict:
        raise BuildError(
            f"--strict: {len(failures)} record(s) got no usable teacher answer (first: {failures[0]['id']}: "
            f"{failures[0]['reason']}); rerun (the cache keeps every finished answer) or drop --strict to "
            "leave them out"
        )
    return failures


def disagreements(items: Sequence[Item], run: TeacherRun, target: str) -> list[dict]:
    """``--target gold``: the answered records whose teacher answer differs from gold (they are left out)."""
    return [
        {"id": i.id, "split": i.split, "reason": f"disagree: teacher {run.answers[i.id].answer}, gold {i.label}"}
        for i in items
        if i.id in run.answers and target == "gold" and run.answers[i.id].answer != i.label
    ]


def teacher_description(cfg: RationaleConfig, teacher) -> dict:
    """The teacher as build.json records it; for gemini with the SDK retry policy the build used."""
    info = {"name": teacher.name, "label": teacher.label, "model": getattr(teacher, "model", None)}
    if cfg.teacher == "gemini":
        info["retry"] = {
            "attempts": cfg.attempts,
            "initial_delay_s": cfg.retry_delay,
            "max_delay_s": 60.0,
            "exp_base": 2.0,
            "jitter_s": cfg.retry_delay,
            "status_codes": list(RETRY_STATUS_CODES),
            "timeouts_and_connection_errors": True,
        }
    return info


def teacher_counts(d: Distillation) -> dict:
    """Records asked, answered, failed; bad lines, disagreements, cache hits, calls, HTTP requests and tokens."""
    run, items = d.run, d.items
    tokens: Counter[str] = Counter()
    for a in run.answers.values():
        tokens.update({k: v for k, v in a.usage.items() if isinstance(v, int)})
    return {
        "asked": len(items),
        "answered": len(run.answers),
        "failed": len(d.failures),
        "bad_lines": len(run.skipped),
        "success_rate": len(run.answers) / len(items) if items else None,
        "disagree": len(d.disagree),
        "cache_hits": run.counters["cache_hits"],
        "calls": run.counters["calls"],
        "http_requests": run.counters["http_requests"],
        "tokens": dict(sorted(tokens.items())),
    }


def plan_rows(d: Distillation, split: str, target: str) -> list[dict]:
    """What :func:`sft_rows` needs of each SFT record of ``split``: source row index, the teacher's answer and the target."""
    left_out = {x["id"] for x in d.disagree}
    rows = []
    for i in d.items:
        if i.split != split or i.id not in d.run.answers or i.id in left_out:
            continue
        a = d.run.answers[i.id]
        rows.append(
            {
                "index": i.index,
                "rationale": a.rationale,
                "answer": a.answer,
                "teacher": a.teacher,
                "target_answer": a.answer if target == "teacher" else i.label,
            }
        )
    return rows


def variant_splits(cfg: RationaleConfig, d: Distillation, variant: str, work: Path) -> dict:
    """The SFT splits of ``variant``; a split without one answered record is left out."""
    import datasets

    splits_out = {}
    for split in d.splits:
        rows = plan_rows(d, split, cfg.target)
        if not rows:  # an empty split saves as no shard at all, which load_from_disk then cannot read back
            continue
        plan_json = json.dumps({"variant": variant, "target": cfg.target, "rows": rows}, sort_keys=True)
        splits_out[split] = datasets.Dataset.from_generator(
            sft_rows,
            features=records.FEATURES,
            cache_dir=str(work),
            gen_kwargs={"data": str(d.data), "builder": d.builder, "split": split, "plan_json": plan_json},
            fingerprint=records.make_id(BUILDER, variant, split, d.src_info["splits"][split]["content_hash"], plan_json),
        )
    return splits_out


def variant_info(cfg: RationaleConfig, d: Distillation, variant: str, n_records: dict, counts: dict) -> dict:
    """The ``build.json`` of one variant."""
    src_info = d.src_info
    return {
        "builder": BUILDER,
        "version": VERSION,
        "variant": variant,
        "seed": src_info.get("seed"),
        "args": cfg.args_json(),
        "source": {
            "path": str(d.data),
            "builder": d.builder,
            "version": src_info.get("version"),
            "splits": {s: src_info["splits"][s]["content_hash"] for s in d.splits},
        },
        "teacher": d.teacher,
        "protocol": {
            "target": cfg.target,
            "completion": "rationale, newline, 'Answer: X'" if variant == "with_rationale" else "X alone",
            "instruction": (
                "the source's, its commit-first sentence replaced by REASON_FIRST + ANSWER_LINE"
                if variant == "with_rationale"
                else "the source's, unchanged"
            ),
            "label": "the teacher's answer (meta.gold_label keeps the builder's)"
            if cfg.target == "teacher"
            else "the builder's label; records where the teacher disagrees are left out",
        },
        "counts": {"records": n_records, "teacher": counts},
        "statistics": d.stats,
        "failures": d.failures,
        "skipped": d.disagree + [asdict(s) for s in d.run.skipped],
    }


def write_variants(cfg: RationaleConfig, d: Distillation, out: Path) -> dict[str, dict]:
    """Save ``OUT/with_rationale`` and ``OUT/score_only``; returns ``{variant: build.json}``."""
    import datasets

    counts = teacher_counts(d)
    work = out.with_name(out.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    infos = {}
    for variant in VARIANTS:
        splits_out = variant_splits(cfg, d, variant, work)
        info = variant_info(cfg, d, variant, {s: len(x) for s, x in splits_out.items()}, counts)
        infos[variant] = records.save(
            datasets.DatasetDict(splits_out), out / variant, info, identity=build_identity(cfg, BUILDER, VERSION)
        )
    shutil.rmtree(work, ignore_errors=True)
    return infos


def build(cfg: RationaleConfig) -> dict[str, dict]:
    """Ask the teacher, write both SFT datasets; returns ``{variant: build.json}``."""
    cfg.check()
    if (done := already_built(cfg, BUILDER, VERSION, parts=VARIANTS, keep=("cache",))) is not None:  # nothing to do
        return done
    data, out = Path(cfg.data), Path(cfg.out).resolve()
    src_info, builder, source, splits = read_source(data, cfg.splits)
    teacher = make_teacher(cfg, TeacherCache(cfg.cache or out / "cache"), choices_by_id(source))
    items = collect_items(data, builder, splits, cfg.limit, teacher)
    run = teacher.run(items, data, cfg.progress)
    for s in run.skipped:
        print(f"warning: skipped {s}", file=sys.stderr)

    stats = statistics(items, run)
    failures = failed_records(items, run, cfg.strict)
    d = Distillation(
        data,
        builder,
        src_info,
        splits,
        items,
        run,
        stats,
        failures,
        disagreements(items, run, cfg.target),
        teacher_description(cfg, teacher),
    )
    infos = write_variants(cfg, d, out)
    write_export(out / EXPORT_FILE, items, run)
    if run.answers:
        plot_answers(stats, out / PLOT_FILE)
    else:
        (out / PLOT_FILE).unlink(missing_ok=True)
    return infos


# --------------------------------------------------------------------------- CLI


def make_parser():
    """The ``judgetrain build rationales`` parser: every :class:`RationaleConfig` field a flag and a ``--config`` key."""
    return make_config_parser(
        RationaleConfig,
        "judgetrain build rationales",
        "Distil a teacher's step-level rationales and answers for a PRISM / MIRAGE dataset into two SFT datasets "
        "(paper 002 §5E, F.1): OUT/with_rationale (rationale, then 'Answer: X') and OUT/score_only (X).",
        "examples:\n"
        "  python -m judgetrain.models.tiny --out quickstart/models --family qwen3-vl     # a (tiny, random) local teacher\n"
        "  judgetrain build prism --out data/prism-teach --synthetic 12 --layouts P0,P6\n"
        "  judgetrain build rationales --data data/prism-teach --out data/prism-teach-local --teacher local --model quickstart/models/qwen3-vl \\\n"
        "      --limit 2 --max-new-tokens 8\n"
        "  judgetrain build rationales --data data/prism-teach --out data/prism-teach-replayed --teacher replay --replay data/prism-teach-local/rationales.jsonl \\\n"
        "      --limit 2\n"
        "\nGemini (the paper's teacher): --teacher gemini --rpm 300 --workers 8, the key from GEMINI_API_KEY (read from the\n"
        "environment only, never written anywhere); docs: concepts/prism-mirage.md.\n"
        "A killed or partly failed run: rerun the same command; finished answers come from the cache, failures are asked again.\n",
    )


def main(cfg: RationaleConfig) -> int:
    """Build, then print the summary; 0 on success (a problem raises BuildError)."""
    infos = build(cfg)
    print_summary(infos, Path(cfg.out))
    return 0
