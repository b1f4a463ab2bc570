"""A job's state when SLURM's controller stalls and after SLURM has forgotten the job: sacct's
answer and the job's exit record read as states; then, slow, on the real one-node cluster
(conftest): a 30 s `kill -STOP` of slurmctld while a job runs is waited through (the job is not
cancelled and ends COMPLETED), and a job past `MinJobAge` (SLURM's accounting disabled, as on
the test cluster) is answered by the exit record its script left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from judgetrain.cluster import ClusterError, JobState, exit_record, forgotten_job_state, job_state, submit, wait_for_job
from judgetrain.cluster.jobs import read_exit_record, sacct_state


def test_sacct_lines_read_as_the_jobs_latest_state():
    assert sacct_state("COMPLETED|0:0\n") == JobState("COMPLETED", 0)
    assert sacct_state("FAILED|3:0") == JobState("FAILED", 3)
    assert sacct_state("CANCELLED by 0|0:15") == JobState("CANCELLED", 143)  # killed by SIGTERM: 128 + 15
    assert sacct_state("NODE_FAIL|1:0\nRUNNING|0:0\n") == JobState("RUNNING")  # requeued: the latest run counts
    assert not sacct_state("REQUEUED|0:0").ended and not sacct_state("PENDING|0:0").ended
    assert sacct_state("") is None and sacct_state("\n") is None  # accounting has no line for the job
    assert sacct_state("COMPLETED|") == JobState("COMPLETED")  # no code given: none made up


def test_an_exit_record_reads_as_the_state_it_recorded_and_anything_else_is_refused(tmp_path):
    record = tmp_path / "7.exit"
    record.write_text('{"state": "FAILED", "exit_code": 2, "restarts": 1}\n')
    assert read_exit_record(record) == JobState("FAILED", 2, 1)
    for text in ('{"state": "COMPLETED"}', '{"state": "RUNNING", "exit_code": 0}', "[1]", '{"state": "COMPL'):
        record.write_text(text)
        with pytest.raises(ClusterError, match=f"{record}: not a job's exit record"):
            read_exit_record(record)


def job_script(run_dir: Path, seconds: int, code: int = 0) -> Path:
    """A job that sleeps, then records how it ended as judgetrain's scripts do, and exits ``code``."""
    (run_dir / "slurm").mkdir(parents=True, exist_ok=True)
    record = exit_record(run_dir, "$SLURM_JOB_ID")
    state = "COMPLETED" if code == 0 else "FAILED"
    script = run_dir / "slurm" / "job.sbatch"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --output={run_dir}/slurm/%j.log\nsleep {seconds}\n"
        f"printf '{{\"state\": \"{state}\", \"exit_code\": {code}, \"restarts\": 0}}' > {record}\nexit {code}\n")
    return script


def controller_pid(conf: Path) -> int:
    return int((conf.parent / "slurmctld.pid").read_text().strip())


@pytest.mark.slow
def test_a_30_second_controller_stall_is_waited_through(tmp_path, slurm_cluster, capfd):
    job = submit(job_script(tmp_path, 15))
    pid = controller_pid(slurm_cluster)
    got: dict = {}
    waiter = threading.Thread(target=lambda: got.update(state=wait_for_job(job, 1, run_dir=tmp_path)))
    waiter.start()
    deadline = time.monotonic() + 120
    while job_state(job).state != "RUNNING":
        assert time.monotonic() < deadline, f"job {job} did not start within 120 s"
        time.sleep(0.2)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(30)
    finally:
        os.kill(pid, signal.SIGCONT)
    waiter.join(timeout=180)
    assert not waiter.is_alive()
    assert got["state"] == JobState("COMPLETED", 0, 0)
    assert "SLURM's controller does not answer" in capfd.readouterr().err


@pytest.mark.slow
def test_a_job_slurm_has_forgotten_is_answered_by_its_exit_record(tmp_path, slurm_cluster):
    conf = slurm_cluster
    text = conf.read_text()
    conf.write_text(text.replace("MinJobAge=900", "MinJobAge=2"))
    subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    try:
        done, failed = submit(job_script(tmp_path / "ok", 1)), submit(job_script(tmp_path / "bad", 1, code=3))

        def forgotten(job: str) -> bool:
            return "Invalid job id" in subprocess.run(["scontrol", "show", "job", job], capture_output=True,
                                                      text=True).stderr
        deadline = time.monotonic() + 240
        while not (forgotten(done) and forgotten(failed)):
            assert time.monotonic() < deadline, "SLURM kept the ended jobs past MinJobAge"
            time.sleep(1)
    finally:
        conf.write_text(text)
        subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
    sacct = subprocess.run(["sacct", "-j", done], capture_output=True, text=True)
    assert sacct.returncode != 0 or not sacct.stdout.strip() or "disabled" in sacct.stderr  # no accounting here
    assert job_state(done, tmp_path / "ok") == JobState("COMPLETED", 0, 0)
    assert job_state(failed, tmp_path / "bad") == JobState("FAILED", 3, 0)
    assert job_state(done) == JobState("UNKNOWN")  # without its run folder, nothing says
    assert wait_for_job(failed, 1, run_dir=tmp_path / "bad") == JobState("FAILED", 3, 0)  # a sweep's wait
    assert json.loads(exit_record(tmp_path / "ok", done).read_text())["state"] == "COMPLETED"
    assert forgotten_job_state(done, tmp_path / "nowhere") == JobState("UNKNOWN")
