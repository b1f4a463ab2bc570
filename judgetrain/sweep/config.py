"""``judgetrain sweep``'s options (:class:`SweepConfig`), declared once: the command's parser is
made from them, :func:`~judgetrain.sweep.controller.run_sweep` takes them, and what they imply
(the loaded search space, the objectives, the processes per trial, the enqueued parameter sets)
is read from them as properties. :meth:`SweepConfig.check` fails, before the study opens, on
everything that would otherwise fail in the first trial.
Docs: "how-to/sweeps.md".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from judgetrain.cluster import SlurmArgs
from judgetrain.compat.transformers import parser_actions
from judgetrain.config import arg, one_of
from judgetrain.train.accelerate_configs import NAMES

from .space import DEFAULT_OBJECTIVE, PRUNERS, Objective, SearchSpace, SweepError, flag_value, parse_objectives
from .storage import DEFAULT_STORAGE

__all__ = ["SweepConfig"]


@dataclass
class SweepConfig(SlurmArgs):
    """``judgetrain sweep``'s options, declared once: the command's parser is made from
    them (:func:`~judgetrain.sweep.controller.make_parser`; ``--config FILE.yaml`` sets them)
    and :func:`~judgetrain.sweep.controller.run_sweep` takes them. What they imply (the loaded
    search space, the objectives, the enqueued parameter sets) are properties. With ``slurm``,
    each trial is a SLURM job of the :class:`~judgetrain.cluster.SlurmArgs` resources."""

    recipe: Path | None = arg(
        None,
        "recipe YAML to sweep, or `best` to print a finished study's winning recipe (the first word: `judgetrain sweep RECIPE`)",
        positional=True,
    )
    study_name: str | None = arg(
        None, "(with `best`) the study name (the second word: `judgetrain sweep best STUDY`)", positional=True
    )
    space: Path | None = arg(None, "search space YAML (recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)")
    trials: int = arg(50, "finished trials the study should hold (all controllers together)", minimum=1)
    storage: str = arg(DEFAULT_STORAGE, "Optuna storage URL; postgresql://… or journal:FILE to share a study between machines")
    study: str | None = arg(None, "study name (None: the recipe's file name)")
    out: Path | None = arg(None, "trial folders (None: runs/sweeps/STUDY); with `best`, the recipe file to write (None: stdout)")
    objective: str = arg(DEFAULT_OBJECTIVE, "eval_loss or judge:SUBSET/METRIC, comma-separated for several")
    direction: str | None = arg(None, "minimize/maximize per objective (None: from the metric)")
    pruner: str = arg("median", one_of(PRUNERS), choices=PRUNERS)
    warmup_steps: int = arg(0, "median pruner: steps before a trial can be pruned", minimum=0)
    startup_trials: int = arg(2, "median pruner: trials that are never pruned", minimum=0)
    seed: int = arg(
        42,
        "sampler seed; each trial's TPE draw is seeded from (study, seed, trial number), so restarted "
        "and parallel controllers may keep the same seed without repeating each other",
        minimum=0,
        maximum=2**32 - 1,
    )
    accelerate_config: str | None = arg(None, f"shipped name ({', '.join(NAMES)}) or accelerate YAML, per trial")
    num_processes: int | None = arg(None, "processes per trial", minimum=1)
    retries: int = arg(0, "re-run a failed (crashed, OOM, killed) trial this many times", minimum=0)
    stop_after_failures: int = arg(
        3,
        "stop the sweep, printing the error, when this many trials in a row fail with the "
        "same error (a configuration every trial shares); 0: never",
        minimum=0,
    )
    heartbeat: int = arg(60, "RDB storage heartbeat interval in seconds (stale after 2x)", minimum=1)
    enqueue: Path | None = arg(None, "YAML list of parameter sets to try first (e.g. the paper's best)")
    trial: int | None = arg(None, "(with `best`) take this trial instead of the best one", minimum=0)
    parallel: int = arg(1, "trials running at once, from this controller (with --slurm: its jobs in the queue at once)")
    slurm: bool = arg(
        False,
        "each trial its own SLURM job (sbatch; --nodes, --gpus_per_node, --partition, --time, …), "
        "waited for; give a storage every node reaches (postgresql://…)",
    )
    array: int = arg(
        0,
        "with --slurm: submit the sweep as one SLURM job array of --trials tasks, this many running at once, each "
        "task a controller that trains one trial on its node (nothing stays on the login node); 0: one job a trial, "
        "waited for by this controller",
        minimum=0,
    )
    trials_here: int | None = arg(
        None, "trials this controller starts before it ends (a job array's task: 1); None: until the study is full", minimum=1
    )
    poll: float = arg(
        5.0,
        "seconds between looks at the study: for the values a running trial reports (printed as they "
        "come), and while other controllers' trials fill it",
        above=0,
    )
    overrides: list[str] = arg(
        [],
        "recipe overrides for every trial: on the command line, any argument not listed here "
        "(--field value); in a --config file, a mapping (field: value)",
        passthrough=True,
    )

    def __post_init__(self) -> None:
        if isinstance(self.overrides, dict):  # from a --config file
            self.overrides = [a for k, v in self.overrides.items() for a in (f"--{k}", flag_value(v))]
        self.overrides = [str(a) for a in self.overrides or []]
        for name in ("recipe", "space", "out", "enqueue"):
            if isinstance(getattr(self, name), str):
                setattr(self, name, Path(getattr(self, name)))
        if self.recipe is not None and not self.is_best:
            self.study = self.study or self.recipe.stem
            self.out = self.out or Path("runs") / "sweeps" / self.study

    @property
    def recipe_file(self) -> Path:
        """The sweep's recipe (a sweep, not ``best``, always has one: the parser requires it)."""
        if self.recipe is None:
            raise SweepError("give the recipe to sweep: `judgetrain sweep RECIPE --space SPACE`")
        return self.recipe

    @property
    def trials_dir(self) -> Path:
        """Where the trial folders go (``--out``, else ``runs/sweeps/STUDY``: set with the recipe)."""
        return self.out if self.out is not None else Path("runs") / "sweeps" / str(self.study or self.recipe_file.stem)

    @property
    def is_best(self) -> bool:
        return self.recipe is not None and str(self.recipe) == "best"

    @cached_property
    def search_space(self) -> SearchSpace:
        if self.space is None:
            raise SweepError(
                "--space: give a search space YAML (shipped: recipes/spaces/paper002.yaml, recipes/spaces/lora-wide.yaml)"
            )
        return SearchSpace.load(self.space)

    @cached_property
    def world_size(self) -> int:
        """Processes per trial (a searched batch size must divide the recipe's effective batch)."""
        from judgetrain.train.accelerate_configs import world_size

        if self.slurm:  # the job's: one process per GPU of every node
            from judgetrain.cluster import processes

            return self.num_processes or processes(self)
        return world_size(self)

    @cached_property
    def objectives(self) -> list[Objective]:
        return parse_objectives(self.objective, self.direction)

    @cached_property
    def enqueued(self) -> list[dict[str, Any]]:
        """The parameter sets of ``--enqueue``, tried first."""
        from judgetrain.yamlfile import read_yaml

        if self.enqueue is None:
            return []
        if not self.enqueue.is_file():
            raise SweepError(f"--enqueue {self.enqueue}: no such file")
        sets = read_yaml(self.enqueue)
        if not isinstance(sets, list) or not all(isinstance(e, dict) for e in sets):
            raise SweepError(f"--enqueue {self.enqueue}: give a YAML list of field: value mappings")
        return sets

    def check(self) -> None:
        """Everything that can fail before the study opens (the search space is checked
        against the recipe later, by :meth:`SearchSpace.validate`)."""
        if self.recipe is None:
            raise SweepError(
                "give the recipe to sweep: `judgetrain sweep RECIPE --space SPACE.yaml …` "
                "(or `judgetrain sweep best STUDY` for a finished study's winner)"
            )
        if not self.recipe.is_file():
            raise SweepError(f"recipe {self.recipe} not found")
        for implied in ("search_space", "objectives", "enqueued"):  # loaded now, so that their errors come first
            getattr(self, implied)
        from judgetrain.cluster import check_slurm, require_slurm
        from judgetrain.train.accelerate_configs import accelerate_args, launch_problems

        check_slurm(self, self.slurm)
        if self.parallel < 1:
            raise SweepError(f"--parallel {self.parallel}: give at least 1")
        if self.array and not self.slurm:
            raise SweepError(f"--array {self.array}: a SLURM job array; add --slurm")
        if self.slurm:
            require_slurm()
        self._check_overrides()
        self._check_method()
        accelerate_args(self)  # an unknown --accelerate_config fails here, not in the first trial
        problems = [] if self.slurm else launch_problems(self)  # a job's GPUs are its nodes', not this machine's
        if problems:
            raise SweepError(problems[0])

    def _check_method(self) -> None:
        """A reward model's trials (``method: reward``) are compared by their evaluation loss: the judge objective
        scores verdicts, and a reward model gives a number."""
        from judgetrain.train.parser import recipe_method

        judged = [o.name for o in self.objectives if o.name.startswith("judge:")]
        if judged and recipe_method(["--config", str(self.recipe), *self.overrides]) == "reward":
            raise SweepError(
                f"--objective {judged[0]}: the recipe trains a reward model (method: reward), which gives each sequence "
                "a number, not a verdict the judge objective scores; use --objective eval_loss (TRL's Bradley–Terry "
                "loss on the eval split's pairs)"
            )

    def _check_overrides(self) -> None:
        """An argument the sweep does not know is a recipe override; one that is no recipe field
        either fails here, with the closest of the sweep's options and the recipe's fields
        (``--trails`` → ``--trials``), rather than in the first trial."""
        from judgetrain.config import make_parser as make_config_parser
        from judgetrain.errors import did_you_mean
        from judgetrain.train.parser import make_parser as recipe_parser

        # a field of an SFT, a GRPO or a reward-model recipe (`method:`); the trial's own parse refuses one its method lacks
        recipe_flags = {
            o for method in ("sft", "grpo", "reward") for a in parser_actions(recipe_parser(method)) for o in a.option_strings
        }
        # the sweep's own flags, as its command's parser (judgetrain.sweep.controller) declares them
        sweep_parser = make_config_parser(SweepConfig, "judgetrain sweep")
        own = {o for a in parser_actions(sweep_parser) for o in a.option_strings if o not in ("-h", "--help")}
        unknown = [a.split("=", 1)[0] for a in self.overrides if a.startswith("--") and a.split("=", 1)[0] not in recipe_flags]
        if unknown:
            raise SweepError(
                "; ".join(
                    f"unknown argument {a!r}{did_you_mean(a, sorted(own | recipe_flags))} (neither a sweep "
                    "option nor a recipe field: `judgetrain sweep --help`, `judgetrain train --help`)"
                    for a in unknown
                )
            )
