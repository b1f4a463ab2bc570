"""The evaluations on two "nodes" of this machine: `accelerate launch --multi_gpu --num_processes 2
--num_machines 2 --machine_rank {0,1} --main_process_ip 127.0.0.1 --main_process_port P -m
judgetrain.eval.{timecatch,judge,phasefusion}`, one process a node, on CPU/gloo, both node
commands started as subprocesses, one shared --out (docs/how-to/cluster.md, "On a cluster": the same command
with 8 GPUs a node and the first node's address).

Each two-node run equals the one-process run of the same command: its predictions (in dataset
order, merged from the nodes' rank files) and its metrics, floats up to 1e-6 relative (another
process count splits the matrix products over other threads), the run's own record (world
size, timings) aside. A TimeCatch run whose node 1 is killed mid-run (SIGKILL to every process
of it) fails on node 0 too, and both node commands again finish it from what the nodes had
written: the uninterrupted run's predictions and metrics. Marked slow (about 2 minutes on 2
CPU cores).
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgetrain.eval.core import runs

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).parent / "accelerate"
TIMING = ("_s", "_bytes")  # what a run measures on the clock or of the process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_command(rank: int, port: int, evaluation: str, argv: list[str]) -> list[str]:
    return [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "2",
            "--machine_rank", str(rank), "--main_process_ip", "127.0.0.1", "--main_process_port", str(port),
            "--mixed_precision", "no", "--dynamo_backend", "no", "-m", f"judgetrain.eval.{evaluation}", *argv]


def start_nodes(evaluation: str, argv: list[str], logs: Path) -> list[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "WORLD_SIZE", "RANK", "LOCAL_RANK"))}
    env.update(ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
    port = free_port()
    logs.mkdir(parents=True, exist_ok=True)
    return [subprocess.Popen(node_command(rank, port, evaluation, argv), env=env, cwd=REPO, start_new_session=True,
                             stdout=open(logs / f"node{rank}.log", "w"), stderr=subprocess.STDOUT) for rank in (0, 1)]


def two_nodes(evaluation: str, argv: list[str], logs: Path) -> None:
    nodes = start_nodes(evaluation, argv, logs)
    codes = [node.wait(timeout=600) for node in nodes]
    assert codes == [0, 0], "\n".join((logs / f"node{r}.log").read_text()[-3000:] for r in (0, 1))


def one_process(evaluation: str, argv: list[str]) -> None:
    from judgetrain.cli import main

    assert main(["eval", evaluation, *argv]) == 0


def untimed(value):
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith(TIMING) and k not in ("run", "cost")}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def differences(a, b, where="") -> list[str]:
    """Where two JSON values differ: floats up to 1e-5 relative, everything else exactly. (A rank scores the
    records of its own shard, so `eval timecatch` groups other records under one shared prefix than one process
    does: the same scores up to float rounding, 1e-5 as tests/eval/timecatch/test_shared_prefix.py holds them.)"""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9) else [f"{where}: {a} != {b}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]


def assert_same_run(two: Path, one: Path) -> None:
    assert json.loads((two / runs.RUN_INFO).read_text())["world_size"] == 2
    assert json.loads((one / runs.RUN_INFO).read_text())["world_size"] == 1
    assert not list(two.glob("predictions.rank*.jsonl")), "the main node merged both nodes' rank files"
    rows, ref = runs.read_predictions(two / runs.PREDICTIONS), runs.read_predictions(one / runs.PREDICTIONS)
    assert rows and [r["id"] for r in rows] == [r["id"] for r in ref]
    assert differences(untimed(rows), untimed(ref)) == []
    metrics, ref_metrics = (json.loads((d / runs.METRICS).read_text()) for d in (two, one))
    assert differences(untimed(metrics), untimed(ref_metrics)) == []


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


def timecatch_argv(tiny: Path, data: Path, out: Path, batch_size: int = 2) -> list[str]:
    return ["--model", str(tiny), "--data", str(data), "--split", "validation", "--out", str(out), "--batch-size",
            str(batch_size), "--limit", "8", "--no-progress"]


@pytest.fixture(scope="module")
def timecatch_reference(tiny, timecatch_build, tmp_path_factory):
    out = tmp_path_factory.mktemp("tc") / "one"
    one_process("timecatch", timecatch_argv(tiny, timecatch_build[0], out))
    return out


def test_timecatch_on_two_nodes_equals_one_process(tiny, timecatch_build, timecatch_reference, tmp_path):
    two_nodes("timecatch", timecatch_argv(tiny, timecatch_build[0], tmp_path / "two"), tmp_path / "logs")
    assert_same_run(tmp_path / "two", timecatch_reference)


def test_judge_on_two_nodes_equals_one_process(tiny, prism_build, tmp_path):
    argv = ["--model", str(tiny), "--data", str(prism_build), "--split", "test", "--batch-size", "2", "--max-new-tokens", "6",
            "--limit", "6", "--no-progress"]
    one_process("judge", [*argv, "--out", str(tmp_path / "one")])
    two_nodes("judge", [*argv, "--out", str(tmp_path / "two")], tmp_path / "logs")
    assert_same_run(tmp_path / "two", tmp_path / "one")


def test_phasefusion_on_two_nodes_equals_one_process(tiny, clips, tmp_path):
    argv = ["--model", str(tiny), "--manifest", str(clips), "--budget", "4", "--phases", "2", "--orderings", "2",
            "--arms", "single,fusion", "--no-progress"]
    one_process("phasefusion", [*argv, "--out", str(tmp_path / "one")])
    two_nodes("phasefusion", [*argv, "--out", str(tmp_path / "two")], tmp_path / "logs")
    assert_same_run(tmp_path / "two", tmp_path / "one")
    assert [r["id"] for r in runs.read_predictions(tmp_path / "two" / runs.PREDICTIONS) if r["kind"] == "question"] == \
        ["pf-0", "pf-1", "pf-2"]


def test_a_node_killed_mid_run_leaves_rank_files_the_whole_job_resumes_from(tiny, timecatch_build, timecatch_reference,
                                                                             tmp_path):
    """One record a flush, so each node's rank file grows a line at a time; node 1 is killed
    (its launcher and the worker torchrun started in a session of its own) once it has written
    a line. Node 0 does not finish the run alone: no metrics, rank files left. Both node
    commands again: the records not yet written are scored, the rest kept, and the merged run
    is the uninterrupted one."""
    import psutil

    out = tmp_path / "two"
    argv = timecatch_argv(tiny, timecatch_build[0], out, batch_size=1)
    nodes = start_nodes("timecatch", argv, tmp_path / "logs")
    rank1 = out / "predictions.rank1.jsonl"
    deadline = time.monotonic() + 300
    def written_a_line() -> bool:
        return rank1.is_file() and rank1.read_bytes().count(b"\n") > 0

    while time.monotonic() < deadline and nodes[1].poll() is None and not written_a_line():
        time.sleep(0.02)
    assert nodes[1].poll() is None and rank1.is_file(), (tmp_path / "logs" / "node1.log").read_text()[-3000:]
    root = psutil.Process(nodes[1].pid)
    for p in [root, *root.children(recursive=True)]:
        p.kill()
    nodes[1].wait()
    assert nodes[0].wait(timeout=300) != 0  # the main node cannot merge and report without node 1
    written = sum(len(runs.read_predictions(p)) for p in out.glob("predictions*.jsonl"))
    assert 1 <= written < 8 and not (out / runs.METRICS).exists()

    two_nodes("timecatch", argv, tmp_path / "logs-resume")
    assert_same_run(out, timecatch_reference)
