"""The quickstart (docs/get-started/quickstart.md, `make quickstart`) runs end to end, offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from judgetrain import train

REPO = Path(__file__).resolve().parents[1]


def test_quickstart_builds_evaluates_trains_and_compares(tmp_path):
    out = tmp_path / "qs"
    done = subprocess.run([sys.executable, "-m", "judgetrain", "quickstart", "--out", str(out), "--clips", "6", "--train-steps", "2"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    for family in ("qwen3-vl", "qwen2.5-vl", "llava-onevision"):
        assert (out / "models" / family / "model.safetensors").is_file()
    assert json.loads((out / "timecatch" / "build.json").read_text())["builder"] == "timecatch"
    run = out / "runs" / "tiny-qwen3vl-timecatch"
    assert json.loads((run / "trainer_state.json").read_text())["global_step"] == 2
    assert (run / "adapter_model.safetensors").is_file()
    for name in ("zero-shot", "lora"):
        assert (out / "results" / name / "report.md").is_file()
        assert json.loads((out / "results" / name / "metrics.json").read_text())
    assert "Δ lora" in (out / "results" / "comparison.md").read_text()
    assert f"Reports: {out / 'results' / 'zero-shot' / 'report.md'}" in done.stdout
    assert "scores near chance" in done.stdout and "--model Qwen/Qwen3-VL-2B-Instruct" in done.stdout
    assert f"everything is under {out}" in done.stdout
    assert "judgetrain train recipes/qwen3vl-2b/timecatch-lora.yaml" in done.stdout
    # the real-model command it prints passes that recipe's batch check (16 / (4 x 1)); zero3's 8 processes would not
    printed = next(line.split() for line in done.stdout.splitlines() if "judgetrain train recipes/qwen3vl-2b" in line)
    assert printed[printed.index("--num-processes") + 1] == "1"
    margs, dargs, targs = train.parse(["--config", str(REPO / "recipes" / "qwen3vl-2b" / "timecatch-lora.yaml"),
                                              "--bf16", "false"])
    assert train.check_config(margs, dargs, targs, world_size=1) == []

    # a rerun with other settings is refused before anything is rewritten; --overwrite replaces
    before = (out / "timecatch" / "build.json").read_bytes()
    again = [sys.executable, "-m", "judgetrain", "quickstart", "--out", str(out), "--clips", "4", "--train-steps", "0",
             "--eval-limit", "4"]
    refused = subprocess.run(again, capture_output=True, text=True, timeout=900)
    assert refused.returncode == 2 and "synthetic: 6 → 4" in refused.stderr and "--overwrite" in refused.stderr
    assert "Traceback" not in refused.stderr and (out / "timecatch" / "build.json").read_bytes() == before
    replaced = subprocess.run([*again, "--overwrite"], capture_output=True, text=True, timeout=900)
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert json.loads((out / "timecatch" / "build.json").read_text())["args"]["synthetic"] == 4
