"""One writer per output folder for `judgetrain train` and `judgetrain merge` (issue #35): a
second process into a folder another one writes stops at once naming it (pid, host, command,
since when), or with --wait starts once it has finished; only the main rank takes the lock;
an --output_dir / --out that is, holds or lies inside an input (dataset, base model, adapter)
is refused, --overwrite or not; a folder whose parent cannot be written is one clean error."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from judgetrain import cli, writer
from judgetrain.config import ConfigError
from judgetrain.train.accelerate_configs import LaunchArgs
from judgetrain.train.launch import check
from judgetrain.train.merge import MergeOutError, merge_adapter

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-timecatch-lora.yaml"


def overrides(model, data, out, *extra):
    return ["--model_name_or_path", str(model), "--datasets", str(data), "--output_dir", str(out), "--max_steps", "1",
            "--save_steps", "1", "--max_train_samples", "4", *extra]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def adapter(tiny_model, tmp_path_factory):
    """A LoRA adapter on the tiny Qwen3-VL (its base recorded in adapter_config.json)."""
    from peft import LoraConfig, get_peft_model

    from judgetrain.models import load_model_and_processor

    base = tiny_model("qwen3-vl")
    out = tmp_path_factory.mktemp("adapter") / "adapter"
    model, _ = load_model_and_processor(base, dtype="float32")
    get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=r".*language_model.*\.(q_proj|v_proj)")
                   ).save_pretrained(str(out))
    return base, out


def test_a_second_training_run_into_an_output_dir_being_written_is_refused(tiny_model, timecatch_build, tmp_path,
                                                                           writer_lock, monkeypatch):
    out = tmp_path / "run"
    holder = writer_lock.hold(out)
    with pytest.raises(writer.FolderBusyError) as exc:  # `judgetrain train` refuses before launching anything
        check(LaunchArgs(recipe=RECIPE), overrides(tiny_model("qwen3-vl"), timecatch_build[0], out))
    assert str(exc.value).startswith(f"--output_dir {out}: another judgetrain process is writing this folder: process "
                                     f"{holder.pid} on ")
    assert f": -c {out}" in str(exc.value) and "add --wait to start as soon as it has finished" in str(exc.value)
    assert not out.exists()

    from judgetrain.train.run_folder import prepare_output_dir
    from judgetrain.train.parser import parse

    margs, dargs, targs = parse(["--config", str(RECIPE), *overrides(tiny_model("qwen3-vl"), timecatch_build[0], out)])
    with pytest.raises(writer.FolderBusyError):  # the training process's main rank takes the lock
        prepare_output_dir(margs, dargs, targs, 1, [])
    monkeypatch.setenv("RANK", "1")  # another rank never takes it (the main rank holds it for all)
    prepare_output_dir(margs, dargs, targs, 2, [])
    assert writer.holder(out)["pid"] == holder.pid
    writer_lock.release()


def test_train_wait_starts_once_the_other_writer_has_finished(tiny_model, timecatch_build, tmp_path, writer_lock):
    out = tmp_path / "run"
    holder = writer_lock.hold(out)
    argv = [sys.executable, "-m", "judgetrain", "train", str(RECIPE),
            *overrides(tiny_model("qwen3-vl"), timecatch_build[0], out, "--wait")]
    waiter, said = writer_lock.waiting(argv)
    assert f"--output_dir {out}: process {holder.pid} on " in said[-1]
    assert not out.exists()
    writer_lock.release()
    _, stderr = waiter.communicate(timeout=600)
    assert waiter.returncode == 0, stderr
    assert (out / "run.json").is_file()


def test_an_output_dir_that_is_or_lies_inside_an_input_is_refused(tiny_model, timecatch_build, tmp_path):
    data, model = tmp_path / "data", tmp_path / "model"
    shutil.copytree(timecatch_build[0], data)
    shutil.copytree(tiny_model("qwen3-vl"), model)
    before = snapshot(tmp_path)
    for out, what in ((data, f"is datasets ({data})"), (data / "run", f"lies inside datasets ({data})"),
                      (model / "run", f"lies inside model_name_or_path ({model})"),
                      (tmp_path, f"holds datasets ({data})")):
        for extra in ([], ["--overwrite"]):
            with pytest.raises(ConfigError) as exc:
                check(LaunchArgs(recipe=RECIPE), overrides(model, data, out, *extra))
            assert f"--output_dir {out} {what}: " in str(exc.value), str(exc.value)
            assert "Nothing was written; give --output_dir a folder apart from" in str(exc.value)
    assert snapshot(tmp_path) == before


def test_an_output_dir_under_a_file_is_one_clean_error(tiny_model, timecatch_build, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a folder\n")
    out = tmp_path / "a_file" / "run"
    code = cli.main(["train", str(RECIPE), *overrides(tiny_model("qwen3-vl"), timecatch_build[0], out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"error: --output_dir {out}: cannot be written: {tmp_path / 'a_file'} is a file, not a folder." in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_an_out_whose_parent_cannot_be_written_is_one_clean_error(tiny_model, timecatch_build, adapter, tmp_path,
                                                                  capsys):
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        code = cli.main(["train", str(RECIPE), *overrides(tiny_model("qwen3-vl"), timecatch_build[0], parent / "run")])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "PermissionError" not in err
        assert f"error: --output_dir {parent / 'run'}: cannot be written: this user may not create or write files in " \
               f"{parent}" in err
        assert cli.main(["merge", str(adapter[1]), "--out", str(parent / "merged")]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and f"error: --out {parent / 'merged'}: cannot be written: this user may not " \
                                          f"create or write files in {parent}" in err
        assert not list(parent.iterdir())
    finally:
        parent.chmod(0o755)


def test_a_second_merge_into_an_out_being_written_is_refused_then_waits(adapter, tmp_path, writer_lock, capsys):
    base, adapter = adapter
    out = tmp_path / "merged"
    holder = writer_lock.hold(out)
    assert cli.main(["merge", str(adapter), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: --out {out}: another judgetrain process is writing this folder: process {holder.pid} on " in err
    assert "add --wait" in err and not out.exists()

    waiter, said = writer_lock.waiting([sys.executable, "-m", "judgetrain", "merge", str(adapter), "--out", str(out),
                                        "--wait"])
    assert f"--out {out}: process {holder.pid} on " in said[-1]
    writer_lock.release()
    _, stderr = waiter.communicate(timeout=600)
    assert waiter.returncode == 0, stderr
    assert (out / "model.safetensors").is_file()


def test_a_merge_into_its_base_or_its_adapter_is_refused_even_with_overwrite(adapter, tmp_path):
    base, adapter = adapter
    local = tmp_path / "base"
    shutil.copytree(base, local)
    before, kept = snapshot(local), snapshot(adapter)
    for out, what, kwargs in ((local, f"is --base ({local})", {"base": str(local)}),
                              (local / "merged", f"lies inside --base ({local})", {"base": str(local)}),
                              (adapter, f"is ADAPTER ({adapter})", {}),
                              (adapter.parent, f"holds ADAPTER ({adapter})", {})):
        with pytest.raises(MergeOutError) as exc:
            merge_adapter(adapter, out, overwrite=True, **kwargs)
        assert str(exc.value).startswith(f"--out {out} {what}: "), str(exc.value)
        assert "Nothing was written; give --out a folder apart from" in str(exc.value)
    assert snapshot(local) == before and snapshot(adapter) == kept


def test_a_merge_out_under_a_file_is_one_clean_error(adapter, tmp_path, capsys):
    (tmp_path / "a_file").write_text("not a folder\n")
    out = tmp_path / "a_file" / "merged"
    assert cli.main(["merge", str(adapter[1]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: --out {out}: cannot be written: {tmp_path / 'a_file'} is a file, not a folder." in err
