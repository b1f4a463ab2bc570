"""SLURM: the sbatch script of `judgetrain train --slurm`, `judgetrain slurm eval` and a sweep
trial (what bash makes of it on node 1 of 2), the options' errors, the reasons of a job that
SLURM ended; then, slow, on a real one-node cluster (conftest): a tiny recipe submitted and
finished with its script and per-rank logs in the run folder, and a 4-trial sweep on a
PostgreSQL study with one job cancelled and another requeued mid-run.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from judgetrain import cli
from judgetrain.cluster import JobState, SlurmArgs, job_state, rank_log, sbatch_script
from judgetrain.sweep.failures import failure_key, job_failure_reason

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, tiny_prism_recipe):
    """The tiny PRISM recipe pointed at this session's model and a 12-item PRISM set (tests/conftest.py)."""
    return tiny_prism_recipe(tmp_path_factory.mktemp("slurm-recipe"))


def srun_line(script: str) -> str:
    """The script's last command, ``srun … bash -c '…'`` (over several lines)."""
    return script[script.index("\nsrun ") + 1:script.index(" &\nSRUN_PID=$!")]


def launch_line(script: str, **env: str) -> list[str]:
    """The argv that node ``SLURM_NODEID`` execs: the script's srun line, its ``bash -c`` command
    run by bash with ``exec`` printing its arguments instead."""
    srun = shlex.split(srun_line(script))
    assert srun[:1] == ["srun"] and srun[-3:-1] == ["bash", "-c"]
    shown = subprocess.run(["bash", "-c", srun[-1].replace("exec ", "printf '%s\\n' ", 1)], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", **env}, check=True)
    return shown.stdout.splitlines()


# --------------------------------------------------------------------------- the script


def test_two_nodes_of_eight_gpus_start_one_accelerate_launch_per_node_from_slurms_environment(tmp_path):
    args = SlurmArgs(nodes=2, gpus_per_node=8, partition="h200", time="24:00:00", account="lab", sbatch_options="--qos=high")
    script = sbatch_script(args, job_name="judge-8b", run_dir=tmp_path / "run", launch_options=["--num_processes", "16"],
                           module="judgetrain.train", module_args=["--config", "/r/recipe.yaml", "--max_steps", "9"],
                           env={"WANDB_JOB_TYPE": "trial run"}, workdir=tmp_path)
    logs = tmp_path / "run" / "slurm"
    assert [line for line in script.splitlines() if line.startswith("#SBATCH")] == [
        "#SBATCH --job-name=judge-8b", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=64", "#SBATCH --mem-per-gpu=32G",  # 8 CPUs and 32G per GPU, by default
        "#SBATCH --partition=h200", "#SBATCH --time=24:00:00", "#SBATCH --account=lab", "#SBATCH --requeue",
        "#SBATCH --open-mode=append", f"#SBATCH --chdir={tmp_path}", f"#SBATCH --output={logs}/%x-%j.log",
        "#SBATCH --signal=B:USR1@300", "#SBATCH --qos=high"]
    assert "export WANDB_JOB_TYPE='trial run'" in script.splitlines()
    assert f"--output={logs}/%x-%j-%t.log" in srun_line(script)  # one log per node (rank)
    # node 1 of 2: its rank and node 0's address come from SLURM's environment, evaluated on the node
    argv = launch_line(script, SLURM_NNODES="2", SLURM_NODEID="1", MAIN_PROCESS_IP="gpu-017", MAIN_PROCESS_PORT="23456")
    assert argv[1:] == ["launch", "--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "gpu-017",
                        "--main_process_port", "23456", "--num_processes", "16",
                        "-m", "judgetrain.train", "--config", "/r/recipe.yaml", "--max_steps", "9"]
    assert argv[0].endswith("accelerate")
    # the port, when none is given: one per job, so two jobs sharing a node do not collide
    port_line = next(line for line in script.splitlines() if line.startswith("MAIN_PROCESS_PORT="))
    port = subprocess.run(["bash", "-c", f"SLURM_JOB_ID=123456; {port_line}; echo $MAIN_PROCESS_PORT"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert port == "23456"


def test_a_quote_in_an_argument_survives_the_nodes_shell(tmp_path):
    script = sbatch_script(SlurmArgs(), job_name="j", run_dir=tmp_path, launch_options=[], module="m",
                           module_args=["--run_name", "it's mine"])
    assert launch_line(script, SLURM_NNODES="1", SLURM_NODEID="0", MAIN_PROCESS_IP="h", MAIN_PROCESS_PORT="1")[-2:] == \
        ["--run_name", "it's mine"]


def test_train_slurm_writes_the_launch_of_the_recipe_into_the_run_folder(tmp_path, recipe, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "big"
    assert cli.main(["train", str(recipe), "--slurm", "--nodes", "2", "--gpus_per_node", "8", "--accelerate_config", "zero3",
                     "--effective_batch_size", "32", "--output_dir", "runs/big"]) == 0
    script = run / "slurm" / "job.sbatch"
    assert f"wrote {script}; submit it with: sbatch {script}" in capsys.readouterr().out
    text = script.read_text()
    assert "#SBATCH --job-name=big" in text and "#SBATCH --gpus-per-node=8" in text
    argv = launch_line(text, SLURM_NNODES="2", SLURM_NODEID="0", MAIN_PROCESS_IP="a", MAIN_PROCESS_PORT="2")
    kept = run / "slurm" / "accelerate.yaml"  # every node reads the accelerate config beside the script
    assert argv[argv.index("--config_file") + 1] == str(kept) and argv[argv.index("--num_processes") + 1] == "16"
    ds = yaml.safe_load(kept.read_text())["deepspeed_config"]["deepspeed_config_file"]
    assert Path(ds).is_absolute() and Path(ds).is_file()
    kept_recipe = run / "slurm" / "recipe.yaml"  # the job reads the recipe as it was at submission
    assert kept_recipe.read_text() == recipe.read_text()
    assert argv[argv.index("-m"):] == ["-m", "judgetrain.train", "--config", str(kept_recipe), "--effective_batch_size", "32",
                                       "--output_dir", "runs/big", "--resume_from_checkpoint", "auto"]


def test_slurm_options_need_slurm_and_slurm_sets_the_machine_rank(tmp_path, recipe, capsys):
    assert cli.main(["train", str(recipe), "--nodes", "2", "--partition", "h200"]) == 2
    assert "--nodes, --partition: SLURM options; add --slurm" in capsys.readouterr().err
    assert cli.main(["train", str(recipe), "--slurm", "--machine_rank", "1", "--output_dir", str(tmp_path / "r")]) == 2
    assert "--machine_rank: SLURM sets them on every node" in capsys.readouterr().err
    assert cli.main(["train", str(recipe), "--submit"]) == 2
    assert "submit: submits a SLURM job; add --slurm" in capsys.readouterr().err


def test_slurm_eval_checks_the_evaluation_and_keeps_its_script_in_out(tmp_path, capsys):
    out = tmp_path / "results" / "pf"
    assert cli.main(["slurm", "eval", "phasefusion", "--nodes", "2", "--gpus_per_node", "8", "--time", "4:00:00",
                     "--model", "runs/merged", "--manifest", "videomme.jsonl", "--out", str(out)]) == 0
    text = (out / "slurm" / "job.sbatch").read_text()
    assert "#SBATCH --time=4:00:00" in text and "#SBATCH --job-name=pf" in text
    argv = launch_line(text, SLURM_NNODES="2", SLURM_NODEID="1", MAIN_PROCESS_IP="a", MAIN_PROCESS_PORT="2")
    assert argv[argv.index("--num_processes"):] == ["--num_processes", "16", "--multi_gpu", "-m",
                                                    "judgetrain.eval.phasefusion", "--model", "runs/merged", "--manifest",
                                                    "videomme.jsonl", "--out", str(out)]
    assert cli.main(["slurm", "eval", "phasefusion", "--model", "m", "--manifest", "m.jsonl", "--out", str(tmp_path / "x"),
                     "--limt", "3"]) == 2
    assert "'--limt'" in capsys.readouterr().err  # the evaluation's own parser refused it
    assert cli.main(["slurm", "train", "recipe.yaml"]) == 2
    assert "a training run is `judgetrain train RECIPE --slurm`" in capsys.readouterr().err


def test_a_job_that_slurm_ended_says_so_and_counts_as_one_error(tmp_path):
    log = tmp_path / "t-7-0.log"
    log.write_text("error: datasets: data/x: no such folder\n  build it first\n")
    assert job_failure_reason("7", JobState("COMPLETED", 0), log) is None
    assert job_failure_reason("7", JobState("CANCELLED", 143), log) == \
        f"SLURM job 7 CANCELLED (scancel, or preempted without requeue); log: {log}"
    assert job_failure_reason("8", JobState("FAILED", 2), log) == \
        f"SLURM job 8 FAILED, exited with code 2: error: datasets: data/x: no such folder\n  build it first; log: {log}"
    timeouts = [job_failure_reason(j, JobState("TIMEOUT", 1), log) for j in ("9", "10")]
    assert failure_key(timeouts[0], tmp_path) == failure_key(timeouts[1], tmp_path) == "SLURM job TIMEOUT (its --time limit)"


# --------------------------------------------------------------------------- a real one-node cluster (slow)


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return got


@pytest.mark.slow
def test_a_recipe_submitted_to_slurm_trains_with_its_script_and_logs_in_the_run_folder(tmp_path, recipe, slurm_cluster):
    run = tmp_path / "runs" / "tiny"
    proc = subprocess.run([str(BIN / "judgetrain"), "train", str(recipe), "--slurm", "--submit", "--output_dir", str(run),
                           "--max_steps", "2"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = proc.stdout.split("submitted SLURM job ", 1)[1].split(":", 1)[0]
    state = wait_for(lambda: (s := job_state(job)).ended and s, 300, "the training job to end")
    node0 = rank_log(run, "tiny", job)
    assert state.state == "COMPLETED", node0.read_text(errors="replace")[-3000:] if node0.is_file() else state
    assert (run / "slurm" / "job.sbatch").is_file() and (run / "slurm" / f"tiny-{job}.log").is_file()
    assert "Training finished at step 2" in node0.read_text(errors="replace")
    assert (run / "adapter_model.safetensors").is_file()
    steps = [h["step"] for h in json.loads((run / "trainer_state.json").read_text())["log_history"] if "loss" in h]
    assert steps == [1, 2]


def _trial_job(storage: str, study: str, number: int, state: str = "RUNNING") -> str | None:
    """The SLURM job of trial ``number`` once SLURM says it is in ``state``."""
    try:
        trials = optuna.load_study(study_name=study, storage=storage).trials
    except KeyError:
        return None
    job = trials[number].user_attrs.get("slurm_job") if len(trials) > number else None
    return job if job and job_state(job).state == state else None


@pytest.mark.slow
def test_a_sweep_on_slurm_retries_a_cancelled_job_and_resumes_a_requeued_one(tmp_path, recipe, slurm_cluster, postgres_url):
    out, study = tmp_path / "trials", "slurm-sweep"
    cmd = [str(BIN / "judgetrain"), "sweep", str(recipe), "--space", str(SPACE), "--trials", "4", "--storage", postgres_url,
           "--study", study, "--out", str(out), "--objective", "eval_loss", "--slurm", "--parallel", "2", "--retries", "1",
           "--poll", "1", "--max_steps", "2"]
    ctl = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        cancelled = wait_for(lambda: _trial_job(postgres_url, study, 0), 300, "trial 0's job to run")
        subprocess.run(["scancel", cancelled], check=True)  # trial 0 is lost with its job: retried
        requeued = wait_for(lambda: _trial_job(postgres_url, study, 1), 300, "trial 1's job to run")
        subprocess.run(["scontrol", "requeue", requeued], check=True)  # preempted: the same trial runs again
        wait_for(lambda: job_state(requeued).state == "PENDING", 60, "the requeued job to wait")
        subprocess.run(["scontrol", "update", f"JobId={requeued}", "StartTime=now"], check=True)  # SLURM holds it 2 min
        log = ctl.communicate(timeout=900)[0]
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait()
    assert ctl.returncode == 0, log[-3000:]
    trials = optuna.load_study(study_name=study, storage=postgres_url).trials
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 4, [(t.number, t.state, t.user_attrs.get("fail_reason")) for t in trials]
    params = [tuple(sorted(t.params.items())) for t in finished]
    assert len(set(params)) == 4  # no parameter set trained twice
    assert trials[0].state == TrialState.FAIL and f"SLURM job {cancelled} CANCELLED" in trials[0].user_attrs["fail_reason"]
    retry = [t for t in trials if t.system_attrs.get("failed_trial") == 0]
    assert len(retry) == 1 and retry[0] in finished and retry[0].params == trials[0].params
    assert trials[1] in finished and trials[1].user_attrs["slurm_job"] == requeued
    assert trials[1].user_attrs["slurm_restarts"] == 1
    node0 = rank_log(out / "trial-0001", f"{study}-trial-0001", requeued).parent / f"{study}-trial-0001-{requeued}.log"
    assert "(restart 1)" in node0.read_text()  # the script ran again, in the same job
    for t in finished:
        folder = Path(t.user_attrs["output_dir"])
        assert (folder / "slurm" / "job.sbatch").is_file()
        assert json.loads((folder / "sweep_result.json").read_text())["step"] == 2
