"""PhaseFusion at scale (issue 15 §3): questions sharded over `accelerate launch` processes and
merged (the same metrics as one process, one decode per video per process), resume across
world sizes, and an adapter trained on another base refused before scoring with the base it
was trained on, while its own base (under any spelling of its path) loads."""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from judgetrain.eval import phasefusion as PF
from judgetrain.eval.core import merge_rank_files, rank_file, runs
from judgetrain.models.adapters import AdapterMismatchError, load_adapter, same_base

ROOT = Path(__file__).resolve().parents[3]
ARGS = ["--budget", "4", "--phases", "2", "--orderings", "3", "--arms", "single,fusion,vote,union", "--no-progress"]
# What a run measures on the clock or of the process (seconds `*_s`, memory `*_bytes`):
# everything else must agree across launches.
TIMING = ("_s", "_bytes")


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return {name: tiny_model(name) for name in ("qwen3-vl", "qwen2.5-vl")}


def _cli(*argv):
    from judgetrain.cli import main

    return main(["eval", "phasefusion", *map(str, argv)])


@pytest.fixture(scope="module")
def reference(tiny, clips, tmp_path_factory):
    out = tmp_path_factory.mktemp("scale-runs") / "one-process"
    assert _cli("--model", tiny["qwen3-vl"], "--manifest", clips, "--out", out, *ARGS) == 0
    return out


def _stable(metrics):
    return {k: v for k, v in metrics.items() if k not in ("cost", "run")}


def _untimed(rows):
    return [{k: v for k, v in r.items() if not k.endswith(TIMING)} for r in rows]


def _close(a, b, where="") -> list[str]:
    """Where two JSON values differ: floats up to 1e-6 relative (another process count
    runs its matrix products with other thread splits), everything else exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in _close(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _close(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) else [f"{where}: {a} != {b}"]
    return [] if a == b and type(a) is type(b) else [f"{where}: {a!r} != {b!r}"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- data parallel


@pytest.mark.slow
def test_two_cpu_processes_match_one(reference, tiny, clips, tmp_path):
    out = tmp_path / "ddp"
    accelerate = Path(sys.executable).parent / "accelerate"
    cmd = [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
           "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port()),
           "-m", "judgetrain.eval.phasefusion", "--model", str(tiny["qwen3-vl"]), "--manifest", str(clips),
           "--out", str(out), *ARGS]
    env = dict(os.environ, ACCELERATE_USE_CPU="1", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / runs.RUN_INFO).read_text())["world_size"] == 2
    assert not list(out.glob("predictions.rank*.jsonl"))
    rows, ref_rows = runs.read_predictions(out / runs.PREDICTIONS), runs.read_predictions(reference / runs.PREDICTIONS)
    # each question once (it was 102 rows for 3 questions, every key twice), in manifest order
    assert len(rows) == len(ref_rows) == 3 * (4 * 3 * 2 + 3 * 2 + 1)
    assert [r["id"] for r in rows if r["kind"] == "question"] == ["pf-0", "pf-1", "pf-2"]
    assert len({(r["id"], r["kind"], r.get("origin"), r.get("grid"), r.get("phase"), r.get("ordering"))
                for r in rows}) == len(rows)
    assert all(r["decode_passes"] == 1 for r in rows if r["kind"] == "question")  # one decode per video
    assert [(r["id"], r["kind"], r.get("pred")) for r in rows] == [(r["id"], r["kind"], r.get("pred")) for r in ref_rows]
    assert _close(_untimed(rows), _untimed(ref_rows)) == []
    got, ref = json.loads((out / runs.METRICS).read_text()), json.loads((reference / runs.METRICS).read_text())
    assert _close(_stable(got), _stable(ref)) == []
    assert got["cost"]["decode"]["decoding_passes"] == 3


def test_rank_files_of_a_killed_launch_resume_in_one_process(reference, tiny, clips, tmp_path):
    """What a killed 2-process launch leaves: pf-0 done on rank 0 with some rows of pf-2 after
    it, pf-1 done on rank 1. One process resumes: only pf-2 is scored, the stray rows go, and
    the merged run equals the uninterrupted one."""
    out = tmp_path / "killed"
    out.mkdir()
    ref_rows = runs.read_predictions(reference / runs.PREDICTIONS)
    by_id = {i: [r for r in ref_rows if r["id"] == i] for i in ("pf-0", "pf-1", "pf-2")}
    with open(rank_file(out, 0), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in by_id["pf-0"] + by_id["pf-2"][:5]) + '{"id": "pf-2", "ki')
    with open(rank_file(out, 1), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in by_id["pf-1"]))
    info = json.loads((reference / runs.RUN_INFO).read_text())
    (out / runs.RUN_INFO).write_text(json.dumps({**info, "world_size": 2}))
    result = PF.evaluate(str(tiny["qwen3-vl"]), clips, out, budget=4, phases=2, orderings=3,
                         arms="single,fusion,vote,union", progress=False)
    assert (result["n_scored"], result["n_errors"], result["world_size"]) == (1, 0, 1)
    assert not list(out.glob("predictions.rank*.jsonl"))
    assert _untimed(runs.read_predictions(out / runs.PREDICTIONS)) == _untimed(ref_rows)
    assert _stable(result["metrics"]) == _stable(json.loads((reference / runs.METRICS).read_text()))


def test_merge_keeps_every_row_of_an_id_from_the_first_file_holding_it(tmp_path):
    rows = {"a": [{"id": "a", "k": 0}, {"id": "a", "k": 1}], "b": [{"id": "b", "k": 0}], "c": [{"id": "c", "k": 0}]}
    (tmp_path / runs.PREDICTIONS).write_text("".join(json.dumps(r) + "\n" for r in rows["c"]))
    rank_file(tmp_path, 0).write_text("".join(json.dumps(r) + "\n" for r in rows["b"] + rows["a"]))
    rank_file(tmp_path, 1).write_text(json.dumps({"id": "c", "k": 9}) + "\n")  # c is already in predictions.jsonl
    merge_rank_files(tmp_path, ["a", "b", "c"])
    assert runs.read_predictions(tmp_path / runs.PREDICTIONS) == rows["a"] + rows["b"] + rows["c"]
    assert not list(tmp_path.glob("predictions.rank*.jsonl"))


def test_finished_questions_are_those_with_their_closing_row():
    rows = [{"id": "q1", "kind": "pass"}, {"id": "q1", "kind": "question"}, {"id": "q2", "kind": "pass"},
            {"id": "q3", "kind": "error"}]
    assert PF.finished_questions(rows) == {"q1"}


# --------------------------------------------------------------------------- adapters and their base


def _lora(base: Path, out: Path) -> Path:
    """A LoRA adapter on ``base`` saved as `judgetrain train` saves one (adapter + processor),
    with non-zero B so it changes the scores."""
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import detect_family, load_model_and_processor

    model, processor = load_model_and_processor(base, dtype="float32")
    torch.manual_seed(0)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM",
                                                  target_modules=detect_family(model.config).lora_target_regex))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    peft_model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _narrow(base: Path, out: Path) -> Path:
    """The tiny Qwen3-VL at half the text width (hidden 32, MLP 64): same family, other shapes."""
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor

    config = AutoConfig.from_pretrained(base)
    config.text_config.hidden_size, config.text_config.intermediate_size = 32, 64
    config.vision_config.out_hidden_size = 32
    torch.manual_seed(1)
    AutoModelForImageTextToText.from_config(config).save_pretrained(out)
    AutoProcessor.from_pretrained(base).save_pretrained(out)
    return out


def _item():
    from PIL import Image

    return {"prompt": [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "In order?"}]}],
            "images": [Image.new("RGB", (64, 64), (90, 120, 30))], "choices": ["yes", "no"]}


def _score(model, adapter):
    from judgetrain.scoring import Scorer

    return Scorer.from_pretrained(model, adapter, dtype="float32", progress=False).score([_item()])[0].logprobs


def test_adapter_of_another_family_is_refused_before_scoring(tiny, clips, tmp_path, capsys):
    adapter = _lora(tiny["qwen3-vl"], tmp_path / "qwen3-lora")
    from judgetrain.scoring import Scorer

    # before: loaded silently, then "shape '[-1, 3, 2, 14, 14]' is invalid" inside the vision tower
    with pytest.raises(AdapterMismatchError) as err:
        Scorer.from_pretrained(tiny["qwen2.5-vl"], adapter, dtype="float32", progress=False)
    msg = str(err.value)
    assert f"was trained on base model '{tiny['qwen3-vl']}'" in msg and f"--model {tiny['qwen3-vl']}" in msg
    assert "model_type: the base is 'qwen3_vl', this model is 'qwen2_5_vl'" in msg
    # every evaluation taking --adapter: a clean `error:` line, exit 2, no run folder
    out = tmp_path / "run"
    assert _cli("--model", tiny["qwen2.5-vl"], "--adapter", adapter, "--manifest", clips, "--out", out, *ARGS,
                "--limit", "1") == 2
    assert f"--model {tiny['qwen3-vl']}" in capsys.readouterr().err
    assert not (out / runs.RUN_INFO).exists()
    # the pre-load check names the processor saved with the adapter too
    from judgetrain.models import load_model_and_processor

    other, _ = load_model_and_processor(tiny["qwen2.5-vl"], dtype="float32")
    with pytest.raises(AdapterMismatchError, match="holds a Qwen3VLProcessor .*needs a Qwen2_5_VLProcessor"):
        load_adapter(other, adapter, tiny["qwen2.5-vl"])


def test_adapter_of_another_width_is_refused_with_its_shapes(tiny, tmp_path):
    from judgetrain.models import load_model_and_processor

    narrow = _narrow(tiny["qwen3-vl"], tmp_path / "qwen3-vl-narrow")
    adapter = _lora(narrow, tmp_path / "narrow-lora")
    model, _ = load_model_and_processor(tiny["qwen3-vl"], dtype="float32")
    with pytest.raises(AdapterMismatchError) as err:
        load_adapter(model, adapter, tiny["qwen3-vl"])
    msg = str(err.value)
    assert f"was trained on base model '{narrow}'" in msg and f"--model {narrow}" in msg
    assert ("model.language_model.layers.0.mlp.down_proj: the adapter's lora_A is [4, 64] (in_features 64), "
            "this model's layer takes 128") in msg
    # per layer: A of q, k, v, gate, up, down (their inputs narrowed) and B of o, gate, up, down: 10 x 2 layers, 3 shown
    assert "… and 17 more" in msg
    # onto its own base it loads
    own, _ = load_model_and_processor(narrow, dtype="float32")
    from peft import PeftModel

    assert isinstance(load_adapter(own, adapter, narrow), PeftModel)


def test_own_base_under_a_relative_or_absolute_path_loads_without_warning(tiny, tmp_path, monkeypatch):
    root = tmp_path / "work"
    shutil.copytree(tiny["qwen3-vl"], root / "models" / "qwen3-vl")
    monkeypatch.chdir(root)
    adapter = _lora(Path("models/qwen3-vl"), root / "lora")  # PEFT records the relative path, as given
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "models/qwen3-vl"
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        relative = _score("models/qwen3-vl", adapter)
        absolute = _score(root / "models" / "qwen3-vl", adapter)
    assert relative == absolute != _score(root / "models" / "qwen3-vl", None)  # the adapter was applied
    assert same_base("models/qwen3-vl", str(root / "models" / "qwen3-vl"))
    assert same_base("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
    assert not same_base("Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3-VL-4B-Instruct") and not same_base(None, "x")


def test_same_model_under_another_name_warns_and_loads(tiny, tmp_path):
    from judgetrain.models import load_model_and_processor

    adapter = _lora(tiny["qwen3-vl"], tmp_path / "lora")
    copy = shutil.copytree(tiny["qwen3-vl"], tmp_path / "elsewhere" / "qwen3-vl")
    model, _ = load_model_and_processor(copy, dtype="float32")
    with pytest.warns(UserWarning, match=f"trained on base model '{tiny['qwen3-vl']}'.*--model {tiny['qwen3-vl']}"):
        load_adapter(model, adapter, copy)
    assert _score(copy, adapter) == _score(tiny["qwen3-vl"], adapter)


def test_scorer_refuses_an_adapter_of_another_width_before_peft_loads_it(tiny, tmp_path):
    """Needs judgetrain/scoring/scorer.py to load adapters through models.adapters.load_adapter
    (before: torch's "size mismatch for base_model.model.model.language_model.layers.0…" from inside PEFT)."""
    from judgetrain.scoring import Scorer

    narrow = _narrow(tiny["qwen3-vl"], tmp_path / "qwen3-vl-narrow")
    adapter = _lora(narrow, tmp_path / "narrow-lora")
    with pytest.raises(AdapterMismatchError, match=rf"trained on base model '{narrow}'(.|\n)*lora_A is \[4, 64\]"):
        Scorer.from_pretrained(tiny["qwen3-vl"], adapter, dtype="float32", progress=False)
    assert len(_score(narrow, adapter)) == 2


def test_merge_refuses_an_adapter_of_another_base_naming_it(tiny, tmp_path):
    """`judgetrain merge --base` goes through the same check: before, PEFT failed with a size mismatch."""
    from judgetrain.train import merge_adapter

    narrow = _narrow(tiny["qwen3-vl"], tmp_path / "qwen3-vl-narrow")
    adapter = _lora(narrow, tmp_path / "narrow-lora")
    with pytest.raises(AdapterMismatchError, match=rf"trained on base model '{narrow}'"):
        merge_adapter(adapter, tmp_path / "merged", base=str(tiny["qwen3-vl"]), dtype="float32")
    assert not (tmp_path / "merged").exists()
    assert (merge_adapter(adapter, tmp_path / "merged", dtype="float32") / "config.json").is_file()  # its own base
