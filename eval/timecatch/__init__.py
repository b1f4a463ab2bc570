"""``judgetrain eval timecatch``: zero-shot and fine-tuned evaluation on TimeCatch records with
constrained answers (paper 000 §4.2, Table 2 with its Random row, §6's analyses).

:mod:`.command` runs it (:func:`evaluate`, the CLI); :mod:`.metrics` and :mod:`.tables`
compute the cells (Table 2 main and long sets, LPIPS bins, confusion), :mod:`.report` writes
``metrics.json`` and ``report.md``, :mod:`.plots` the figures, :mod:`.human` reads the human
reference accuracies (``--human``).
Docs: "concepts/timecatch.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": [
            "EVALUATION",
            "HELD_OUT_SPLITS",
            "TimeCatchEvalConfig",
            "evaluate",
            "held_out_split",
            "main",
            "make_parser",
            "prediction_row",
            "run",
        ],
        "metrics": [
            "ALL",
            "LOCALIZE_TASKS",
            "LPIPS_BIN_WIDTH",
            "SUBSETS",
            "TASK_ABBREV",
            "TASK_TITLES",
            "TIMECATCH_TASKS",
            "accuracy_table",
            "confusion",
            "lpips_bin",
            "lpips_bins",
            "subset_table",
        ],
        "plots": [
            "INTACT_COLOR",
            "SWAPPED_COLOR",
            "confusion_figure",
            "lpips_figure",
            "plot_confusion",
            "plot_lpips",
            "plot_timecatch_positions",
            "timecatch_positions_figure",
        ],
        "human": ["HumanReferenceError", "load_human"],
        "report": ["cells", "table2_markdown"],
        "tables": ["MAIN_MAX_FRAMES", "compute_metrics", "length_subset", "lpips_class_bins", "table2"],
    },
)
