"""``judgetrain eval judge``: PRISM / MIRAGE pairwise and pointwise judges and the
chronological-ordering probe (paper 002 F.1, G), scored or with rationales.

:mod:`.command` runs it (:func:`evaluate`, :func:`judge_metrics`, the CLI); :mod:`.metrics`
computes the cells, :mod:`.ordering` the probe's ordering metrics, :mod:`.explain` the
explanation metrics (BLEU, ROUGE, METEOR, MiniLM cosine), :mod:`.report` the report;
:mod:`.reward` runs a reward model (``--mode reward``) and :mod:`.reward_metrics` computes its pair accuracy,
symmetry check and agreement with a generative judge.
Docs: "concepts/prism-mirage.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "command": [
            "DEFAULT_MAX_NEW_TOKENS",
            "EVALUATION",
            "JUDGE_TASKS",
            "JudgeEvalConfig",
            "MODES",
            "evaluate",
            "judge_metrics",
            "main",
            "make_parser",
            "model_scorer",
            "predict",
            "prediction_row",
            "run",
            "select",
            "split_rationale",
            "subset_of",
        ],
        "explain": [
            "DEBIAN_WORDNET",
            "EXTRA",
            "WordNetMissing",
            "bleu",
            "cosine_similarities",
            "explanation_metrics",
            "explanation_scores",
            "length_difference",
            "mean_scores",
            "meteor",
            "minilm",
            "rouge",
            "wordnet",
            "words",
        ],
        "metrics": [
            "MIRAGE_DOMAINS",
            "ORDERING_METRICS",
            "PAIRWISE_METRICS",
            "POINTWISE_METRICS",
            "REFERENCES",
            "SCORES",
            "SUBSETS",
            "benchmark_of",
            "classification_cell",
            "compute_judge_metrics",
            "metric_value",
            "ordering_cell",
            "pointwise_cell",
            "score_distribution",
        ],
        "ordering": ["exact_match", "kendall_tau", "ordering_metrics", "position_accuracy"],
        "reward": ["RewardScorer", "load_reward_scorer", "reward_rows", "run_reward"],
        "reward_metrics": [
            "PERTURBATION_KINDS",
            "RELATIVE_TOLERANCE",
            "agreement_cell",
            "check_tolerance",
            "compute_reward_metrics",
            "judge_pair_rows",
            "pair_cell",
            "symmetry_check",
        ],
        "report": ["cells", "pairwise_layouts_figure", "plot_pairwise_layouts", "plot_score_distribution"],
    },
)
