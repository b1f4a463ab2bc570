"""What a sweep leaves behind: the table of trials printed at the end, the wandb summary run,
and the winning configuration as a recipe (``judgetrain sweep best``), written with exactly
the overrides its trial ran. Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Literal, cast

from judgetrain.compat.transformers import parser_actions

from .space import SweepError, flag_value
from .storage import storage_from_url

__all__ = ["best_recipe", "print_summary", "recipe_with_overrides", "wandb_summary"]


def wandb_summary(study, out: Path, objectives: list[str]) -> tuple[Path, dict[str, Any]]:
    """One wandb run (job type ``study``, in the trials' group) with every trial's
    state, values and parameters as a table and the best values in its summary.
    Offline into ``out`` when no API key is configured, as the trials do."""
    import wandb
    from optuna.trial import TrialState

    from judgetrain.train.outputs import DEFAULT_WANDB_PROJECT  # the training runs' project: one place for both
    from judgetrain.wandb_mode import offline_without_a_key

    if offline_without_a_key():
        os.environ["WANDB_MODE"] = "offline"
    params = sorted({k for t in study.trials for k in t.params})
    columns = ["trial", "state", *objectives, "steps", *params]
    rows = [
        [
            t.number,
            t.state.name,
            *(t.values or [None] * len(objectives)),
            t.user_attrs.get("steps"),
            *(t.params.get(k) for k in params),
        ]
        for t in study.trials
    ]
    # WANDB_MODE passed on as given: wandb checks it (wandb.init's annotation leaves out the legacy dryrun and run)
    mode = cast("Literal['online', 'offline', 'disabled', 'shared'] | None", os.environ.get("WANDB_MODE"))
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", DEFAULT_WANDB_PROJECT),
        mode=mode,
        group=study.study_name,
        job_type="study",
        name=f"{study.study_name}-summary",
        dir=str(out),
        config={"study": study.study_name, "objectives": objectives},
        reinit="finish_previous",
    )
    run.log({"trials": wandb.Table(columns=columns, data=rows)})
    counts = {s.name.lower(): len(study.get_trials(deepcopy=False, states=(s,))) for s in TrialState}
    summary: dict[str, Any] = {f"trials/{k}": v for k, v in counts.items()}
    if counts["complete"]:
        best = study.best_trials[0] if len(objectives) > 1 else study.best_trial
        summary.update(
            {
                "best/trial": best.number,
                **{f"best/{o}": v for o, v in zip(objectives, best.values, strict=True)},
                **{f"best/{k}": v for k, v in best.params.items()},
            }
        )
    run.summary.update(summary)
    run_dir = Path(run.dir).parent
    run.finish()
    wandb.teardown()  # finish() returns before the service has written the offline file; teardown waits for it
    return run_dir, summary


def print_summary(study, cfg, console) -> None:
    """The study's trials as a table on the console, the best trial(s), and where the folders are."""
    from optuna.trial import TrialState
    from rich.table import Table

    table = Table(title=f"study {cfg.study} ({cfg.storage})")
    for col in ("trial", "state", "value(s)", "steps", "params", "note"):
        table.add_column(col)
    for t in study.get_trials(deepcopy=False):
        vals = "" if t.values is None else ", ".join(f"{v:.4g}" for v in t.values)
        table.add_row(
            str(t.number),
            t.state.name,
            vals,
            str(t.user_attrs.get("steps", "")),
            json.dumps(t.params),
            (t.user_attrs.get("fail_reason") or "").split("\n")[0][:80],
        )
    console.print(table)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if complete:
        best = study.best_trials if len(cfg.objectives) > 1 else [study.best_trial]
        for b in best:
            console.print(f"best trial {b.number}: {b.values} {json.dumps(b.params)} in {b.user_attrs.get('output_dir')}")
    print(f"trial folders in {cfg.out}; `judgetrain sweep best {cfg.study} --storage {cfg.storage}` writes the winning recipe")


def recipe_with_overrides(recipe: dict[str, Any], overrides: list[str], *, method: str | None = None) -> dict[str, Any]:
    """``recipe`` with ``--field value`` flags applied as the trainer applies them: argparse
    with the trainer's own parser converts each value to its field's type (``--max_steps 4``
    is the number 4, ``--bf16 false`` is False, a list field takes every value up to the
    next flag), later flags winning. What the parser does not take raises a SweepError. The
    parser is the training method's (``--method`` among the overrides, else ``method``, else the
    recipe's ``method``, else SFT's)."""
    import argparse

    from judgetrain.config import jsonable
    from judgetrain.train.parser import make_parser

    flags = [a.split("=", 1)[1] for a in overrides if a.startswith("--method=")]
    flags += [overrides[i + 1] for i, a in enumerate(overrides[:-1]) if a == "--method"]
    method = flags[-1] if flags else method or recipe.get("method")
    parser = make_parser(method if method in ("grpo", "reward") else "sft")
    for action in parser_actions(parser):  # only the fields the overrides name end up in the namespace
        action.default = argparse.SUPPRESS
    given, rest = parser.parse_known_args(overrides)
    if rest:
        raise SweepError(f"override {rest[0]}: not a recipe field (or not a value it takes): {' '.join(rest)}")
    return {**recipe, **jsonable(vars(given))}


def _pick_trial(study, study_name: str, trial_number: int | None):
    from optuna.trial import TrialState

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        states = {s.name.lower(): len(study.get_trials(deepcopy=False, states=(s,))) for s in TrialState}
        held = ", ".join(f"{n} {name}" for name, n in states.items() if n) or "no trials"
        raise SweepError(f"study {study_name!r} has no complete trial yet ({held}); run the sweep until one completes")
    if trial_number is not None:
        pick = [t for t in complete if t.number == trial_number]
        if not pick:
            raise SweepError(
                f"--trial {trial_number}: study {study_name!r} has no complete trial {trial_number}; its complete "
                f"trials: {', '.join(str(t.number) for t in complete)}"
            )
        return pick[0]
    if len(study.directions) > 1:
        front = study.best_trials
        print(
            f"multi-objective study: {len(front)} trials on the Pareto front ({[t.number for t in front]}); "
            f"taking trial {front[0].number} (pick another with --trial)",
            file=sys.stderr,
        )
        return front[0]
    return study.best_trial


def _existing_study(url: str, study_name: str):
    """The storage at ``url`` when it holds ``study_name``; else a SweepError naming the
    studies it holds (reading a study never creates a database or a study)."""
    import optuna

    from judgetrain.errors import did_you_mean

    file = (
        url.removeprefix("sqlite:///")
        if url.startswith("sqlite:///")
        else (url.removeprefix("journal:") if url.startswith("journal:") or url.endswith((".journal", ".log")) else None)
    )
    if file is not None and not Path(file).expanduser().is_file():
        raise SweepError(
            f"--storage {url}: no such file {file}; give the storage the sweep wrote to (`judgetrain sweep … --storage URL`)"
        )
    storage = storage_from_url(url, heartbeat_interval=None)
    names = optuna.study.get_all_study_names(storage)
    if study_name not in names:
        raise SweepError(
            f"no study {study_name!r} in {url}{did_you_mean(study_name, names)}; it holds "
            + (", ".join(repr(n) for n in sorted(names)) if names else "no studies")
            + " (a study is named by --study, by default the recipe's file name)"
        )
    return storage


def best_recipe(storage: str, study_name: str, trial_number: int | None = None, out: Path | None = None) -> tuple[str, Any]:
    """The winning trial's recipe as YAML text: the sweep's recipe with exactly the
    overrides that trial ran (the space's fixed fields, its sampled values and the sweep's
    ``--field value`` overrides), a new ``output_dir``/``run_name``, and as its first line
    the command that retrains it from ``out``."""
    import optuna
    import yaml

    from judgetrain.yamlfile import load_yaml

    study = optuna.load_study(study_name=study_name, storage=_existing_study(storage, study_name))
    best = _pick_trial(study, study_name, trial_number)
    overrides = best.user_attrs.get("overrides")
    if overrides is None:  # a trial of a study started before trials stored their overrides
        fixed = [a for k, v in (study.user_attrs.get("fixed") or {}).items() for a in (f"--{k}", flag_value(v))]
        overrides = (
            fixed
            + [a for k, v in best.params.items() for a in (f"--{k}", flag_value(v))]
            + list(study.user_attrs.get("extra") or [])
        )
    recipe = load_yaml(study.user_attrs["recipe_yaml"], f"study {study_name}'s recipe") or {}
    typed = best.user_attrs.get("recipe_overrides")  # a trial of an older study: typed here, by the trainer's parser
    recipe = {**recipe, **typed} if typed is not None else recipe_with_overrides(recipe, overrides)
    name = f"{study_name}-trial-{best.number:04d}"
    recipe["output_dir"] = f"runs/{name}"
    recipe["run_name"] = name
    header = (
        f"# accelerate launch -m judgetrain.train --config {out or 'THIS_FILE.yaml'}\n"
        f"# Best trial {best.number} of Optuna study {study_name!r}: {study.user_attrs.get('objectives')} = {best.values}\n"
        f"# {study.user_attrs.get('recipe')} with the trial's overrides: {' '.join(overrides)}\n"
        f"# (the trial trained in {best.user_attrs.get('output_dir')}; output_dir and run_name here are new)\n"
    )
    return header + yaml.safe_dump(recipe, sort_keys=False), best
