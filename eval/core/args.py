"""What every model evaluation (``judgetrain eval timecatch|judge|phasefusion``) takes: the
fields its typed config inherits (``--prefill`` and ``--report_to`` among them), and ``--batch-size``'s two forms.
Docs: "reference/configuration.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from judgetrain.config import arg, comma_list, one_of
from judgetrain.models.registry import DTYPES

from .wandb_report import REPORT_TO

if TYPE_CHECKING:
    from judgetrain.scoring import BatchSize

__all__ = ["EvalArgs", "ReportToArgs", "parse_batch_size"]


@dataclass(kw_only=True)
class ReportToArgs:
    """``--report_to``: where a finished run is also logged (every model evaluation, and ``eval report``)."""

    # transformers' TrainingArguments spelling; not identity: where a run is logged never changes its results
    report_to: list[str] | None = arg(
        None,
        "wandb: also log the finished run's metrics and a table of its items (frames, "
        "prompt, gold, prediction, posterior) to wandb, offline into OUT/wandb "
        "without an API key (`wandb sync` later); none (the default): only the "
        "run folder",
    )

    def report_to_problems(self) -> list[str]:
        """Normalise ``report_to`` to a list (``[]`` for none) and return its problems."""
        self.report_to = [] if self.report_to in (None, "none") else comma_list(self.report_to)
        unknown = [r for r in self.report_to if r not in REPORT_TO]
        self.report_to = [r for r in self.report_to if r != "none"]
        return [f"report_to: {', '.join(map(repr, unknown))}; evaluations report to {one_of(REPORT_TO)}"] if unknown else []


# an evaluation writes no checkpoint: a peer silent this long is hung, not busy
EVAL_COLLECTIVE_TIMEOUT = 600


@dataclass(kw_only=True)
class EvalArgs(ReportToArgs):
    """What every model evaluation (``judgetrain eval timecatch|judge|phasefusion``) takes."""

    model: str = arg(help="model folder or hub id (base or merged)", identity=True)
    out: Path = arg(help="run folder; rerunning the same command resumes it")
    adapter: str | None = arg(None, "PEFT adapter folder to load onto --model", identity=True)
    dtype: str | None = arg(
        None,
        f"{one_of([*(d for d in DTYPES if d != 'auto'), 'auto'])} (default: float32 on CPU, the checkpoint's on GPU)",
        identity=True,
    )
    prefill: str | None = arg(
        None,
        "text after the generation prompt, scored or generated after; default: the model's "
        "own (a reasoning checkpoint whose chat template opens a thinking block gets what "
        "closes it, e.g. '\\n</think>\\n\\n' for Qwen3-VL-*-Thinking; other models "
        "none); '' (or 'none') for none; any other text is used as given (newlines: $'...' "
        "in bash, or a --config file); 'family' is the default's old name",
        identity=True,
    )
    batch_size: str = arg("auto", "items per forward pass, or 'auto'")
    limit: int | None = arg(None, "evaluate only the first N selected items, in dataset order (a larger N later extends the run)")
    sample: int | None = arg(
        None,
        "evaluate a seeded sample of N selected items, every stratum (task × source × perturbation × layout) "
        "in it before any twice, then in proportion: a smoke test of the whole set (a larger N later extends the run)",
    )
    sample_seed: int = arg(0, "seed of --sample (recorded in the run identity with the strata)")
    overwrite: bool = arg(False, "start the run folder afresh when it holds a run of another configuration")
    wait: bool = arg(
        False,
        "when another process is writing --out, wait until it has finished instead of stopping at once (docs: concepts/identity.md)",
    )
    progress: bool = arg(True, "progress bars (--no-progress to silence them)")
    collective_timeout: int = arg(
        EVAL_COLLECTIVE_TIMEOUT,
        "several processes: seconds a process waits for the others at a collective (the merge, a barrier) before the "
        "run stops with an error; a hung machine ends the job after this long (training's ddp_timeout is 1800)",
        minimum=1,
    )

    def common_problems(self) -> list[str]:
        """Normalise the shared fields and return their problems (each evaluation's
        ``__post_init__`` adds its own and raises them together)."""
        self.model, self.out = str(self.model), Path(self.out)
        self.adapter = str(self.adapter) if self.adapter else None
        self.batch_size = str(self.batch_size)
        problems = []
        if self.prefill is not None and not isinstance(self.prefill, str):
            problems.append(
                f"prefill: {self.prefill!r}; give the text to append (a string), '' for none, or leave it out for the model's own"
            )
        elif self.prefill in ("family", "none"):  # the words `eval phasefusion --prefill` took before
            self.prefill = None if self.prefill == "family" else ""
        problems += self.report_to_problems()
        if self.limit is not None and self.limit < 1:
            problems.append(f"limit: {self.limit}; must be at least 1 (leave it out to evaluate every selected item)")
        if self.sample is not None and self.sample < 1:
            problems.append(f"sample: {self.sample}; must be at least 1 (leave it out to evaluate every selected item)")
        if self.sample is not None and self.limit is not None:
            problems.append(
                f"limit: {self.limit} and sample: {self.sample}; give one (--limit: the first N items, --sample: a stratified sample)"
            )
        try:
            parse_batch_size(self.batch_size)
        except ValueError as e:
            problems.append(f"batch_size: {e}")
        return problems


def parse_batch_size(text: str) -> BatchSize:
    """``--batch-size``: a positive integer or ``"auto"``."""
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"--batch-size must be a positive integer or 'auto', got {text!r}")
    return value
