"""A sweep as one SLURM job array (`judgetrain sweep … --slurm --array K`): the array's script and
the tasks' options, fixed at submission, no storage URL in any file; one task run as SLURM runs
it (its script under bash, the storage in the environment) trains one trial on the shared study
and ends; the options' refusals.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from judgetrain import cli
from judgetrain.sweep.array import STORAGE_ENV, write_array_job
from judgetrain.sweep.config import SweepConfig

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"


@pytest.fixture(scope="module")
def array_recipe(tmp_path_factory, tiny_prism_recipe):
    """The tiny PRISM recipe pointed at this session's model and a 12-item PRISM set (tests/conftest.py)."""
    return tiny_prism_recipe(tmp_path_factory.mktemp("array"))


def config(recipe: Path, tmp_path: Path, **kw) -> SweepConfig:
    values = dict(recipe=recipe, space=SPACE, trials=3, storage=f"journal:{tmp_path / 'study.journal'}", study="arr",
                  out=tmp_path / "trials", objective="eval_loss", slurm=True, array=2, overrides=["--max_steps", "2"])
    values.update(kw)
    return SweepConfig(**values)


def test_the_array_script_and_the_tasks_options_are_fixed_at_submission_without_the_storage(array_recipe, tmp_path):
    secret = "postgresql://optuna:hunter2@db-host/sweeps"
    cfg = config(array_recipe, tmp_path, storage=secret, gpus_per_node=8, time="2:00:00")
    script = write_array_job(cfg)
    text = script.read_text()
    assert "#SBATCH --array=0-2%2" in text.splitlines() and "#SBATCH --gpus-per-node=8" in text.splitlines()
    assert "--signal" not in text  # a task's controller would die of SIGUSR1; its time limit should fit one trial
    options = yaml.safe_load((script.parent / "sweep.yaml").read_text())
    assert options["trials"] == 3 and options["num_processes"] == 8 and options["overrides"] == ["--max_steps", "2"]
    assert "storage" not in options and "array" not in options and "slurm" not in options
    kept = Path(options["recipe"])
    assert kept.parent == script.parent and kept.read_text() == array_recipe.read_text()
    array_recipe.write_text(array_recipe.read_text())  # the original may change now: the tasks read the copy
    for f in script.parent.rglob("*"):
        assert "hunter2" not in f.read_text(errors="replace"), f
    assert f'--storage "${STORAGE_ENV}" --trials_here 1' in text


def test_array_options_are_refused_where_a_task_could_not_run(array_recipe, tmp_path, capsys):
    base = [str(array_recipe), "--space", str(SPACE), "--trials", "2", "--study", "arr", "--out", str(tmp_path / "t")]
    assert cli.main(["sweep", *base, "--array", "2"]) == 2
    assert "--array 2: a SLURM job array; add --slurm" in capsys.readouterr().err
    with pytest.raises(Exception, match="give --nodes 1"):
        write_array_job(config(array_recipe, tmp_path, nodes=2))
    with pytest.raises(Exception, match="give a storage every node reaches"):
        write_array_job(config(array_recipe, tmp_path, storage="sqlite:///x.db"))


def test_one_array_task_trains_one_trial_of_the_shared_study_and_ends(array_recipe, tmp_path):
    cfg = config(array_recipe, tmp_path)
    script = write_array_job(cfg)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "ACCELERATE_"))}
    env.update({STORAGE_ENV: cfg.storage, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}"})
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    from judgetrain.sweep.storage import storage_from_url

    trials = optuna.load_study(study_name="arr", storage=storage_from_url(cfg.storage)).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE]  # one trial, though the study wants 3
    assert Path(trials[0].user_attrs["output_dir"]).parent == (tmp_path / "trials").resolve()
