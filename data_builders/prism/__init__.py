"""``judgetrain build prism``: PRISM (paper 002 §5E, B.2), pairwise and pointwise judge records of
procedures against their perturbed negatives (semantic outliers of 1–3 frames, consecutive
and non-consecutive swaps, a full shuffle) in the prompt layouts P0–P6.

:mod:`.command` builds (:class:`PrismConfig`, :func:`build`, the CLI); :mod:`.negatives`
makes the negatives, :mod:`.layouts` and :mod:`.render` the prompt layouts (MIRAGE and the
ordering probe use them too), :mod:`.records` the records and their balanced A/B order.
Docs: "concepts/prism-mirage.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": [
            "DEFAULT_SYNTHETIC",
            "MIN_STEPS",
            "MODES",
            "PrismConfig",
            "SplitPlans",
            "VERSION",
            "build",
            "check_categories",
            "main",
            "make_parser",
            "plan_splits",
            "print_summary",
            "protocol",
            "sequence_counts",
            "split_outlier_pool",
        ],
        "layouts": [
            "GRID_NOTE",
            "LAYOUTS",
            "PAIRWISE_INSTRUCTION",
            "POINTWISE_INSTRUCTION",
            "POINTWISE_LAYOUTS",
            "check_layouts",
            "instruction_for",
            "pairwise_parts",
            "pointwise_parts",
            "steps_block",
        ],
        "negatives": [
            "DEFAULT_NONCONSECUTIVE",
            "OutlierImage",
            "PERTURBATIONS",
            "SEMANTIC",
            "SHUFFLE_MIN_MOVED",
            "TEMPORAL",
            "Variant",
            "consecutive_swaps",
            "gold_variant",
            "make_negatives",
            "nonconsecutive_swaps",
            "outlier_pool",
            "semantic_variants",
            "shuffle_variant",
        ],
        "records": [
            "BUILDER",
            "PAIRWISE_CHOICES",
            "POINTWISE_CHOICES",
            "POINTWISE_SCORES",
            "POSITIONAL_SUBSET_MAX_FRAMES",
            "balance_letters",
            "deal_letters",
            "generate_records",
            "gold_plan",
            "plan_records",
            "presentation",
            "record_counts",
            "twin_letters",
        ],
        "render": [
            "GRID_MAX_CELL",
            "GRID_PAD",
            "compose_grid",
            "grid_cell_box",
            "grid_cell_size",
            "grid_geometry",
            "layout_record",
            "materialize",
        ],
    },
)
