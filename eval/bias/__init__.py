"""``judgetrain eval bias``: positional bias of judges (paper 002 F.3, C.3, G) from the
``predictions.jsonl`` of judge runs (:mod:`judgetrain.eval.judge`) or TimeCatch runs
(:mod:`judgetrain.eval.timecatch`): accuracy per position (PRISM Type-1, TimeCatch), first-option
and letter bias and the ordering probe's answers-by-position signature.

:mod:`.metrics` computes the analyses (its docstring states each), :mod:`.plots` draws the
figures, :mod:`.report` writes ``bias.json``, ``bias.md`` and the PNGs (:func:`bias`), and
:mod:`.command` is the CLI (:class:`BiasConfig`, :func:`make_parser`, :func:`main`).
Docs: "concepts/positional-bias.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": ["BiasConfig", "main", "make_parser"],
        "metrics": [
            "ALPHA",
            "KINDS",
            "TITLES",
            "analyze",
            "first_option_bias",
            "has_data",
            "letter_and_position",
            "position_cell",
            "position_columns",
            "position_table",
            "presentation_flips",
            "presentation_verdict",
            "prism_positions",
            "timecatch_positions",
            "type1_rows",
        ],
        "plots": [
            "first_option_figure",
            "plot_first_option",
            "plot_positions",
            "plot_timecatch",
            "plot_wavg",
            "positions_figure",
            "wavg_figure",
        ],
        "report": [
            "BIAS_JSON",
            "BIAS_REPORT",
            "NothingToAnalyseError",
            "bias",
            "first_option_rate",
            "p_value",
            "presentation_summary",
        ],
    },
)
