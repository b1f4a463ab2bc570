"""Consistency tuning evaluated as docs/how-to/consistency-tuning.md runs it (paper 001 App. C, issue 17): a synthetic
video-MCQ set (`judgetrain build video-mcq --synthetic`), its view records (`build
consistency-views`), the js λ = 1 arm of the tiny recipe through `judgetrain train`, then
`eval phasefusion` on the base model and on the adapter and one `eval compare` table over the
two runs. Every step is the real command line (the trainer in the process `accelerate launch`
starts); the tiny random Qwen2.5-VL, float32, CPU. About 45–60 s on 2 cores, so slow-marked."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from judgetrain.cli import main
from judgetrain.models.tiny import build_tiny

REPO = Path(__file__).resolve().parents[2]
TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen25vl-consistency-lora.yaml"
BUDGET, PHASES, ORDERINGS = 2, 2, 2  # the views trained on are the phase grids x orderings eval phasefusion scores
ARMS = ("single", "fusion")  # the two arms with an option posterior, hence a margin
SHIFT = "1/4"  # the default second origin, 1/(2S): Table 1B's answers changed under a phase shift

pytestmark = pytest.mark.slow


def cli(*argv) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Every folder of the study, each made by its command (which must succeed)."""
    root = tmp_path_factory.mktemp("consistency-eval")
    model = build_tiny("qwen2.5-vl", root / "qwen2.5-vl")
    manifest = root / "vmcq" / "manifest.jsonl"
    views, adapter = root / "views", root / "runs" / "tiny-js1"
    assert cli("build", "video-mcq", "--out", root / "vmcq", "--synthetic", 4, "--seed", 5, "--frames", 24,
               "--size", "64x48", "--no-progress") == 0
    assert cli("build", "consistency-views", "--manifest", manifest, "--out", views, "--budget", BUDGET, "--phases", PHASES,
               "--orderings", ORDERINGS, "--splits", "train=0.5,validation=0.5", "--no-progress") == 0
    assert cli("train", TINY_RECIPE, "--model_name_or_path", model, "--datasets", views, "--output_dir", adapter,
               "--max_steps", 2, "--eval_strategy", "no", "--save_strategy", "no") == 0
    pf = ["--manifest", manifest, "--budget", BUDGET, "--phases", PHASES, "--orderings", ORDERINGS,
          "--arms", ",".join(ARMS), "--latency-lines", 0, "--no-progress"]
    base, tuned = root / "results" / "ct-base", root / "results" / "ct-js1"
    assert cli("eval", "phasefusion", "--model", model, "--out", base, *pf) == 0
    assert cli("eval", "phasefusion", "--model", model, "--adapter", adapter, "--out", tuned, *pf) == 0
    assert cli("eval", "compare", base, tuned, "--names", "base,js1", "--out", root / "results" / "compare.md") == 0
    return {"model": model, "manifest": manifest, "views": views, "adapter": adapter, "base": base, "tuned": tuned,
            "compare": root / "results" / "compare.md"}


def predictions(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]


def metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def posteriors(run: Path, origin: str = "0") -> dict[tuple[str, str, int, int], dict]:
    """Pass rows by (question, grid, phase, ordering) at one origin."""
    return {(r["id"], r["grid"], r["phase"], r["ordering"]): r for r in predictions(run)
            if r["kind"] == "pass" and r["origin"] == origin}


def arm_answers(run: Path, arm: str, origin: str = "0") -> dict[str, tuple[list[int], list[float], int]]:
    """Per question: the arm's answer under each ordering, its identity-ordering posterior, the gold
    answer; recomputed here from predictions.jsonl (single: phase 0 of the one-grid pass; fusion: the
    arithmetic mean of the phase grids' posteriors, argmax ties to the lowest option)."""
    rows = posteriors(run, origin)
    gold = {r["id"]: r["answer"] for r in predictions(run) if r["kind"] == "question"}
    out = {}
    for qid, answer in gold.items():
        post = []
        for k in range(ORDERINGS):
            if arm == "single":
                post.append(np.asarray(rows[(qid, "single", 0, k)]["posterior"]))
            else:
                post.append(np.mean([rows[(qid, "phase", s, k)]["posterior"] for s in range(PHASES)], axis=0))
        out[qid] = ([int(np.argmax(p)) for p in post], list(post[0]), answer)
    return out


def margin(post: list[float]) -> float:
    top = sorted(post, reverse=True)
    return top[0] - top[1]


def table(markdown: str) -> tuple[list[str], dict[str, list[str]]]:
    """`eval compare --out`'s markdown table: its columns and its rows by label."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return cells[0][1:], {row[0]: row[1:] for row in cells[2:]}


# --------------------------------------------------------------------------- training


def test_the_arm_trains_through_judgetrain_train(study):
    """The recipe's js λ = 1 arm ran under ConsistencyTrainer for its two steps (the consistency
    metrics at every logging step) and saved a LoRA adapter on the language model only, whose every
    lora_B (zero at initialisation) moved."""
    from safetensors.torch import load_file

    adapter = study["adapter"]
    recipe = yaml.safe_load((adapter / "judgetrain_recipe.yaml").read_text())
    assert (recipe["consistency_objective"], recipe["consistency_lambda"], recipe["max_steps"]) == ("js", 1.0, 2)
    state = json.loads((adapter / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "loss" in h]
    assert state["global_step"] == 2 and [h["step"] for h in steps] == [1, 2]
    views = PHASES * ORDERINGS
    keys = {"consistency/term", "consistency/agreement", "consistency/view_max_prob", "consistency/view_gold_prob",
            "consistency/view_accuracy", *(f"consistency/view{v}_max_prob" for v in range(views))}
    assert all(keys <= set(h) and "consistency/gate_hit_rate" not in h for h in steps)
    assert all(0 <= h["consistency/term"] <= math.log(views) for h in steps)  # the generalised JS is bounded by log V
    weights = load_file(adapter / "adapter_model.safetensors")
    lora_b = {k: v for k, v in weights.items() if "lora_B" in k}
    assert len(lora_b) == 2 * 7  # the tiny model's 2 language blocks x the seven projections
    assert all(".language_model." in k for k in weights)  # vision tower frozen, not adapted
    assert all(bool(v.abs().max() > 0) for v in lora_b.values())


def test_training_reads_the_posteriors_eval_phasefusion_scores(study):
    """The first logged step ran on the base model (every lora_B is zero before the first update), so
    its per-view posteriors are the base run's: the same frames and orderings, the option posterior
    at the answer position mapped to content. Its logged gold / top-1 probability, view accuracy,
    agreement and JS term are recomputed from the base run's phase-grid passes of the train questions."""
    import datasets

    state = json.loads((study["adapter"] / "trainer_state.json").read_text())
    first = next(h for h in state["log_history"] if h.get("step") == 1 and "loss" in h)
    train = datasets.load_from_disk(str(study["views"]))["train"]
    metas = [json.loads(m) for m in train["meta"]]
    rows = posteriors(study["base"])
    views, gold, top, right, agree, term, per_view = [], [], [], [], [], [], {}
    for group in dict.fromkeys(m["group"] for m in metas):
        mine = [m for m in metas if m["group"] == group]
        assert len(mine) == PHASES * ORDERINGS
        ps = []
        for m in mine:
            row = rows[(group, "phase", m["phase"], m["ordering"])]
            assert (row["frames"], row["perm"]) == (m["frames"], m["perm"])  # the view eval scored is the one trained on
            p = np.asarray(row["posterior"])
            ps.append(p)
            gold.append(p[m["answer"]])
            top.append(p.max())
            right.append(int(np.argmax(p)) == m["answer"])
            per_view.setdefault(m["view"], []).append(p.max())
        mix = np.mean(ps, axis=0)
        term.append(np.mean([np.sum(p * np.log(p / mix)) for p in ps]))
        agree.append(len({int(np.argmax(p)) for p in ps}) == 1)
        views += ps
    assert len(views) == len(train) == 2 * PHASES * ORDERINGS
    expected = {"consistency/view_gold_prob": np.mean(gold), "consistency/view_max_prob": np.mean(top),
                "consistency/view_accuracy": np.mean(right), "consistency/agreement": np.mean(agree),
                "consistency/term": np.mean(term),
                **{f"consistency/view{v}_max_prob": np.mean(x) for v, x in per_view.items()}}
    assert {k: first[k] for k in expected} == pytest.approx(expected, abs=1e-5)


# --------------------------------------------------------------------------- eval phasefusion, before and after


@pytest.mark.parametrize("which", ["base", "tuned"])
def test_each_run_reports_flip_rate_margin_and_accuracy(study, which):
    """metrics.json of each run: accuracy and ordering flip rate per arm (Table 1A), median margin per
    arm, answers changed under the phase shift (Table 1B) and the phase grids' disagreement, all
    rates in [0, 1] and equal to what the run's own predictions give."""
    run = study[which]
    m = metrics(run)
    assert (m["n_questions"], m["n_errors"], m["origins"]) == (4, 0, ["0", SHIFT])
    rows = {r["arm"]: r for r in m["table_a"]["rows"]}
    assert list(rows) == list(ARMS) and list(m["margin"]) == list(ARMS)
    for arm in ARMS:
        answers = arm_answers(run, arm)
        accuracy = np.mean([a[0] == g for a, _, g in answers.values()])
        flips = np.mean([len(set(a)) > 1 for a, _, _ in answers.values()])
        median = float(np.median([margin(p) for _, p, _ in answers.values()]))
        assert rows[arm]["n"] == m["margin"][arm]["n"] == 4
        assert (rows[arm]["accuracy"], rows[arm]["flip_rate"]) == (pytest.approx(accuracy), pytest.approx(flips))
        assert m["margin"][arm]["median_margin"] == pytest.approx(median, abs=1e-12)
        assert 0 <= accuracy <= 1 and 0 <= flips <= 1 and 0 <= median <= 1
    shifted = {r["arm"]: r["changed"] for r in m["table_b"][0]["rows"]}
    for arm in ARMS:
        at0 = {q: a[0][0] for q, a in arm_answers(run, arm).items()}
        at_shift = {q: a[0][0] for q, a in arm_answers(run, arm, SHIFT).items()}
        changed = sum(at0[q] != at_shift[q] for q in at0)
        assert (shifted[arm]["count"], shifted[arm]["n"]) == (changed, 4)
        assert shifted[arm]["rate"] == pytest.approx(changed / 4)
    assert m["table_b"][0]["origins"] == ["0", SHIFT]
    assert 0 <= m["phases"]["any_change"]["rate"] <= 1 and m["phases"]["any_change"]["n"] == 4


def test_the_adapter_run_names_its_adapter_and_the_base_run_none(study):
    adapter = study["adapter"]
    base, tuned = (json.loads((study[w] / "run.json").read_text()) for w in ("base", "tuned"))
    assert base["evaluation"] == tuned["evaluation"] == "phasefusion"
    assert base["adapter"] is None and base["identity"]["adapter"] is None
    assert tuned["adapter"] == str(adapter)
    files = ("adapter_model.safetensors", "adapter_config.json")
    # the adapter by its files' content (not its path: a copy elsewhere is the same adapter)
    assert tuned["identity"]["adapter"] == {"files": {f: hashlib.sha256((adapter / f).read_bytes()).hexdigest()
                                                      for f in files}}
    assert base["identity"]["model"] == tuned["identity"]["model"]  # the same base model under both
    assert base["identity"]["data"] == tuned["identity"]["data"] and base["items"] == tuned["items"]


def test_the_adapter_changes_what_is_scored_not_what_is_shown(study):
    """The two runs score the same frames under the same permutations; the adapter changes every
    posterior, and with it the median margin of both arms."""
    base, tuned = posteriors(study["base"]), posteriors(study["tuned"])
    assert base.keys() == tuned.keys() and len(base) == 4 * (1 + PHASES) * ORDERINGS
    assert all((base[k]["frames"], base[k]["perm"]) == (tuned[k]["frames"], tuned[k]["perm"]) for k in base)
    assert all(base[k]["letter_probs"] != tuned[k]["letter_probs"] for k in base)
    mb, mt = metrics(study["base"])["margin"], metrics(study["tuned"])["margin"]
    assert all(mb[arm]["median_margin"] != mt[arm]["median_margin"] for arm in ARMS)


# --------------------------------------------------------------------------- eval compare


def test_compare_puts_the_adapter_next_to_the_base(study):
    """The compare table: the base, the adapter and the adapter's Δ row, with each arm's accuracy, flip
    rate and answers changed under the phase shift, in % of the runs' metrics.json."""
    columns, rows = table(study["compare"].read_text())
    assert list(rows) == ["base", "js1", "Δ js1", "p js1"]
    wanted = [*(f"acc {a}" for a in ARMS), *(f"flip {a}" for a in ARMS), *(f"changed {a} 0→{SHIFT}" for a in ARMS)]
    assert all(c in columns for c in wanted), columns
    values = {}
    for which, name in (("base", "base"), ("tuned", "js1")):
        m = metrics(study[which])
        table_a = {r["arm"]: r for r in m["table_a"]["rows"]}
        changed = {r["arm"]: r["changed"]["rate"] for r in m["table_b"][0]["rows"]}
        values[name] = {**{f"acc {a}": 100 * table_a[a]["accuracy"] for a in ARMS},
                        **{f"flip {a}": 100 * table_a[a]["flip_rate"] for a in ARMS},
                        **{f"changed {a} 0→{SHIFT}": 100 * changed[a] for a in ARMS}}
        # each cell: the value, then its Wilson interval and n (judgetrain.eval.core.compare)
        assert [rows[name][columns.index(c)].split(" [")[0] for c in wanted] == [f"{values[name][c]:.1f}" for c in wanted]
        assert all(rows[name][columns.index(c)].endswith("(n=4)") for c in wanted)
    # each Δ with its 95% interval (Newcombe's, from the two runs' counts of 4)
    from statsmodels.stats.proportion import confint_proportions_2indep

    def delta(c):
        lo, hi = confint_proportions_2indep(round(values["js1"][c] / 25), 4, round(values["base"][c] / 25), 4, method="newcomb")
        return f"{values['js1'][c] - values['base'][c]:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] (js1 vs base, n=4/4)"

    assert [rows["Δ js1"][columns.index(c)] for c in wanted] == [delta(c) for c in wanted]


def test_compare_shows_the_median_margin_before_and_after(study):
    """The issue's table reports flip rate, median margin and accuracy before and after: the median
    margin of every arm with a posterior (in %, as compare shows every cell), and its Δ, which the
    adapter makes non-zero (test above)."""
    from judgetrain.eval.core.compare import compare

    result = compare([study["base"], study["tuned"]], ["base", "js1"])
    columns = result["columns"]
    margins = [c for c in columns if "margin" in c]
    assert len(margins) == len(ARMS), f"no median-margin cell per arm in the compare table: {columns}"
    assert margins == [f"margin {a}" for a in ARMS]
    (_, base, _), (_, tuned, _), (_, delta, _) = result["rows"]
    for arm, label in zip(ARMS, margins, strict=True):
        assert arm in label
        i = columns.index(label)
        before = 100 * metrics(study["base"])["margin"][arm]["median_margin"]
        after = 100 * metrics(study["tuned"])["margin"][arm]["median_margin"]
        assert (base[i], tuned[i]) == (pytest.approx(before), pytest.approx(after))
        assert delta[i] == pytest.approx(after - before) and delta[i] != 0


def test_compare_tests_each_column_paired_against_the_base(study):
    """The p row under the Δ row: per arm, exact McNemar on per-question correctness and on
    per-question ordering flips, and a two-sided Wilcoxon signed-rank test on per-question margins,
    all on the 4 questions both runs scored; recomputed here from the two runs' predictions with
    statsmodels and scipy. Table 1B's columns have no paired test (–). The markdown names each
    test and n."""
    import scipy.stats
    from statsmodels.stats.contingency_tables import mcnemar

    from judgetrain.eval.core.compare import compare

    result = compare([study["base"], study["tuned"]], ["base", "js1"])
    columns = result["columns"]
    (p_row,) = result["paired"]
    assert p_row["label"] == "p js1"
    got = dict(zip(columns, p_row["pvalues"], strict=True))
    expected = {}
    for arm in ARMS:
        before, after = arm_answers(study["base"], arm), arm_answers(study["tuned"], arm)
        assert before.keys() == after.keys() and len(before) == 4
        for kind, outcome in (("acc", lambda a, g: a[0] == g), ("flip", lambda a, g: len(set(a)) > 1)):
            x = [outcome(before[q][0], before[q][2]) for q in before]
            y = [outcome(after[q][0], after[q][2]) for q in before]
            counts = [[sum(a and b for a, b in zip(x, y, strict=True)), sum(a and not b for a, b in zip(x, y, strict=True))],
                      [sum(b and not a for a, b in zip(x, y, strict=True)), sum(not a and not b for a, b in zip(x, y, strict=True))]]
            expected[f"{kind} {arm}"] = mcnemar(counts, exact=True).pvalue
        d = [margin(after[q][1]) - margin(before[q][1]) for q in before]
        assert any(d)  # the adapter moved every arm's margins (test above), so the test is defined
        expected[f"margin {arm}"] = scipy.stats.wilcoxon(d).pvalue
    assert {c: got[c] for c in expected} == pytest.approx(expected, abs=1e-12)
    assert all(got[c] is None for c in columns if c.startswith("changed "))
    assert p_row["n"] == dict.fromkeys(expected, 4)

    columns_md, rows = table(study["compare"].read_text())
    assert columns_md == columns
    shown = [rows["p js1"][columns.index(c)] for c in columns]
    assert shown == [("–" if got[c] is None else f"{got[c]:.1e}" if got[c] < 0.001 else f"{got[c]:.3f}") for c in columns]
    md = study["compare"].read_text()
    assert "exact McNemar on per-question correctness: " + ", ".join(f"`acc {a}`" for a in ARMS) in md
    assert "exact McNemar on per-question ordering flips: " + ", ".join(f"`flip {a}`" for a in ARMS) in md
    assert "Wilcoxon signed-rank (two-sided) on per-question margins: " + ", ".join(f"`margin {a}`" for a in ARMS) in md
    assert "- p js1: n = 4 paired items (by id)" in md
