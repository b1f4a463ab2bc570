"""A hung machine (SIGSTOP: stopped, not dead, its sockets open) ends the job on the other
machine within the configured collective timeout instead of holding it for torch's or
DeepSpeed's own (gloo 30 minutes, DeepSpeed's init 10): two "nodes" of this machine
(`accelerate launch --num_machines 2 --machine_rank R`, one process each, CPU/gloo).

- evaluation: `eval timecatch --collective_timeout 10` on the tiny model, node 1's worker
  stopped as soon as it exists (long before its first collective): node 0 stops joining the
  process group after 10 s, naming 10000 ms, and writes no metrics;
- training under ZeRO-3 (deepspeed_configs/zero3.yaml, this file the training script:
  judgetrain's entrypoint plus a callback that SIGSTOPs rank 1 as step 2 begins):
  node 0, in ZeRO-3's parameter all-gather, gives up after `--ddp_timeout 20`.
The DDP case is tests/train/test_multinode.py's hung-node test.

Marked slow (about 30 s and 45 s on 2 CPU cores).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_options(rank: int, port: int) -> list[str]:
    return ["--num_processes", "2", "--num_machines", "2", "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1",
            "--main_process_port", str(port)]


def start_nodes(command, logs: Path, **env: str) -> list[subprocess.Popen]:
    """Both nodes' commands (``command(rank, port)``), each in its own session, output to logs/node{R}.log."""
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    return [subprocess.Popen(command(rank, port), env={**clean, "OMP_NUM_THREADS": "1", **env}, cwd=REPO,
                             stdout=open(logs / f"node{rank}.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
            for rank in (0, 1)]


def wait_until(ready, nodes: list[subprocess.Popen], logs: Path, what: str, limit: float = 300) -> None:
    """Poll ``ready()`` until true; fail (with node 0's log) on a deadline or a node that ended first."""
    deadline = time.monotonic() + limit
    while not ready():
        assert time.monotonic() < deadline and all(n.poll() is None for n in nodes), \
            f"{what}: " + "\n".join((logs / f"node{r}.log").read_text()[-3000:] for r in (0, 1))
        time.sleep(0.02)


def worker_of(node: subprocess.Popen):
    """The worker process torchrun started on ``node`` (the one given ``LOCAL_RANK``; a fork of the
    launcher has the launcher's command line, and stopping it would stop the node before it has
    joined the job), or None while there is none."""
    import psutil

    for p in psutil.Process(node.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            if "LOCAL_RANK" in p.environ():
                return p
    return None


@contextlib.contextmanager
def nodes_cleaned_up(nodes: list[subprocess.Popen]):
    """Whatever happens: every process of both nodes killed (SIGKILL ends a stopped process too)."""
    import psutil

    try:
        yield
    finally:
        for node in nodes:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(node.pid)
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        p.kill()
                        p.resume()
            node.wait()


def stop_node(node: subprocess.Popen) -> None:
    """SIGSTOP to every process of the node: a machine that hangs, its sockets still open."""
    import psutil

    root = psutil.Process(node.pid)
    for p in [root, *root.children(recursive=True)]:
        p.suspend()


def test_a_hung_node_ends_an_evaluation_within_its_collective_timeout(tmp_path, tiny_model, timecatch_build):
    """Node 1's worker is stopped as soon as it exists, long before its first collective (it has
    torch to import): node 0's first one (joining the process group) gives up after
    `--collective_timeout` and its launcher exits non-zero. Without the option reaching the
    process group, node 0 would wait gloo's 30 minutes."""
    timeout = 10
    out, logs = tmp_path / "out", tmp_path / "logs"

    def command(rank: int, port: int) -> list[str]:
        return [str(BIN / "accelerate"), "launch", "--multi_gpu", *node_options(rank, port), "--mixed_precision", "no",
                "--dynamo_backend", "no", "-m", "judgetrain.eval.timecatch", "--model", str(tiny_model("qwen3-vl")),
                "--data", str(timecatch_build[0]), "--split", "validation", "--out", str(out), "--limit", "8",
                "--no-progress", "--collective_timeout", str(timeout)]

    nodes = start_nodes(command, logs, ACCELERATE_USE_CPU="1")
    with nodes_cleaned_up(nodes):
        wait_until(lambda: worker_of(nodes[1]) is not None, nodes, logs, "node 1's worker")
        stop_node(nodes[1])
        stopped = time.monotonic()
        code = nodes[0].wait(timeout=timeout + 120)
        took = time.monotonic() - stopped
    log = (logs / "node0.log").read_text()
    assert code != 0 and took < timeout + 60, (took, log[-3000:])
    assert f"{timeout * 1000}ms" in log, log[-3000:]
    assert not (out / "metrics.json").exists()


def test_a_node_hung_mid_step_ends_zero3_training_within_the_recipes_ddp_timeout(tmp_path, tiny_model, timecatch_build):
    """ZeRO-3 on two nodes (this file as the training script: judgetrain's own entrypoint plus a
    callback that stops rank 1 at the start of step 2, after the Trainer's per-step gather and
    before the forward pass). Node 0 then waits in ZeRO-3's parameter all-gather, a collective of
    the group DeepSpeed's init_distributed made (10 minutes unless told): it must give up after the
    recipe's `ddp_timeout` (20 s), which judgetrain hands to that init on CPUs and the Trainer on GPUs."""
    timeout = 20
    out, logs = tmp_path / "out", tmp_path / "logs"

    def command(rank: int, port: int) -> list[str]:
        return [str(BIN / "accelerate"), "launch", "--config_file", str(REPO / "deepspeed_configs" / "zero3.yaml"),
                *node_options(rank, port), __file__, "--config", str(RECIPE),
                "--model_name_or_path", str(tiny_model("qwen3-vl")), "--datasets", str(timecatch_build[0]),
                "--output_dir", str(out), "--max_steps", "4", "--max_train_samples", "16", "--eval_strategy", "no",
                "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "1", "--save_steps", "4",
                "--logging_steps", "1", "--ddp_timeout", str(timeout)]

    nodes = start_nodes(command, logs)
    with nodes_cleaned_up(nodes):
        wait_until(lambda: "stopping rank 1" in (logs / "node1.log").read_text(), nodes, logs, "rank 1 stopped", 600)
        stopped = time.monotonic()
        code = nodes[0].wait(timeout=timeout + 120)
        took = time.monotonic() - stopped
    log = (logs / "node0.log").read_text()
    assert code != 0 and took < timeout + 60, (took, log[-3000:])
    assert f"{timeout * 1000}ms" in log, log[-3000:]


def stop_rank_1_at_step_2():
    """The callback the training script above adds: SIGSTOP to rank 1 itself as step 2 begins."""
    import signal

    from transformers import TrainerCallback

    class Stop(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1 and args.process_index == 1:
                print("stopping rank 1 at the start of step 2", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)

    return Stop()


if __name__ == "__main__":  # run by `accelerate launch` in every process of the ZeRO-3 test
    from judgetrain.train import script

    sys.exit(script(sys.argv[1:], callbacks=[lambda evaluation, processor, args: stop_rank_1_at_step_2()]))
