"""The metrics of a reward-model run (``judgetrain eval judge --mode reward``), from its
``predictions.jsonl`` alone (and, for the agreement, the generative judge's run folder).

- **Pair accuracy**: over the (gold, negative) pairs of the run's pointwise records
  (:func:`judgetrain.eval.core.reward_pairs.reward_pairs`), the share where the gold sequence's
  reward is strictly above the negative's, with its Wilson 95% interval and n; ties (equal
  rewards) count as not won and are shown apart. Per perturbation kind (swap, non-consecutive
  swap, shuffle, semantic 1–3: :data:`PERTURBATION_KINDS`, then any other kind the records hold)
  and per layout.
- **Symmetry check**: a reward model scores each sequence alone, so it has no presentation order
  and no position bias by construction; what could still break that is the scorer (a reward that
  depends on the other sequences of its batch: padding read as content, a batch returned out of
  order). The run re-scores the first record of each chunk it writes in a batch of two, next to
  another record of the chunk placed first (other companions, other padding), and stores that
  reward (``reward_check``) and the tolerance it must meet (``reward_check_tolerance``:
  :data:`RELATIVE_TOLERANCE` of the weights' dtype × max(1, |reward|)); the check passes when every
  difference is within its tolerance.
- **Agreement** with a generative judge (``--agree-with RUN``: its ``eval judge`` run on the pairwise
  records of the same build and split): on the items both scored (:func:`judgetrain.pairs.pair_key`:
  a pairwise record and its twin name the pair of pointwise records showing the same two sequences),
  the share where both prefer the same sequence, with interval and n; the judge's invalid answers and
  the reward's ties prefer neither and are counted apart, as are items only one side scored.
Docs: "concepts/prism-mirage.md", "how-to/reward-models.md".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.metrics import ci95
from ..core.reward_pairs import REWARD_MODE, reward_pairs
from ..core.runs import PredictionsError, read_run

__all__ = [
    "PERTURBATION_KINDS",
    "RELATIVE_TOLERANCE",
    "agreement_cell",
    "check_tolerance",
    "compute_reward_metrics",
    "judge_pair_rows",
    "pair_cell",
    "symmetry_check",
]

PERTURBATION_KINDS = ("swap", "swap-nonconsecutive", "shuffle", "semantic-1", "semantic-2", "semantic-3")
# |reward in its batch − reward re-scored in another batch| allowed, per unit of max(1, |reward|): float32
# kernels differ in summation order with the padding (observed ~1e-7 relative); half precision rounds
# every product to 8 (bfloat16) or 11 (float16) bits
RELATIVE_TOLERANCE = {"float32": 1e-3, "float64": 1e-6, "bfloat16": 5e-2, "float16": 1e-2}


def check_tolerance(dtype: str, reward: float) -> float:
    """The largest difference the symmetry check allows a reward of ``reward`` scored in ``dtype``
    (a torch dtype's name; an unknown one gets the bfloat16 tolerance)."""
    return RELATIVE_TOLERANCE.get(dtype, RELATIVE_TOLERANCE["bfloat16"]) * max(1.0, abs(reward))


def _rate(k: int, n: int) -> dict[str, Any]:
    return {"k": k, "n": n, "rate": k / n if n else None, "ci95": ci95(k, n)}


def pair_cell(pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n", "correct", "ties", "accuracy", "ci95", "tie_rate", "tie_ci95"}`` of pairs: ``correct``
    those the gold won (strictly higher reward), ties apart; accuracy ``None`` for no pairs."""
    n = len(pairs)
    won = sum(p["winner"] == "gold" for p in pairs)
    ties = sum(p["winner"] == "tie" for p in pairs)
    return {
        "n": n,
        "correct": won,
        "ties": ties,
        "accuracy": won / n if n else None,
        "ci95": ci95(won, n),
        "tie_rate": ties / n if n else None,
        "tie_ci95": ci95(ties, n),
    }


def symmetry_check(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The symmetry check (module docstring) over the rows that carry ``reward_check``:
    ``{"n_checked", "max_abs_diff", "worst_id", "worst_tolerance", "n_failed", "passed"}``
    (``passed`` None when no row was checked)."""
    checked = [r for r in rows if r.get("reward_check") is not None]
    diffs = [(abs(float(r["reward"]) - float(r["reward_check"])), float(r["reward_check_tolerance"]), r["id"]) for r in checked]
    worst = max(diffs, default=None)
    failed = sum(d > tol for d, tol, _ in diffs)
    return {
        "n_checked": len(checked),
        "max_abs_diff": worst[0] if worst else None,
        "worst_id": worst[2] if worst else None,
        "worst_tolerance": worst[1] if worst else None,
        "n_failed": failed,
        "passed": (failed == 0) if checked else None,
    }


def agreement_cell(pairs: Sequence[Mapping[str, Any]], judge_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Agreement of the reward with a generative judge (module docstring). ``judge_rows``: the
    judge's pairwise prediction rows, each with its ``pair_key`` (a list). Returns ``{"agree"``
    (a rate cell: ``k`` agreeing of ``n`` decided), ``"reward_accuracy"``, ``"judge_accuracy"`` (rate
    cells on the same decided items), ``"n_judge_invalid"``, ``"n_reward_tie"``, ``"n_judge_unmatched"``
    (judge items with no pair here), ``"n_pairs_unjudged"`` (pairs the judge did not score)}``."""
    by_key = {tuple(p["key"]): p for p in pairs}
    agree = reward_won = judge_won = n = invalid = tie = unmatched = 0
    judged: set[tuple[str, ...]] = set()
    for row in judge_rows:
        pair = by_key.get(tuple(row["pair_key"]))
        if pair is None:
            unmatched += 1
            continue
        judged.add(tuple(row["pair_key"]))
        if not row.get("valid"):
            invalid += 1
        elif pair["winner"] == "tie":
            tie += 1
        else:
            n += 1
            reward_gold, judge_gold = pair["winner"] == "gold", bool(row.get("correct"))
            agree += reward_gold == judge_gold
            reward_won += reward_gold
            judge_won += judge_gold
    return {
        "agree": _rate(agree, n),
        "reward_accuracy": _rate(reward_won, n),
        "judge_accuracy": _rate(judge_won, n),
        "n_judge_invalid": invalid,
        "n_reward_tie": tie,
        "n_judge_unmatched": unmatched,
        "n_pairs_unjudged": len(by_key) - len(judged),
    }


def judge_pair_rows(agree_with: str | Path, info: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pairwise rows of the generative judge's run folder ``agree_with``, each with its
    ``pair_key`` (read from the dataset of this run's ``info``, which must be the data the judge
    was evaluated on); a folder that is no such run is a :class:`PredictionsError` naming the fix."""
    from judgetrain import records
    from judgetrain.pairs import pair_key

    from ..core.registry import evaluation_of

    folder = Path(agree_with)
    name, other = evaluation_of(folder)
    if name != "judge" or other.get("mode") == REWARD_MODE:
        raise PredictionsError(
            f"--agree-with {folder}: a {other.get('mode') or name} run, not a generative judge's; give the --out of "
            "`judgetrain eval judge --model JUDGE --tasks pairwise …` on the same data"
        )
    data, split = info.get("data"), info.get("split")
    if (other.get("identity") or {}).get("data") != (info.get("identity") or {}).get("data"):
        raise PredictionsError(
            f"--agree-with {folder}: evaluated on {other.get('data')} [{other.get('split')}], other records than "
            f"this run's {data} [{split}]; agreement is measured on the same items: evaluate the judge with "
            f"--data {data} --split {split} --tasks pairwise"
        )
    rows, _ = read_run(folder, "give the --out of a finished `judgetrain eval judge` run")
    rows = [r for r in rows if r.get("task") == "pairwise"]
    if not rows:
        raise PredictionsError(f"--agree-with {folder}: the run holds no pairwise predictions; rerun it with --tasks pairwise")
    cols = records.load(str(data))[str(split)].select_columns(["id", "source", "layout", "meta"])
    keys = {r["id"]: list(pair_key(r["source"], r["layout"], r["meta"])) for r in cols}
    return [{**r, "pair_key": keys[r["id"]]} for r in rows if r["id"] in keys]


def _kinds(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    seen = list(dict.fromkeys(p["perturbation"] for p in pairs))
    return [k for k in PERTURBATION_KINDS if k in seen] + [k for k in seen if k not in PERTURBATION_KINDS]


def compute_reward_metrics(
    rows: Sequence[Mapping[str, Any]], *, judge_rows: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The ``reward`` block of a reward run's metrics: ``all``, ``by_perturbation``, ``by_layout``
    (:func:`pair_cell`), ``n_pairs``, ``n_unpaired`` (rows whose gold has no row yet), ``symmetry``
    (:func:`symmetry_check`), ``mean_reward`` (of gold and of negative sequences) and ``agreement``
    (:func:`agreement_cell` with ``judge_rows``; None without)."""
    pairs, unpaired = reward_pairs(rows)
    layouts = list(dict.fromkeys(p["layout"] for p in pairs))
    golds = {p["gold"]: p["reward_gold"] for p in pairs}
    return {
        "n_pairs": len(pairs),
        "n_unpaired": unpaired,
        "all": pair_cell(pairs),
        "by_perturbation": {k: pair_cell([p for p in pairs if p["perturbation"] == k]) for k in _kinds(pairs)},
        "by_layout": {lay: pair_cell([p for p in pairs if p["layout"] == lay]) for lay in layouts},
        "mean_reward": {
            "gold": sum(golds.values()) / len(golds) if golds else None,
            "negative": sum(p["reward_negative"] for p in pairs) / len(pairs) if pairs else None,
        },
        "symmetry": symmetry_check(rows),
        "agreement": agreement_cell(pairs, judge_rows) if judge_rows is not None else None,
    }
