"""A SLURM training job warned before its time limit (``#SBATCH --signal=B:USR1@N``: SLURM sends
SIGUSR1 to the job's script; here sent as SLURM sends it, ``scancel --batch --signal=USR1``): the
training saves a checkpoint at the step it is at, the job requeues itself, and its rerun ends
with the adapter of an uninterrupted run; the script records how the job ended. Slow, on the
real one-node cluster (conftest).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from judgetrain.cluster import exit_record, job_state, rank_log

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def recipe_args(tiny_model, timecatch_build, out: Path) -> list[str]:
    return ["--config", str(REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"), "--model_name_or_path",
            str(tiny_model("qwen3-vl")), "--datasets", str(timecatch_build[0]), "--output_dir", str(out), "--max_steps",
            "10", "--save_steps", "2", "--save_total_limit", "10", "--learning_rate", "5e-3"]


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return got


@pytest.mark.slow
def test_the_time_limit_signal_checkpoints_requeues_and_the_rerun_ends_as_an_uninterrupted_run(
        tmp_path, tiny_model, timecatch_build, slurm_cluster):
    full = tmp_path / "full"
    subprocess.run([str(BIN / "judgetrain"), "train", *recipe_args(tiny_model, timecatch_build, full)], check=True,
                   capture_output=True, timeout=600)
    run = tmp_path / "runs" / "job"
    proc = subprocess.run([str(BIN / "judgetrain"), "train", *recipe_args(tiny_model, timecatch_build, run), "--slurm",
                           "--submit", "--time", "00:30:00"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = proc.stdout.split("submitted SLURM job ", 1)[1].split(":", 1)[0]
    assert "#SBATCH --signal=B:USR1@300" in (run / "slurm" / "job.sbatch").read_text()
    node0 = rank_log(run, "job", job)
    try:
        wait_for(lambda: (run / "checkpoint-2" / "judgetrain_checkpoint_complete.json").exists()
                 or job_state(job).ended, 300, "checkpoint-2")
        assert not job_state(job).ended, node0.read_text(errors="replace")[-3000:]
        # what SLURM does N seconds before the time limit, to the script only (B:)
        subprocess.run(["scancel", "--batch", "--signal=USR1", job], check=True)
        wait_for(lambda: job_state(job).restarts == 1 and job_state(job).state == "PENDING", 120, "the job to requeue")
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)  # SLURM holds it 2 min
        state = wait_for(lambda: (s := job_state(job)).ended and s, 300, "the requeued job to end")
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    log = node0.read_text(errors="replace")
    assert state.state == "COMPLETED" and state.restarts == 1, log[-3000:]
    step = int(re.search(r"Training stopped by SIGUSR1 at step (\d+); checkpoint saved", log).group(1))
    assert 2 < step < 10
    assert json.loads((run / f"checkpoint-{step}" / "trainer_state.json").read_text())["global_step"] == step
    assert f"resume_from_checkpoint auto: {run / f'checkpoint-{step}'}" in log and "Training finished at step 10" in log
    script_log = (run / "slurm" / f"job-{job}.log").read_text()
    assert "SIGUSR1: a checkpoint at the next step, then the job requeues itself" in script_log
    assert "(restart 1)" in script_log
    assert json.loads(exit_record(run, job).read_text()) == {"state": "COMPLETED", "exit_code": 0, "restarts": 1}
    a, b = load_file(full / "adapter_model.safetensors"), load_file(run / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)
