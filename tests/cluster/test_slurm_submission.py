"""A SLURM job reads only what was fixed at submission: the recipe, the accelerate config and
its DeepSpeed JSON, an evaluation's --config and the --setup snippet are copied (or written)
into the run folder and the script names only the copies; a changed copy is refused; the
resources each node gives the job (CPUs, memory, --exclusive); no secret in any file. Then,
slow, on the real one-node cluster (conftest): a run whose recipe is edited while it runs,
requeued, trains with the recipe it was submitted with; a sweep trial's
storage URL reaches the job through sbatch's environment and no file of the trial's folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
import yaml

from judgetrain import cli
from judgetrain.cluster import SlurmArgs, job_state, rank_log, sbatch_script, slurm_problems

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def recipe(tmp_path_factory, tiny_prism_recipe):
    """The tiny PRISM recipe pointed at this session's model and a 12-item PRISM set (tests/conftest.py)."""
    return tiny_prism_recipe(tmp_path_factory.mktemp("submission-recipe"))


def sbatch_options(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")]


def script_of(args: SlurmArgs, tmp_path: Path) -> str:
    return sbatch_script(args, job_name="j", run_dir=tmp_path / "run", launch_options=[], module="m", module_args=[],
                         workdir=tmp_path)


# --------------------------------------------------------------------------- copies


def test_the_script_names_only_copies_made_at_submission_and_a_changed_one_is_refused(tmp_path, recipe, capsys,
                                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    own = tmp_path / "mine.yaml"
    own.write_text(recipe.read_text())
    train = ["train", str(own), "--slurm", "--gpus_per_node", "8", "--accelerate_config", "zero3", "--output_dir", "runs/a",
             "--effective_batch_size", "16"]
    assert cli.main(train) == 0
    kept = tmp_path / "runs" / "a" / "slurm"
    text = (kept / "job.sbatch").read_text()
    assert (kept / "recipe.yaml").read_text() == own.read_text()
    accelerate = yaml.safe_load((kept / "accelerate.yaml").read_text())
    assert accelerate["deepspeed_config"]["deepspeed_config_file"] == str(kept / "deepspeed.json")
    json.loads((kept / "deepspeed.json").read_text())  # the shipped ZeRO-3 JSON, copied
    # the script names the copies, and no file outside the run folder but the installed programs
    assert str(own) not in text and "zero3" not in text.replace(str(kept), "")
    assert f"--config {kept / 'recipe.yaml'}" in text and f"--config_file {kept / 'accelerate.yaml'}" in text
    assert (kept / "job.sbatch").stat().st_mode & 0o777 == 0o644
    capsys.readouterr()
    assert cli.main(train) == 0  # the same command again: the same copies, kept
    own.write_text(own.read_text().replace("learning_rate: 0.001", "learning_rate: 0.05"))
    assert "0.05" in own.read_text()
    assert cli.main(train) == 2  # a queued or requeued job of this run would read the edited recipe
    err = capsys.readouterr().err
    assert f"{kept / 'recipe.yaml'}: this run's SLURM job reads this copy of {own}, which has changed since" in err
    assert "new --output_dir" in err
    assert (kept / "recipe.yaml").read_text() != own.read_text()  # the job's copy is untouched


def test_slurm_eval_reads_a_copy_of_its_config(tmp_path):
    out = tmp_path / "pf"
    conf = tmp_path / "pf.yaml"
    conf.write_text("model: runs/merged\nmanifest: videomme.jsonl\n")
    assert cli.main(["slurm", "eval", "phasefusion", "--config", str(conf), "--out", str(out)]) == 0
    text = (out / "slurm" / "job.sbatch").read_text()
    assert (out / "slurm" / "eval.yaml").read_text() == conf.read_text()
    assert f"--config {out / 'slurm' / 'eval.yaml'}" in text and str(conf) not in text


# --------------------------------------------------------------------------- resources and set-up


def test_each_node_gives_the_job_cpus_and_memory_per_gpu_by_default(tmp_path):
    gpus = sbatch_options(script_of(SlurmArgs(gpus_per_node=8), tmp_path))
    assert "cpus-per-task=64" in " ".join(gpus) and "--mem-per-gpu=32G" in gpus and "--exclusive" not in gpus
    given = sbatch_options(script_of(SlurmArgs(gpus_per_node=4, cpus_per_node=40, mem="0", exclusive=True), tmp_path))
    assert {"--cpus-per-task=40", "--mem=0", "--exclusive"} <= set(given)
    assert not any(o.startswith("--mem-per-gpu") for o in given)  # sbatch refuses --mem with --mem-per-gpu
    assert "--cpus-per-task=12" in sbatch_options(script_of(SlurmArgs(gpus_per_node=2, cpus_per_gpu=6), tmp_path))
    cpu_only = sbatch_options(script_of(SlurmArgs(), tmp_path))  # SLURM's defaults: fits any node
    assert not any(o.startswith(("--cpus-per-task", "--mem")) for o in cpu_only)
    assert "--cpus-per-task=2" in sbatch_options(script_of(SlurmArgs(cpus_per_node=2, mem="1500M"), tmp_path))
    problems = slurm_problems(SlurmArgs(mem="lots", mem_per_gpu="8 GB", cpus_per_gpu=0, setup="nope.sh"), True)
    assert [p.split(":")[0] for p in problems] == ["cpus_per_gpu", "mem", "mem_per_gpu", "setup"]
    assert "give a size as sbatch writes it" in problems[1]
    assert slurm_problems(SlurmArgs(mem="0", exclusive=True), False) == \
        ["--mem, --exclusive: SLURM options; add --slurm to write (and --submit to submit) a SLURM job"]


def test_set_up_lines_follow_the_sbatch_lines_as_they_were_when_written(tmp_path):
    setup = tmp_path / "setup.sh"
    setup.write_text("module load cuda/12.4\nexport NCCL_IB_DISABLE=1\n")
    script = script_of(SlurmArgs(setup=str(setup)), tmp_path)
    setup.write_text("module load cuda/11.8\n")  # later edits do not reach a written script
    lines = script.splitlines()
    last_sbatch = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    at = lines.index("module load cuda/12.4")
    assert last_sbatch < at < next(i for i, line in enumerate(lines) if line.startswith("srun "))
    assert lines[at + 1] == "export NCCL_IB_DISABLE=1" and "cuda/11.8" not in script


# --------------------------------------------------------------------------- a real one-node cluster (slow)


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (got := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return got


def show_job(job: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, check=True).stdout
    return dict(word.split("=", 1) for word in out.split() if "=" in word)


@pytest.mark.slow
def test_a_requeued_job_trains_with_the_recipe_it_was_submitted_with(tmp_path, recipe, slurm_cluster):
    own, run = tmp_path / "recipe.yaml", tmp_path / "runs" / "edited"
    own.write_text(recipe.read_text())
    setup = tmp_path / "setup.sh"  # the first start waits (as in a queue) until the test requeues it
    setup.write_text('if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then echo "first start: waiting"; sleep 600; fi\n')
    proc = subprocess.run([str(BIN / "judgetrain"), "train", str(own), "--slurm", "--submit", "--output_dir", str(run),
                           "--max_steps", "4", "--setup", str(setup), "--cpus_per_node", "2", "--mem", "1500M"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    job = proc.stdout.split("submitted SLURM job ", 1)[1].split(":", 1)[0]
    script_log = run / "slurm" / f"edited-{job}.log"
    try:
        wait_for(lambda: script_log.is_file() and "first start: waiting" in script_log.read_text(), 120, "the first start")
        shown = show_job(job)  # what each node gives the job
        assert shown["NumCPUs"] == "2" and shown["MinMemoryNode"] == "1500M", shown
        doc = yaml.safe_load(own.read_text())
        own.write_text(yaml.safe_dump({**doc, "learning_rate": 0.05}))  # the user edits the recipe mid-run
        subprocess.run(["scontrol", "requeue", job], check=True)  # preempted
        wait_for(lambda: job_state(job).state == "PENDING", 60, "the requeued job to wait")
        subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)  # SLURM holds it 2 min
        state = wait_for(lambda: (s := job_state(job)).ended and s, 300, "the requeued job to end")
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    node0 = rank_log(run, "edited", job).read_text(errors="replace")
    assert state.state == "COMPLETED" and state.restarts == 1, node0[-3000:] + script_log.read_text()
    assert "(restart 1)" in script_log.read_text() and "Training finished at step 4" in node0
    assert "'learning_rate': '0.001'" in node0 and "'learning_rate': '0.05'" not in node0  # as submitted


@pytest.mark.slow
def test_a_sweep_trials_storage_url_reaches_its_job_but_no_file(tmp_path, recipe, slurm_cluster):
    from judgetrain.sweep.jobs import run_slurm_trial

    secret = "postgresql://judge:s3cr3t-pw@db.example/sweeps"
    setup = tmp_path / "setup.sh"  # the job proves it got the URL, then ends before training
    setup.write_text('case "$JUDGETRAIN_SWEEP" in *@db.example/sweeps*) echo "storage: given"; exit 7;; esac\nexit 3\n')
    cfg = SimpleNamespace(**{**vars(SlurmArgs(cpus_per_node=1, setup=str(setup))), "recipe": str(recipe),
                             "accelerate_config": None, "num_processes": None, "poll": 0.5})
    trial = optuna.create_study().ask()
    out = tmp_path / "trial-0000"
    code, log, _ = run_slurm_trial(cfg, trial, "t0", ["--output_dir", str(out)], {"JUDGETRAIN_SWEEP": json.dumps(
        {"storage": secret, "trial": 0})}, out, lambda: None)
    assert code == 7, log.parent.joinpath(f"t0-{trial.user_attrs['slurm_job']}.log").read_text()
    assert "storage: given" in log.parent.joinpath(f"t0-{trial.user_attrs['slurm_job']}.log").read_text()
    files = [p for p in out.rglob("*") if p.is_file()]
    assert out / "slurm" / "job.sbatch" in files and out / "slurm" / "recipe.yaml" in files
    assert not [p for p in files if "s3cr3t-pw" in p.read_text(errors="replace")]
    assert all(p.stat().st_mode & 0o022 == 0 for p in files)  # no file another user may write
    assert os.environ.get("JUDGETRAIN_SWEEP") is None  # handed to sbatch only, not to this process
