"""A sweep controller killed while its trial's SLURM job runs, then started again: the new
controller takes the running job over (no cancel, no retry, no second trial) and records its
result. Slow, on the real one-node cluster and a PostgreSQL study (conftest).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from judgetrain.cluster import job_state

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
