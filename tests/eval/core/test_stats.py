"""Tests for eval/stats.py: hand-worked values (binomial pmf, t quantiles), paper 001's own
numbers (App. A Table S2, App. E, App. H), and cross-checks against scipy / scikit-learn
computing the same quantity another way."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from judgetrain.eval.core import StatsError, stats as S


def _paired(n, n11, n10, n01):
    """Two aligned 0/1 arrays with the given concordant / discordant counts."""
    a = [1] * n11 + [1] * n10 + [0] * n01 + [0] * (n - n11 - n10 - n01)
    b = [1] * n11 + [0] * n10 + [1] * n01 + [0] * (n - n11 - n10 - n01)
    return np.array(a, bool), np.array(b, bool)


# --- answer stability -------------------------------------------------------

def test_accuracy_disagreement_and_any_change_by_hand():
    acc = S.accuracy_by_arm({"8f": [1, 0, 1, 1], "fusion": [True, True, True, False]})
    assert acc == {"8f": {"accuracy": 0.75, "correct": 3, "n": 4}, "fusion": {"accuracy": 0.75, "correct": 3, "n": 4}}
    phases = {"0": [0, 1, 2, 3, 1], "1/3": [0, 2, 2, 3, 1], "2/3": [1, 1, 2, 0, 1]}
    assert S.disagreement(phases["0"], phases["1/3"]) == pytest.approx(1 / 5)
    assert S.pairwise_disagreement(phases) == [
        {"a": "0", "b": "1/3", "rate": pytest.approx(0.2), "changed": 1, "n": 5},
        {"a": "0", "b": "2/3", "rate": pytest.approx(0.4), "changed": 2, "n": 5},
        {"a": "1/3", "b": "2/3", "rate": pytest.approx(0.6), "changed": 3, "n": 5},
    ]
    # items 0, 1 and 3 change under some phase; 2 and 4 never do
    assert S.any_change_rate(phases) == pytest.approx(3 / 5)
    # an invalid (None) answer differs from every index
    assert S.disagreement([None, 1], [0, 1]) == 0.5


def test_consensus_ties_go_to_the_lowest_index_and_flips():
    assert S.consensus_answer([2, 1, 1, 2, 0]) == 1          # 1 and 2 tie at two votes: lowest wins
    assert S.consensus_answer([3, 3, 0]) == 3
    assert S.consensus_answer([4]) == 4
    assert S.flipped([2, 2, 2]) is False and S.flipped([2, 2, 0]) is True


def test_answer_margin():
    assert S.answer_margin([0.1, 0.6, 0.3]) == pytest.approx(0.3)
    assert S.answer_margin([0.5, 0.5]) == 0.0
    assert S.answer_margin([1.0]) == 1.0


def test_stability_inputs_are_checked():
    with pytest.raises(StatsError, match="same items"):
        S.pairwise_disagreement({"a": [0, 1], "b": [0]})
    with pytest.raises(StatsError, match="at least 2 arms"):
        S.any_change_rate({"a": [0, 1]})
    with pytest.raises(StatsError, match="no items"):
        S.consensus_answer([])
    with pytest.raises(StatsError, match="booleans"):
        S.accuracy_by_arm({"a": [0, 2]})


# --- McNemar ----------------------------------------------------------------

def test_mcnemar_exact_by_hand_from_the_binomial_pmf():
    a, b = _paired(20, 10, 1, 6)
    r = S.mcnemar_exact(a, b)
    assert (r["n11"], r["n10"], r["n01"], r["n00"]) == (10, 1, 6, 3)
    # two-sided exact: 2 * P(X <= 1), X ~ Bin(7, 1/2) = 2 * (1 + 7) / 128
    assert r["pvalue"] == pytest.approx(2 * (math.comb(7, 0) + math.comb(7, 1)) / 2 ** 7)
    assert r["statistic"] == 1
    assert r["difference"] == pytest.approx((11 - 16) / 20)


def test_mcnemar_reproduces_paper_001_union_control():
    # App. E, same-pipeline replication: Q3 n=592, 50 discordant pairs, -0.34 points -> p = .89;
    # Q2.5 n=596, 78 discordant, +-0.00 points -> p = 1.0
    a, b = _paired(592, 340, 24, 26)
    r = S.mcnemar_exact(a, b)
    expected = 2 * sum(math.comb(50, i) for i in range(25)) / 2 ** 50
    assert r["pvalue"] == pytest.approx(expected)
    assert round(r["pvalue"], 2) == 0.89 and round(100 * r["difference"], 2) == -0.34
    assert S.mcnemar_exact(*_paired(596, 300, 39, 39))["pvalue"] == pytest.approx(1.0)


def test_mcnemar_matches_scipy_binomtest_on_random_pairs():
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.random(40) < 0.6, rng.random(40) < 0.4
        r = S.mcnemar_exact(a, b)
        n10, n01 = int((a & ~b).sum()), int((~a & b).sum())
        assert r["pvalue"] == pytest.approx(sps.binomtest(min(n10, n01), n10 + n01, 0.5).pvalue)


def test_mcnemar_edge_cases():
    r = S.mcnemar_exact([1, 1, 0], [1, 1, 0])             # no discordant pair
    assert (r["n10"], r["n01"], r["pvalue"]) == (0, 0, 1.0)
    assert S.mcnemar_exact([1] * 5, [1] * 5)["pvalue"] == 1.0   # all correct
    with pytest.raises(StatsError, match="no items"):
        S.mcnemar_exact([], [])
    with pytest.raises(StatsError, match="aligned"):
        S.mcnemar_exact([1, 0], [1])


# --- TOST -------------------------------------------------------------------

def test_tost_reproduces_paper_001_same_pipeline_replication():
    # App. E: SEs 1.19 / 1.48 points, TOST p = .035 / .046 against +-2.5 points, 90 % CIs
    # [-2.30, +1.62] and [-2.44, +2.44] (paper rounds the point estimate to -0.34).
    q3 = S.tost_paired(*_paired(592, 340, 24, 26))
    assert 100 * q3["se"] == pytest.approx(1.19, abs=0.01)
    assert round(q3["pvalue"], 3) == 0.035 and q3["equivalent"]
    assert [round(100 * x, 1) for x in q3["ci"]] == [-2.3, 1.6]
    q25 = S.tost_paired(*_paired(596, 300, 39, 39))
    assert round(100 * q25["se"], 2) == 1.48
    assert round(q25["pvalue"], 3) == 0.046
    assert [round(100 * x, 2) for x in q25["ci"]] == [-2.44, 2.44]


def test_tost_by_hand_with_t_quantiles():
    a = np.array([0.9, 0.7, 0.8, 0.6, 0.75, 0.85])
    b = np.array([0.88, 0.72, 0.78, 0.65, 0.74, 0.80])
    d = a - b
    se = d.std(ddof=1) / math.sqrt(len(d))
    r = S.tost_paired(a, b, margin=0.05, alpha=0.05)
    assert r["difference"] == pytest.approx(d.mean()) and r["se"] == pytest.approx(se)
    assert r["p_lower"] == pytest.approx(sps.t.sf((d.mean() + 0.05) / se, 5))
    assert r["p_upper"] == pytest.approx(sps.t.cdf((d.mean() - 0.05) / se, 5))
    half = sps.t.ppf(0.95, 5) * se
    assert r["ci"] == pytest.approx((d.mean() - half, d.mean() + half))
    assert S.tost_paired(a, b + 0.2, margin=0.05)["equivalent"] is False


def test_tost_clustered_by_hand_and_singletons_equal_the_plain_test():
    rng = np.random.default_rng(3)
    a, b = (rng.random(60) < 0.6).astype(float), (rng.random(60) < 0.55).astype(float)
    plain, single = S.tost_paired(a, b), S.tost_paired(a, b, clusters=list(range(60)))
    assert single["pvalue"] == pytest.approx(plain["pvalue"]) and single["ci"] == pytest.approx(plain["ci"])
    # two models' passes over the same 30 questions: cluster-robust variance of a mean,
    # G/(G-1) * sum_g (sum of residuals in g)^2 / N^2, with t on G-1 df
    q = np.repeat(np.arange(30), 2)
    r = S.tost_paired(a, b, margin=0.025, clusters=q)
    d = a - b
    e = d - d.mean()
    g_sums = np.bincount(q, weights=e)
    se = math.sqrt(30 / 29 * (g_sums ** 2).sum() / len(d) ** 2)
    assert r["se"] == pytest.approx(se) and r["n_clusters"] == 30
    assert r["p_lower"] == pytest.approx(sps.t.sf((d.mean() + 0.025) / se, 29))
    assert r["pvalue"] == pytest.approx(max(r["p_lower"], sps.t.cdf((d.mean() - 0.025) / se, 29)))


def test_tost_identical_arms_are_equivalent():
    same = [1, 0, 1, 1, 0, 1]
    for clusters in (None, [0, 0, 1, 1, 2, 2]):
        r = S.tost_paired(same, same, clusters=clusters)
        assert (r["difference"], r["se"], r["pvalue"], r["equivalent"]) == (0.0, 0.0, 0.0, True)


def test_tost_rejects_bad_input():
    with pytest.raises(StatsError, match="margin"):
        S.tost_paired([1, 0], [1, 0], margin=0)
    with pytest.raises(StatsError, match="at least two"):
        S.tost_paired([1], [0])
    with pytest.raises(StatsError, match="one label per item"):
        S.tost_paired([1, 0, 1], [1, 1, 0], clusters=[0, 1])


# --- Benjamini–Hochberg -----------------------------------------------------

def test_bh_reproduces_paper_001_table_s2():
    family = [0.005, 0.016, 0.022, 0.022, 0.032, 0.037, 0.042, 0.048]
    reject, q = S.benjamini_hochberg(family, alpha=0.05)
    assert all(reject)   # the largest p, .048 at rank 8, is below 8/8 * .05: the step-up rejects all eight
    assert q == pytest.approx(list(sps.false_discovery_control(family, method="bh")))
    # the step-up, not step-down: p=.005 needs no more than rank 1's threshold .05/8 = .00625
    reject, _ = S.benjamini_hochberg([*family[:-1], 0.06], alpha=0.05)
    assert reject == [True] * 7 + [False]


def test_bh_by_hand():
    # sorted .01 .03 .04 .20 -> p*m/rank = .04 .06 .0533 .20 -> running minimum from the top
    reject, q = S.benjamini_hochberg([0.01, 0.04, 0.03, 0.20], alpha=0.05)
    assert q == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.20])
    assert reject == [True, False, False, False]
    with pytest.raises(StatsError, match=r"\[0, 1\]"):
        S.benjamini_hochberg([0.5, 1.5])


# --- bootstrap --------------------------------------------------------------

def test_bootstrap_rate_ci_is_near_the_normal_approximation_and_seeded():
    x = np.r_[np.ones(540), np.zeros(460)]
    r = S.bootstrap_ci(x, n_resamples=4000, seed=1)
    se = math.sqrt(0.54 * 0.46 / 1000)
    assert r["estimate"] == pytest.approx(0.54)
    assert r["ci"][0] == pytest.approx(0.54 - 1.96 * se, abs=0.006)
    assert r["ci"][1] == pytest.approx(0.54 + 1.96 * se, abs=0.006)
    assert S.bootstrap_ci(x, n_resamples=500, seed=1) == S.bootstrap_ci(x, n_resamples=500, seed=1)
    assert S.bootstrap_ci(x, n_resamples=500, seed=1)["ci"] != S.bootstrap_ci(x, n_resamples=500, seed=2)["ci"]


def test_bootstrap_resamples_questions_not_rows():
    rng = np.random.default_rng(5)
    per_question = (rng.random(80) < 0.5).astype(float)
    twice = np.repeat(per_question, 2)        # two passes per question with the same outcome
    clusters = np.repeat(np.arange(80), 2)
    by_question = S.bootstrap_ci(per_question, n_resamples=2000, seed=0)
    clustered = S.bootstrap_ci(twice, clusters=clusters, n_resamples=2000, seed=0)
    naive = S.bootstrap_ci(twice, n_resamples=2000, seed=0)
    # resampling whole questions makes the duplicates carry no extra information
    assert clustered["ci"] == pytest.approx(by_question["ci"]) and clustered["n_clusters"] == 80
    # treating rows as independent shrinks the interval by about sqrt(2)
    width = lambda r: r["ci"][1] - r["ci"][0]  # noqa: E731
    assert width(naive) < 0.85 * width(clustered)


def test_paired_bootstrap_named_and_callable_statistics_agree():
    rng = np.random.default_rng(1)
    a, b = rng.random(50) < 0.6, rng.random(50) < 0.5
    named = S.paired_bootstrap_ci(a, b, n_resamples=999, seed=4)
    custom = S.paired_bootstrap_ci(a, b, stat=lambda x, y: x.mean() - y.mean(), n_resamples=999, seed=4)
    assert named["estimate"] == pytest.approx(a.mean() - b.mean())
    assert custom["ci"] == pytest.approx(named["ci"]) and custom["se"] == pytest.approx(named["se"])
    flat = S.paired_bootstrap_ci([1, 1, 0], [1, 1, 0], n_resamples=200)
    assert flat["ci"] == (0.0, 0.0)
    with pytest.raises(StatsError, match="at least two"):
        S.bootstrap_ci([1.0])
    with pytest.raises(StatsError, match="mean_difference"):
        S.paired_bootstrap_ci([1, 0], [0, 1], stat="median")


# --- Clopper–Pearson and Learn-then-Test ------------------------------------

def test_clopper_pearson_closed_forms_and_scipy():
    lo, hi = S.clopper_pearson(0, 10, alpha=0.05)
    assert lo == 0 and hi == pytest.approx(1 - 0.025 ** (1 / 10))
    lo, hi = S.clopper_pearson(10, 10, alpha=0.05)
    assert lo == pytest.approx(0.025 ** (1 / 10)) and hi == 1
    exact = sps.binomtest(7, 30).proportion_ci(confidence_level=0.9, method="exact")
    assert S.clopper_pearson(7, 30, alpha=0.1) == pytest.approx((exact.low, exact.high))
    # paper 001 Table S10: ten answered items, no error, delta = 10 % -> 0.206
    assert S.clopper_pearson_upper(0, 10, 0.10) == pytest.approx(1 - 0.1 ** (1 / 10))
    assert round(S.clopper_pearson_upper(0, 10, 0.10), 3) == 0.206
    assert S.clopper_pearson_upper(4, 25, 0.1) == pytest.approx(sps.beta.ppf(0.9, 5, 21))
    with pytest.raises(StatsError, match="0 <= k <= n"):
        S.clopper_pearson(3, 2)


@pytest.mark.parametrize("k, n, printed", [
    (136, 593, (22.9, 19.7, 26.5)),   # App. A: InternVL2.5, consensus changes across three phases
    (133, 599, (22.2, 19.1, 25.7)),   # App. A: InternVL3.5
    (260, 1488, (17.5, 15.6, 19.5)),  # App. F: a single pass changes between origins
    (164, 1488, (11.0, 9.5, 12.7)),   # App. F: PhaseFusion changes between origins
])
def test_wilson_reproduces_paper_001_bracketed_rates(k, n, printed):
    lo, hi = S.wilson(k, n)
    assert (round(100 * k / n, 1), round(100 * lo, 1), round(100 * hi, 1)) == printed
    ci = sps.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert (lo, hi) == pytest.approx((ci.low, ci.high))


def test_clopper_pearson_misses_the_papers_rate_brackets():
    # the reason rates use Wilson: the exact interval is 0.1-0.2 points off the printed brackets
    assert round(100 * S.clopper_pearson(136, 593)[0], 1) == 19.6   # printed: 19.7
    assert round(100 * S.clopper_pearson(133, 599)[0], 1) == 18.9   # printed: 19.1
    with pytest.raises(StatsError, match="0 <= k <= n"):
        S.wilson(5, 4)


def _ltt_by_hand(scores, errors, alpha, delta, min_answered=10):
    """The App. H walk with Clopper–Pearson bounds from the beta quantile."""
    scores, errors = np.asarray(scores), np.asarray(errors, bool)
    chosen = None
    # the start: the min_answered highest items, a tie's errors first
    start = sorted(zip(scores.tolist(), errors.tolist()), key=lambda x: (-x[0], not x[1]))[:min_answered]
    n, k = len(start), sum(e for _, e in start)
    if n == min_answered and (1.0 if k == n else sps.beta.ppf(1 - delta, k + 1, n - k)) > alpha:
        return None
    for t in sorted(set(scores.tolist()), reverse=True):
        answered = scores >= t
        n, k = int(answered.sum()), int(errors[answered].sum())
        if n < min_answered:
            continue
        upper = 1.0 if k == n else sps.beta.ppf(1 - delta, k + 1, n - k)
        if upper > alpha:
            break
        chosen = t
    return chosen


def test_ltt_perfect_signal_certifies_nothing_at_alpha_020_as_in_table_s10():
    scores = np.linspace(1, 0, 75)
    errors = np.zeros(75, bool)
    r = S.learn_then_test(scores, errors, alpha=0.20, delta=0.10)
    # the walk starts at the ten highest-scoring items, whose bound 0.206 exceeds .20
    assert r["threshold"] is None and r["coverage"] == 0.0
    assert len(r["steps"]) == 1 and r["steps"][0]["answered"] == 10 and not r["steps"][0]["accepted"]
    r = S.learn_then_test(scores, errors, alpha=0.25, delta=0.10)
    assert r["threshold"] == pytest.approx(scores.min()) and r["coverage"] == 1.0


def test_ltt_with_a_tie_across_the_start_still_starts_at_the_ten_highest_items():
    # 30 items tied at the top (one of them wrong), then 45 below; App. H's walk starts at the
    # ten highest: with the tie's error counted first, 1 error in 10 gives a bound of .337 > .20,
    # so nothing is certified (testing the whole tie first certified coverage .427).
    scores = [1.0] * 30 + list(np.linspace(0, 0.9, 45))
    errors = [False] * 29 + [True] * 46
    r = S.learn_then_test(scores, errors, alpha=0.2)
    assert r["threshold"] is None and r["coverage"] == 0.0
    assert r["steps"] == [{"threshold": None, "answered": 10, "errors": 1, "upper": pytest.approx(sps.beta.ppf(0.9, 2, 9)),
                           "pvalue": pytest.approx(sps.binom.cdf(1, 10, 0.2)), "accepted": False}]
    assert round(sps.beta.ppf(0.9, 2, 9), 3) == 0.337
    # at alpha .35 the start passes, then the tie's own threshold (30 answered, 1 error), then the
    # walk goes on down the distinct scores: 0.9 answers 31 with 2 errors (bound .152), and so on
    r = S.learn_then_test(scores, errors, alpha=0.35)
    assert [(x["threshold"], x["answered"], x["errors"]) for x in r["steps"][:3]] == [(None, 10, 1), (1.0, 30, 1), (0.9, 31, 2)]
    assert r["threshold"] == _ltt_by_hand(scores, errors, 0.35, 0.1) and r["threshold"] is not None
    # no tie at the start: no extra step, the first threshold answers exactly ten
    assert S.learn_then_test(np.linspace(1, 0, 75), [False] * 75, alpha=0.25)["steps"][0]["threshold"] == 1.0 - 9 / 74


def test_ltt_walk_stops_at_the_first_failure():
    # 12 clean items, then 6 errors, then 30 clean items: a permissive threshold would pass
    # again once the clean tail dilutes the errors, but fixed-sequence testing stops first.
    errors = np.r_[np.zeros(12), np.ones(6), np.zeros(30)].astype(bool)
    scores = np.arange(len(errors), 0, -1) / len(errors)
    r = S.learn_then_test(scores, errors, alpha=0.3, delta=0.1)
    assert r["threshold"] == pytest.approx(_ltt_by_hand(scores, errors, 0.3, 0.1))
    assert r["steps"][-1]["accepted"] is False
    accepted = [s for s in r["steps"] if s["accepted"]]
    assert r["answered"] == accepted[-1]["answered"] < len(errors)
    assert S.clopper_pearson_upper(6, len(errors), 0.1) <= 0.3   # the whole set alone would pass


def test_ltt_matches_the_hand_walk_and_binomial_pvalues_on_random_cells():
    rng = np.random.default_rng(7)
    for _ in range(6):
        margin = rng.random(75)
        errors = rng.random(75) < 0.7 * (1 - margin)
        margin = np.round(margin, 2)              # ties: a threshold answers every tied item
        for alpha in (0.25, 0.30):
            r = S.learn_then_test(margin, errors, alpha=alpha, delta=0.1)
            assert r["threshold"] == _ltt_by_hand(margin, errors, alpha, 0.1)
            for s in r["steps"]:
                assert s["accepted"] == (s["pvalue"] <= 0.1)
                assert s["answered"] == (10 if s["threshold"] is None else int((margin >= s["threshold"]).sum()))
            if r["threshold"] is not None:
                sel = S.selective_risk(margin, errors, r["threshold"])
                assert (sel["answered"], sel["errors"]) == (r["answered"], r["errors"])


def test_ltt_splits_by_hand_on_seeded_halves():
    """App. H's in-cell mode: each split's threshold is the hand walk on its calibration half;
    coverage and violation are read off its test half."""
    rng = np.random.default_rng(3)
    scores = np.round(rng.random(150), 2)
    errors = rng.random(150) < 0.6 * (1 - scores)
    key = ("single", "margin", "egoschema", 0.3)
    got = S.ltt_splits(scores, errors, 0.3, 0.1, n_splits=40, key=key, details=True)
    assert (got["n"], got["n_calibration"], got["n_test"], got["n_splits"]) == (150, 75, 75, 40)
    violated, coverage = [], []
    for i, split in enumerate(got["splits"]):
        cal, test = S.ltt_halves(150, key, i)
        assert len(cal) == 75 and len(test) == 75 and not set(cal) & set(test)
        t = _ltt_by_hand(scores[cal], errors[cal], 0.3, 0.1)
        assert split["threshold"] == t
        answered = scores[test] >= t if t is not None else np.zeros(75, bool)
        coverage.append(answered.mean())
        violated.append(bool(answered.any() and errors[test][answered].mean() > 0.3))
        for step in S.learn_then_test(scores[cal], errors[cal], 0.3, 0.1)["steps"]:
            assert step["pvalue"] == pytest.approx(
                sps.binomtest(step["errors"], step["answered"], 0.3, alternative="less").pvalue)
    assert got["coverage"] == pytest.approx(np.mean(coverage)) and got["violation_rate"] == np.mean(violated)
    assert got["violations"] == sum(violated) and 0 < got["certified_splits"] <= 40
    # seeded by sha256 of the key: the same halves every time, other halves for another cell
    assert all((a == b).all() for a, b in zip(S.ltt_halves(150, key, 5), S.ltt_halves(150, key, 5)))
    assert not (S.ltt_halves(150, key, 5)[0] == S.ltt_halves(150, ("other",), 5)[0]).all()
    # a perfect signal at alpha = .20 certifies nothing on any split (Table S10's note)
    perfect = S.ltt_splits(np.linspace(1, 0, 150), np.zeros(150, bool), 0.20, n_splits=10, key=key)
    assert (perfect["coverage"], perfect["violation_rate"], perfect["certified_splits"]) == (0.0, 0.0, 0)
    with pytest.raises(StatsError, match="at least two"):
        S.ltt_splits([0.5], [True], 0.3)


def test_selective_risk_and_ltt_inputs():
    r = S.selective_risk([0.9, 0.5, 0.2, 0.7], [False, True, True, False], 0.5)
    assert r == {"threshold": 0.5, "answered": 3, "errors": 1, "coverage": 0.75, "risk": pytest.approx(1 / 3), "n": 4}
    assert S.selective_risk([0.9], [False], None)["risk"] is None
    with pytest.raises(StatsError, match="aligned"):
        S.learn_then_test([0.1, 0.2], [True], alpha=0.3)
    with pytest.raises(StatsError, match="NaN"):
        S.learn_then_test([0.1, float("nan")], [True, False], alpha=0.3)


# --- AUROC ------------------------------------------------------------------

def test_auroc_by_hand_and_against_mann_whitney():
    assert S.auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    rng = np.random.default_rng(2)
    margin = rng.random(200)
    flips = rng.random(200) < 1 - margin           # low margin -> flip
    u = sps.mannwhitneyu(-margin[flips], -margin[~flips]).statistic
    assert S.auroc(-margin, flips) == pytest.approx(u / (flips.sum() * (~flips).sum()))
    assert S.auroc(-margin, flips) > 0.6
    with pytest.raises(StatsError, match="both classes"):
        S.auroc([0.2, 0.3], [True, True])



def test_delong_by_hand():
    """Positives 0.9, 0.4 and negatives 0.5, 0.1 under a; 0.8, 0.7 and 0.3, 0.6 under b.
    Placement values: a's positives 1, 1/2 (AUROC .75), negatives 1/2, 1; b's all 1 (AUROC 1).
    var(A_a) = s²(1, ½)/2 + s²(½, 1)/2 = .125/2 + .125/2 = .125, var(A_b) = 0, cov = 0,
    so z = -.25 / √.125 = -1/√2 and p = 2 Φ(-1/√2) = .4795."""
    got = S.delong_auroc_difference([0.9, 0.4, 0.5, 0.1], [0.8, 0.7, 0.3, 0.6], [1, 1, 0, 0])
    assert (got["auroc_a"], got["auroc_b"], got["difference"]) == (0.75, 1.0, -0.25)
    assert got["se"] == pytest.approx(math.sqrt(0.125))
    assert got["z"] == pytest.approx(-1 / math.sqrt(2))
    assert got["pvalue"] == pytest.approx(0.479500122186953)
    assert (got["n_positive"], got["n_negative"]) == (2, 2)


def test_delong_equals_its_definition_with_ties():
    """The midrank placement values equal the ψ-kernel definition (1 above, ½ tied), ties included."""
    rng = np.random.default_rng(5)
    y = rng.random(60) < 0.4
    a = np.round(rng.random(60) + 0.5 * y, 1)  # rounded: many ties within and across classes
    b = np.round(rng.random(60) + 0.2 * y, 1)

    def placements(s):
        psi = (s[y][:, None] > s[~y][None, :]) + 0.5 * (s[y][:, None] == s[~y][None, :])
        return psi.mean(axis=1), psi.mean(axis=0)

    (pa, na), (pb, nb) = placements(a), placements(b)
    cov = np.cov(np.vstack([pa, pb])) / y.sum() + np.cov(np.vstack([na, nb])) / (~y).sum()
    se = math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    got = S.delong_auroc_difference(a, b, y)
    assert got["auroc_a"] == pytest.approx(S.auroc(a, y)) and got["auroc_b"] == pytest.approx(S.auroc(b, y))
    assert got["se"] == pytest.approx(se)
    assert got["pvalue"] == pytest.approx(2 * sps.norm.sf(abs(pa.mean() - pb.mean()) / se))
    swapped = S.delong_auroc_difference(b, a, y)
    assert swapped["z"] == pytest.approx(-got["z"]) and swapped["pvalue"] == pytest.approx(got["pvalue"])


def test_delong_separates_a_signal_from_noise_and_refuses_the_undefined():
    rng = np.random.default_rng(7)
    margin = rng.random(400)
    flips = rng.random(400) < 1 - margin
    assert S.delong_auroc_difference(-margin, rng.random(400), flips)["pvalue"] < 1e-6
    with pytest.raises(StatsError, match="zero standard error"):
        S.delong_auroc_difference(margin, 2 * margin, flips)  # the same ranking twice
    with pytest.raises(StatsError, match="at least 2 items of each class"):
        S.delong_auroc_difference([0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [True, False, False])
