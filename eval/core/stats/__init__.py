"""Statistics of the PhaseFusion evaluation (paper 001 §4, App. A, E, H, I, K).

Answer-level measures and the tests the paper's claims rest on, each a thin
wrapper that states which test, which correction and which interval, and leaves
the computation to scipy, statsmodels and scikit-learn; one module per kind:

- :mod:`.stability`: answer stability: accuracy per arm, pairwise disagreement between arms
  (phases, samplers, origins), the any-of-``k`` change rate, the consensus
  answer over orderings and the ordering flip, the answer margin (§2.1, §4.3);
- :mod:`.paired`: paired accuracy / change-rate comparisons: exact McNemar (§4, Tables 1, S7, S9);
  equivalence: two one-sided paired t-tests (TOST) against a margin of
  ±2.5 points, 90 % CI, optionally question-clustered (§4 "Statistical protocol", App. E);
- :mod:`.multiplicity`: Benjamini–Hochberg step-up over the confirmatory family (App. A, Table S2);
- :mod:`.bootstrap`: bootstrap CIs that resample questions, so passes of one question stay together
  (App. A, App. C "Oracle-bound uncertainty");
- :mod:`.intervals`: rate intervals: Wilson score intervals for flip, change and disagreement rates
  (what the paper's brackets are: 136/593 gives 22.9 % [19.7, 26.5], App. A), Clopper–Pearson, and
  Newcombe's interval of the difference of two rates (what `eval compare`'s Δ cells print);
- :mod:`.ltt`: fixed-sequence Learn-then-Test of margin thresholds with one-sided
  Clopper–Pearson bounds, on seeded calibration / test halves (App. H, Table S10);
- :mod:`.roc`: AUROC of a score for predicting flips or correctness (§4.3, App. I/J), and DeLong's
  test of two correlated AUROCs on the same items (Table S2's "Margin vs. MSP", App. I);
- :mod:`.checks`: what they share: :class:`StatsError`, the input checks, :func:`or_none`.

Conventions: rates and accuracies are fractions in 0..1 (reports print points);
``a``/``b`` arrays are aligned item by item (the same question at the same
index); empty input, length mismatches and undefined statistics raise
:class:`StatsError` naming the argument, never return a silent ``nan``.
Every name is importable from here (numpy at import; scipy, statsmodels and scikit-learn
when a statistic is computed).
Docs: "concepts/phasefusion.md".
"""

from .bootstrap import bootstrap_ci, paired_bootstrap_ci
from .checks import StatsError, or_none
from .intervals import clopper_pearson, difference_interval, wilson
from .ltt import (
    LTT_DELTA,
    LTT_MIN_ANSWERED,
    LTT_SPLITS,
    clopper_pearson_upper,
    learn_then_test,
    ltt_halves,
    ltt_splits,
    selective_risk,
)
from .multiplicity import benjamini_hochberg
from .paired import EQUIVALENCE_MARGIN, mcnemar_exact, tost_paired, wilcoxon_signed_rank
from .roc import auroc, delong_auroc_difference
from .stability import (
    accuracy_by_arm,
    answer_margin,
    any_change_rate,
    consensus_answer,
    disagreement,
    flipped,
    pairwise_disagreement,
)

__all__ = [
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
    "difference_interval",
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
]
