"""What every evaluation shares: the fields its config inherits (:mod:`.args`), the prefill it
scores after (:mod:`.prefill`), the run folder
and its identity (:mod:`.runs`), the multi-process run loop (:mod:`.sharded`), accuracy
(:mod:`.metrics`), the statistics (:mod:`.stats`), report markdown (:mod:`.markdown`), and the
registry of evaluations (:mod:`.registry`) behind ``judgetrain eval report``
(:mod:`.rebuild`) and ``judgetrain eval compare`` (:mod:`.compare`), and a finished run
logged to wandb (:mod:`.wandb_report`).
README: "Run folders".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "args": ["EvalArgs", "ReportToArgs", "parse_batch_size"],
        "compare": ["CompareConfig"],
        "markdown": ["display_name", "figures_markdown", "fmt", "rows_markdown", "run_header"],
        "metrics": ["accuracy", "accuracy_cell", "random_accuracy"],
        "prefill": ["FROM_FLAG", "FROM_TEMPLATE", "NO_THINKING", "UNREAD", "RunPrefill", "run_prefill", "scorer_loader"],
        "rebuild": ["ReportConfig"],
        "registry": ["EVALUATIONS", "PAIRED_TESTS", "evaluation_of", "module_for", "paired_tests_for"],
        "runs": [
            "EvalInputError",
            "METRICS",
            "PREDICTIONS",
            "PredictionsError",
            "REPORT",
            "RUN_INFO",
            "check_resume",
            "clear_run",
            "config_identity",
            "dataset_identity",
            "evaluated_model",
            "finish_run",
            "identity_changes",
            "items_count",
            "read_predictions",
            "read_run",
            "repair_predictions",
            "resolved_dtype",
            "run_info",
            "selected",
            "write_run_info",
        ],
        "sharded": ["AUTO_CHUNK_CUDA", "merge_rank_files", "process_state", "rank_file", "run_as_module", "run_sharded"],
        "stats": [
            "EQUIVALENCE_MARGIN",
            "LTT_DELTA",
            "LTT_MIN_ANSWERED",
            "LTT_SPLITS",
            "StatsError",
            "accuracy_by_arm",
            "answer_margin",
            "any_change_rate",
            "auroc",
            "benjamini_hochberg",
            "bootstrap_ci",
            "clopper_pearson",
            "clopper_pearson_upper",
            "consensus_answer",
            "delong_auroc_difference",
            "disagreement",
            "flipped",
            "learn_then_test",
            "ltt_halves",
            "ltt_splits",
            "mcnemar_exact",
            "or_none",
            "paired_bootstrap_ci",
            "pairwise_disagreement",
            "selective_risk",
            "tost_paired",
            "wilcoxon_signed_rank",
            "wilson",
        ],
        "wandb_report": [
            "DEFAULT_IMAGE_ROWS",
            "DEFAULT_WANDB_PROJECT",
            "IMAGE_ROWS_ENV",
            "ITEM_COLUMNS",
            "REPORT_TO",
            "TABLE_KEY",
            "filmstrip",
            "flat_metrics",
            "image_rows_limit",
            "item_rows",
            "log_run",
            "reports_to_wandb",
            "run_config",
            "wandb_mode",
        ],
    },
)
