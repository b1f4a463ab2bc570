"""A sweep controller killed while its trial's SLURM job runs, then started again: the new
controller takes the running job over (no cancel, no retry, no second trial) and records its
result; a trial whose job ended while no controller ran is recorded from the job's result,
not failed and trained again. Slow, on the real one-node cluster (and a PostgreSQL study, conftest).
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from judgetrain.cluster import job_state, submit
from judgetrain.sweep.config import SweepConfig
from judgetrain.sweep.objective import TakeOver

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def restart_recipe(tmp_path_factory, tiny_prism_recipe):
    """The tiny PRISM recipe pointed at this session's model and a 12-item PRISM set (tests/conftest.py)."""
    return tiny_prism_recipe(tmp_path_factory.mktemp("restart-recipe"))


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return got


def running_job(storage: str, study: str) -> str | None:
    try:
        trials = optuna.load_study(study_name=study, storage=storage).trials
    except KeyError:
        return None
    job = trials[0].user_attrs.get("slurm_job") if trials else None
    return job if job and job_state(job).state == "RUNNING" else None


@pytest.mark.slow
def test_a_restarted_controller_takes_over_the_running_job_of_the_one_it_replaces(
        tmp_path, restart_recipe, slurm_cluster, postgres_url):
    study = "restart"
    cmd = [str(BIN / "judgetrain"), "sweep", str(restart_recipe), "--space", str(SPACE), "--trials", "1", "--storage",
           postgres_url, "--study", study, "--out", str(tmp_path / "trials"), "--objective", "eval_loss", "--slurm",
           "--retries", "1", "--poll", "1", "--max_steps", "4"]
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        job = wait_for(lambda: running_job(postgres_url, study), 300, "trial 0's job to run")
    finally:
        first.send_signal(signal.SIGKILL)  # the login-node process dies; its job runs on
        first.wait()
    assert job_state(job).state == "RUNNING"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"SLURM job {job} still runs for it: this controller takes it over" in again.stderr
    trials = optuna.load_study(study_name=study, storage=postgres_url).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE], [(t.state, t.user_attrs.get("fail_reason")) for t in trials]
    assert trials[0].user_attrs["slurm_job"] == job and trials[0].user_attrs["slurm_jobs"] == [job]
    assert "fail_reason" not in trials[0].user_attrs and trials[0].user_attrs["steps"] == 4
    assert job_state(job).state == "COMPLETED"  # not cancelled


@pytest.mark.slow
def test_a_trial_whose_job_ended_while_no_controller_ran_is_recorded_from_its_result(tmp_path, restart_recipe, slurm_cluster):
    from rich.console import Console

    storage, out = f"sqlite:///{tmp_path / 'study.db'}", tmp_path / "trials" / "trial-0000"
    study = optuna.create_study(study_name="ended", storage=storage, direction="minimize")
    trial = study.ask({"learning_rate": optuna.distributions.FloatDistribution(1e-5, 1e-3, log=True)})
    gone = subprocess.Popen(["true"])
    gone.wait()  # the controller: a pid that no longer runs
    (out / "slurm").mkdir(parents=True)
    result = {"state": "complete", "values": [0.25], "step": 2, "metrics": {"eval_loss": 0.25}}
    script = out / "slurm" / "job.sbatch"  # the trial's job: writes its result as a trial does, and ends
    script.write_text(f"#!/bin/bash\n#SBATCH --output={out}/slurm/%x-%j-%t.log\n"
                      f"echo '{json.dumps(result)}' > {out}/sweep_result.json\n")
    job = submit(script)
    trial.set_user_attr("controller", {"host": socket.gethostname(), "pid": gone.pid})
    trial.set_user_attr("slurm_job", job)
    trial.set_user_attr("output_dir", str(out))
    wait_for(lambda: job_state(job).state == "COMPLETED", 60, f"job {job} to complete")
    cfg = SweepConfig(recipe=restart_recipe, space=SPACE, trials=1, storage=storage, study="ended", out=out.parent,
                      objective="eval_loss", slurm=True, retries=1, poll=0.5)
    console = io.StringIO()
    take_over = TakeOver(cfg, study, Console(file=console, width=300))
    assert take_over() == []  # nothing failed
    for thread in take_over.threads:
        thread.join(60)
    trials = optuna.load_study(study_name="ended", storage=storage).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE], [(t.state, t.user_attrs) for t in trials]  # no retry
    assert trials[0].values == [0.25] and trials[0].user_attrs["slurm_job"] == job
    assert trials[0].user_attrs["controller"]["pid"] == os.getpid() and "fail_reason" not in trials[0].user_attrs
    assert f"SLURM job {job} ended meanwhile: this controller records its result" in console.getvalue()
