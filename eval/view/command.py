"""Browse evaluation runs item by item: ``judgetrain eval view RUN [RUN …] [--out DIR]``.

Writes one static page set (:func:`judgetrain.eval.view.page.write_view`) that opens from disk
or from any plain web server, with no network: the runs' reports and figures, a table of
their items (filter, sort, page) and each item's frames, prompt and posteriors, several runs
side by side. Prints the path of its ``index.html``.
README: "`judgetrain eval view`".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgetrain.config import ConfigError, arg, comma_list
from judgetrain.config import make_parser as make_config_parser

__all__ = ["ViewConfig", "main", "make_parser"]


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
        if problems:
            raise ConfigError(problems, "eval view configuration")
        if self.out is None:
            self.out = self.runs[0] / "view"
        self.out = Path(self.out)


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
