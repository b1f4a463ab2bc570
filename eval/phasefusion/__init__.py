"""``judgetrain eval phasefusion``: the video multiple-choice protocol of paper 001: phase-offset
frame grids with fused option posteriors, option orderings, margin flagging and the paired
statistics.

:mod:`.command` runs it (:class:`PhaseFusionConfig`, :func:`evaluate`, the CLI); the views
it scores are :mod:`judgetrain.mcq`'s; :mod:`.views` names the arms and pools their
posteriors, :mod:`.passes` scores one question, :mod:`.answers` reads each arm's answers,
:mod:`.metrics`, :mod:`.family` (the confirmatory family, LTT) and :mod:`.signals` compute the
tables, :mod:`.paired` the p rows of ``eval compare``, :mod:`.report` and :mod:`.plots` the report.
Docs: "concepts/phasefusion.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "answers": ["arm_answers", "arm_specs", "collect_rows", "per_question_answers"],
        "command": [
            "DEFAULT_ARMS",
            "EVALUATION",
            "PhaseFusionConfig",
            "evaluate",
            "finished_questions",
            "main",
            "make_parser",
            "run",
        ],
        "family": [
            "BH_ALPHA",
            "LTT_ALPHAS",
            "LTT_SIGNALS",
            "SCORING",
            "TABLE_S2",
            "certified_selection",
            "confirmatory_family",
            "tost_reference",
        ],
        "metrics": [
            "FLAG_FRACTION",
            "POSTERIOR_POOLS",
            "RATE_INTERVAL",
            "arm_cost",
            "compute_metrics",
            "flagged_fifth",
            "identity_differences",
            "rerun_floor",
        ],
        "paired": ["TESTS"],
        "passes": ["PeakMemory", "load_scorer", "score_question"],
        "plots": ["plot_accuracy_vs_cost", "plot_margin", "plot_phase_disagreement"],
        "report": ["FIGURES", "cell_counts", "cells", "print_summary"],
        "signals": ["SIGNALS", "VOTE_SHARE", "deployed_error", "reliability_signals", "signal_value", "vote_share"],
        "views": ["Arm", "NAMED_ARMS", "POOLED", "parse_arms", "parse_origins", "pool"],
    },
)
