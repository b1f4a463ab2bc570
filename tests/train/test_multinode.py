"""Training on two "nodes" of this machine: `accelerate launch --num_machines 2 --machine_rank
{0,1} --main_process_ip 127.0.0.1 --main_process_port P`, one process a node, on CPU/gloo,
both node commands started as subprocesses (docs/how-to/cluster.md, "On a cluster": the same commands with
8 GPUs a node and the first node's address).

- DDP (tests/train/multinode_probe.py, which is tests/train/ddp_probe.py's probe): the two
  nodes hold the same trainable weights at every step and equal one process on the same
  global batch (four records a step), as do the losses and the saved adapter;
- ZeRO-3 through `judgetrain train --accelerate_config zero3 --num_machines 2 …` (the shipped
  config starts torchrun on each node, `deepspeed_multinode_launcher: standard`): the same
  losses and adapter;
- consistency tuning (the tiny consistency recipe, the same probe): the same weights, losses
  and logged consistency terms as one process;
- a node killed mid-run (SIGKILL to every process of node 1: accelerate's launcher and the
  worker torchrun started in its own session) takes the job down; the complete checkpoint
  it leaves resumes on both nodes with `--resume_from_checkpoint auto` to the adapter of the
  uninterrupted run.

Marked slow (about 4 minutes on 2 CPU cores; DeepSpeed JIT-builds its shared-memory op on
first use, cached in TORCH_EXTENSIONS_DIR).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
BIN = Path(sys.executable).parent
PROBE = REPO / "tests" / "train" / "multinode_probe.py"
STEPS = 3
# the same four records a step, split over two nodes × one record × two accumulation steps, or in one micro-batch
TWO_NODES = ["--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "2"]
ONE = ["--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def node_options(rank: int, port: int) -> list[str]:
    """What makes one machine's `accelerate launch` (or `judgetrain train`) a node of two."""
    return ["--num_processes", "2", "--num_machines", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1",
            "--main_process_port", str(port)]


def start_nodes(command, env: dict[str, str], logs: Path) -> list[subprocess.Popen]:
    """Both nodes' commands (``command(rank, port)``), each in its own session, output to logs/node{R}.log."""
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    return [subprocess.Popen(command(rank, port), env=env, cwd=REPO, stdout=open(logs / f"node{rank}.log", "w"),
                             stderr=subprocess.STDOUT, start_new_session=True) for rank in (0, 1)]


def wait_nodes(nodes: list[subprocess.Popen], logs: Path, timeout: float = 600) -> None:
    codes = [node.wait(timeout=timeout) for node in nodes]
    assert codes == [0, 0], "\n".join((logs / f"node{r}.log").read_text()[-3000:] for r in (0, 1))


def kill_node(node: subprocess.Popen) -> None:
    """A node going down: SIGKILL to its launcher and every process under it (torchrun starts
    each worker in a session of its own, so the launcher's process group alone is not the node)."""
    import psutil

    root = psutil.Process(node.pid)
    for p in [root, *root.children(recursive=True)]:
        p.kill()
    node.wait()


def overrides(tiny: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["--model_name_or_path", str(tiny), "--datasets", str(data), "--output_dir", str(out), "--max_steps", str(STEPS),
            "--max_train_samples", "16", "--eval_strategy", "no", "--lora_dropout", "0",
            # Adam's first steps move each weight by about ±lr whatever its gradient's size, so a gradient
            # near 0 turns float noise (another split of the batch) into a difference near lr: keep lr small
            "--learning_rate", "2e-3",
            "--logging_steps", "1", *extra]


def losses(out: Path) -> list[float]:
    return [h["loss"] for h in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in h]


def assert_same_adapter(a: Path, b: Path) -> None:
    from safetensors.torch import load_file

    x, y = load_file(a / "adapter_model.safetensors"), load_file(b / "adapter_model.safetensors")
    assert x.keys() == y.keys() and x
    for k in x:
        torch.testing.assert_close(x[k], y[k], atol=1e-5, rtol=1e-5, msg=k)


def probe_launch(tiny: Path, data: Path, folder: Path, *extra: str):
    """``command(rank, port)``: one node of the DDP probe launch into ``folder`` (probe/, out/)."""
    def command(rank: int, port: int) -> list[str]:
        return [str(BIN / "accelerate"), "launch", "--multi_gpu", *node_options(rank, port), str(PROBE),
                str(folder / "probe"), "--config", str(RECIPE), *overrides(tiny, data, folder / "out", *TWO_NODES, *extra)]
    return command


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.fixture(scope="module")
def one_process(tiny, timecatch_build, tmp_path_factory):
    """The reference: one process, the same four records a step in one micro-batch."""
    folder = tmp_path_factory.mktemp("one")
    done = subprocess.run([sys.executable, str(PROBE), str(folder / "probe"), "--config", str(RECIPE),
                           *overrides(tiny, timecatch_build[0], folder / "out", *ONE, "--save_steps", str(STEPS))],
                          env=clean_env(), cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(losses(folder / "out")) == STEPS
    return folder


def test_ddp_on_two_nodes_equals_one_process_on_the_same_global_batch(tmp_path, tiny, timecatch_build, one_process):
    from safetensors.torch import load_file

    nodes = start_nodes(probe_launch(tiny, timecatch_build[0], tmp_path, "--save_steps", str(STEPS)),
                        clean_env(ACCELERATE_USE_CPU="1"), tmp_path / "logs")
    wait_nodes(nodes, tmp_path / "logs")
    for rank in (0, 1):  # one data-parallel group over both nodes, not two jobs of one process each
        assert json.loads((tmp_path / "probe" / f"rank{rank}" / "state.json").read_text()) == {
            "distributed_type": "DistributedType.MULTI_CPU", "num_processes": 2}
    for step in range(STEPS + 1):  # 0: before the first step
        folders = (tmp_path / "probe" / "rank0", tmp_path / "probe" / "rank1", one_process / "probe" / "rank0")
        rank0, rank1, single = (load_file(d / f"step{step}.safetensors") for d in folders)
        assert rank0.keys() == rank1.keys() == single.keys()
        assert all(torch.equal(rank0[k], rank1[k]) for k in rank0), f"the nodes' weights differ after step {step}"
        for k in rank0:
            torch.testing.assert_close(rank0[k], single[k], atol=1e-5, rtol=1e-5, msg=f"step {step}: {k}")
    start = load_file(tmp_path / "probe" / "rank0" / "step0.safetensors")
    assert any(not torch.equal(start[k], rank0[k]) for k in rank0)  # it trained
    torch.testing.assert_close(torch.tensor(losses(tmp_path / "out")), torch.tensor(losses(one_process / "out")),
                               atol=1e-5, rtol=1e-5)
    assert_same_adapter(tmp_path / "out", one_process / "out")
    assert "world size: 2, per-device batch: 1, gradient accumulation: 2" in (tmp_path / "out" / "README.md").read_text()
    assert sorted(p.name for p in (tmp_path / "out" / f"checkpoint-{STEPS}").glob("rng_state_*.pth")) == \
        ["rng_state_0.pth", "rng_state_1.pth"]  # each node's rank, in the one shared output folder


def test_zero3_on_two_nodes_through_judgetrain_train_equals_one_process(tmp_path, tiny, timecatch_build, one_process):
    def command(rank: int, port: int) -> list[str]:
        return [str(BIN / "judgetrain"), "train", str(RECIPE), "--accelerate_config", "zero3", *node_options(rank, port),
                *overrides(tiny, timecatch_build[0], tmp_path / "out", *TWO_NODES, "--save_steps", str(STEPS))]

    nodes = start_nodes(command, clean_env(), tmp_path / "logs")
    wait_nodes(nodes, tmp_path / "logs")
    log = (tmp_path / "logs" / "node1.log").read_text()
    assert "launching: accelerate launch --config_file " in log
    assert " --num_processes 2 --num_machines 2 --machine_rank 1 " in log
    assert (tmp_path / "out" / f"checkpoint-{STEPS}" / f"global_step{STEPS}").is_dir(), "the DeepSpeed engine's checkpoint"
    torch.testing.assert_close(torch.tensor(losses(tmp_path / "out")), torch.tensor(losses(one_process / "out")),
                               atol=1e-5, rtol=1e-5)
    assert_same_adapter(tmp_path / "out", one_process / "out")  # gathered from both nodes' partitions


def test_a_node_killed_mid_run_leaves_checkpoints_the_whole_job_resumes_from(tmp_path, tiny, timecatch_build, one_process):
    """Node 1 is killed once checkpoint-1 is complete (each step pauses 1 s, so the kill falls
    before step 2 ends); node 0 fails on its own (its peer's sockets closed) rather than hang.
    Both node commands again with --resume_from_checkpoint auto: steps 2 and 3 from checkpoint-1,
    the same losses and adapter as one uninterrupted process."""
    command = probe_launch(tiny, timecatch_build[0], tmp_path, "--save_steps", "1")
    nodes = start_nodes(command, clean_env(ACCELERATE_USE_CPU="1", PROBE_STEP_PAUSE="1"), tmp_path / "logs")
    complete = tmp_path / "out" / "checkpoint-1" / "judgetrain_checkpoint_complete.json"
    deadline = time.monotonic() + 600
    while not complete.is_file() and time.monotonic() < deadline and all(n.poll() is None for n in nodes):
        time.sleep(0.02)
    assert complete.is_file() and all(n.poll() is None for n in nodes), (tmp_path / "logs" / "node0.log").read_text()[-3000:]
    kill_node(nodes[1])
    assert nodes[0].wait(timeout=180) != 0  # the job is down, not hanging on a dead peer
    assert not (tmp_path / "out" / "adapter_model.safetensors").is_file()
    assert not (tmp_path / "out" / f"checkpoint-{STEPS}").exists()

    resume = probe_launch(tiny, timecatch_build[0], tmp_path, "--save_steps", "1", "--resume_from_checkpoint", "auto")
    nodes = start_nodes(resume, clean_env(ACCELERATE_USE_CPU="1"), tmp_path / "logs-resume")
    wait_nodes(nodes, tmp_path / "logs-resume")
    log = (tmp_path / "logs-resume" / "node0.log").read_text()
    assert f"resume_from_checkpoint auto: {tmp_path / 'out' / 'checkpoint-1'}" in log or \
        f"resume_from_checkpoint auto: {tmp_path / 'out' / 'checkpoint-2'}" in log, log[-3000:]
    state = json.loads((tmp_path / "out" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    # the steps trained after the resume have the uninterrupted run's losses
    resumed = [h for h in state["log_history"] if "loss" in h]
    expected = dict(zip(range(1, STEPS + 1), losses(one_process / "out"), strict=True))
    torch.testing.assert_close(torch.tensor([h["loss"] for h in resumed]),
                               torch.tensor([expected[h["step"]] for h in resumed]), atol=1e-5, rtol=1e-5)
    assert_same_adapter(tmp_path / "out", one_process / "out")


def test_consistency_tuning_on_two_nodes_equals_one_process(tmp_path, tiny_model):
    """Consistency tuning (recipes/tiny/qwen25vl-consistency-lora.yaml, JS-to-mixture, λ 3) on two nodes of
    one question a micro-batch against one process accumulating two: the same weights at every step, the
    same losses and logged consistency terms (the term is a mean over each micro-batch's questions)."""
    from safetensors.torch import load_file

    from judgetrain.data_builders.consistency_views import ConsistencyViewsConfig, build
    from judgetrain.data_builders.video_mcq import SyntheticConfig, build_synthetic

    build_synthetic(SyntheticConfig(out=tmp_path / "vmcq", synthetic=4, seed=5, frames=24, size=(64, 48), progress=False))
    build(ConsistencyViewsConfig(manifest=tmp_path / "vmcq" / "manifest.jsonl", out=tmp_path / "views", budget=2, phases=2,
                                 orderings=2, splits="train=1.0", progress=False))
    recipe, tiny = REPO / "recipes" / "tiny" / "qwen25vl-consistency-lora.yaml", tiny_model("qwen2.5-vl")

    def argv(name: str) -> list[str]:
        return [str(tmp_path / name / "probe"), "--config", str(recipe), "--model_name_or_path", str(tiny),
                "--datasets", str(tmp_path / "views"), "--output_dir", str(tmp_path / name / "out"), "--max_steps", "2",
                "--save_steps", "2", "--eval_strategy", "no", "--lora_dropout", "0", "--learning_rate", "2e-3",
                "--per_device_train_batch_size", "1", "--effective_batch_size", "2", "--consistency_lambda", "3",
                "--logging_steps", "1"]

    done = subprocess.run([sys.executable, str(PROBE), *argv("one")], env=clean_env(), cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    def node(rank: int, port: int) -> list[str]:
        return [str(BIN / "accelerate"), "launch", "--multi_gpu", *node_options(rank, port), str(PROBE), *argv("two")]

    nodes = start_nodes(node, clean_env(ACCELERATE_USE_CPU="1"), tmp_path / "logs")
    wait_nodes(nodes, tmp_path / "logs")
    for step in range(3):
        folders = (tmp_path / "two" / "probe" / "rank0", tmp_path / "two" / "probe" / "rank1",
                   tmp_path / "one" / "probe" / "rank0")
        rank0, rank1, single = (load_file(d / f"step{step}.safetensors") for d in folders)
        assert all(torch.equal(rank0[k], rank1[k]) for k in rank0), f"the nodes' weights differ after step {step}"
        for k in rank0:
            torch.testing.assert_close(rank0[k], single[k], atol=1e-5, rtol=1e-5, msg=f"step {step}: {k}")
    history = {name: json.loads((tmp_path / name / "out" / "trainer_state.json").read_text())["log_history"]
               for name in ("two", "one")}
    for key in ("loss", "consistency/term", "consistency/agreement"):
        a, b = ([h[key] for h in history[name] if key in h] for name in ("two", "one"))
        assert len(a) == 2
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), atol=1e-5, rtol=1e-5, msg=key)


def test_a_hung_node_ends_the_job_within_the_recipes_ddp_timeout(tmp_path, tiny, timecatch_build):
    """Node 1 stopped (SIGSTOP to every process of it: a wedged machine, not a dead one) once
    checkpoint-1 is complete: node 0's next collective gives up after `ddp_timeout` (20 s here)
    and its launcher exits non-zero, instead of holding the job for gloo's own 10 minutes."""
    import psutil

    timeout = 20
    command = probe_launch(tiny, timecatch_build[0], tmp_path, "--save_steps", "1", "--ddp_timeout", str(timeout))
    nodes = start_nodes(command, clean_env(ACCELERATE_USE_CPU="1", PROBE_STEP_PAUSE="1"), tmp_path / "logs")
    complete = tmp_path / "out" / "checkpoint-1" / "judgetrain_checkpoint_complete.json"
    hung = []
    try:
        deadline = time.monotonic() + 600
        while not complete.is_file() and time.monotonic() < deadline and all(n.poll() is None for n in nodes):
            time.sleep(0.02)
        assert complete.is_file() and all(n.poll() is None for n in nodes), \
            (tmp_path / "logs" / "node0.log").read_text()[-3000:]
        root = psutil.Process(nodes[1].pid)
        hung = [root, *root.children(recursive=True)]
        for p in hung:
            p.suspend()
        stopped = time.monotonic()
        code = nodes[0].wait(timeout=timeout + 120)
        took = time.monotonic() - stopped
    finally:
        for p in hung:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
                p.resume()
        for n in nodes:
            if n.poll() is None:
                kill_node(n)
    assert code != 0 and took < timeout + 60, (took, (tmp_path / "logs" / "node0.log").read_text()[-3000:])
