"""Browse evaluation runs item by item in a static site: reports, figures, each item's frames and answers.

``judgetrain eval view RUN [RUN …] [--out DIR]``.

Writes one static page set (:func:`judgetrain.eval.view.page.write_view`) that opens from disk
or from any plain web server, with no network: the runs' reports and figures, a table of
their items (filter, sort, page) and each item's frames, prompt and posteriors, several runs
side by side. Prints the path of its ``index.html``.
Docs: "reference/commands/eval-view.md", "how-to/run-browser.md".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import ConfigError, arg, comma_list
from judgetrain.config import make_parser as make_config_parser
from judgetrain.records import BUILD_FILE

from ..core.runs import PREDICTIONS, RUN_INFO

__all__ = ["ViewConfig", "main", "make_parser", "run_problem"]


@dataclass(kw_only=True)
class ViewConfig:
    """``judgetrain eval view``."""

    runs: list[Path] = arg(
        help="run folders (the --out of `judgetrain eval …` runs on the same items); also the leading bare words", positional=True
    )
    out: Path | None = arg(None, "folder to write the page set into (default: RUN/view for one run; needed for several)")
    names: list[str] | None = arg(None, "display names, one per run (default: the folder names)")
    progress: bool = arg(True, "progress bars (--no-progress to silence them)")

    def __post_init__(self) -> None:
        self.runs = [Path(r) for r in self.runs]
        self.names = comma_list(self.names) if self.names else None
        problems = []
        if not self.runs:
            problems.append("runs: give at least one run folder")
        if self.out is None and len(self.runs) > 1:
            problems.append(f"out: {len(self.runs)} runs need --out DIR (one run defaults to RUN/view)")
        if self.names is not None and len(self.names) != len(self.runs):
            problems.append(f"names: {len(self.names)} name(s) for {len(self.runs)} run(s); give one per run")
        problems += [p for p in map(run_problem, self.runs) if p]
        if problems:
            raise ConfigError(problems, "eval view configuration")
        if self.out is None:
            self.out = self.runs[0] / "view"
        self.out = Path(self.out)


# the evaluation that reads a builder's output (build.json's "builder"), and how it is given
EVALUATION_OF = {"timecatch": "timecatch", "prism": "judge", "mirage": "judge", "ordering-probe": "judge", "rationales": "judge"}
INPUT_OF = {"video-mcq": ("phasefusion", "--manifest {}/manifest.jsonl")}


def run_problem(run: Path) -> str | None:
    """Why ``run`` is not an evaluation's run folder (checked before anything is written,
    since the page set goes into ``RUN/view`` by default), or ``None``."""
    if not run.exists():
        return f"runs: {run}: no such folder; give the --out folder of a `judgetrain eval …` run"
    if not run.is_dir():
        return f"runs: {run} is a file, not a run folder; give the --out folder of a `judgetrain eval …` run"
    if (run / BUILD_FILE).is_file():
        try:
            builder = json.loads((run / BUILD_FILE).read_text()).get("builder")
        except (OSError, ValueError, AttributeError):
            builder = None
        evaluation, given = INPUT_OF.get(str(builder), (EVALUATION_OF.get(str(builder), "…"), "--data {}"))
        made = f"`judgetrain build {builder}`" if builder else "a `judgetrain build`"
        command = f"judgetrain eval {evaluation} --model MODEL {given.format(run)} --out results/RUN"
        return (
            f"runs: {run} is a dataset folder ({BUILD_FILE} found: {made} wrote it), not an evaluation run; "
            f"evaluate a model on it first (`{command}`), then view the run: `judgetrain eval view results/RUN`"
        )
    if not (run / PREDICTIONS).is_file():
        if (run / RUN_INFO).is_file():
            return (
                f"runs: {run} holds {RUN_INFO} but no {PREDICTIONS} yet: the run stopped before its first item; "
                f"rerun its command (in {RUN_INFO}) to resume it, then view it"
            )
        return (
            f"runs: {run} holds no {PREDICTIONS}, so it is not a run folder; give the --out folder of a `judgetrain eval …` run"
        )
    return None


def make_parser():
    return make_config_parser(
        ViewConfig,
        "judgetrain eval view",
        "Write a static page set to browse evaluation runs item by item (frames, prompt, posteriors).",
        "examples:\n  judgetrain quickstart        # first: a zero-shot and a LoRA run under quickstart/results\n"
        "  judgetrain eval view quickstart/results/zero-shot     # -> quickstart/results/zero-shot/view/index.html\n"
        "  judgetrain eval view quickstart/results/zero-shot quickstart/results/lora --names base,lora "
        "--out quickstart/results/view\n"
        "\nopen the printed index.html in a browser (from disk, or `python -m http.server` in its folder).\n",
    )


def main(cfg: ViewConfig) -> int:
    from .page import write_view

    assert cfg.out is not None  # __post_init__ defaults it to RUN/view
    index = write_view(cfg.runs, cfg.out, cfg.names, progress=cfg.progress)
    print(f"Run page: {index}", flush=True)
    return 0
