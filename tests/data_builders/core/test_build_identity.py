"""A builder never overwrites or mixes other work: the same build twice is a no-op (the folder
byte for byte as it was), another build into the same --out is refused naming each difference
old → new, --overwrite replaces it whole, a folder that is no build is refused, and what killed
atomic writes left under OUT.work/ is gone after the next run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgetrain import writer
from judgetrain.data_builders import prism, timecatch, video_mcq
from judgetrain.data_builders.core.common import BuildError
from judgetrain.data_builders.core.identity import build_identity, is_leftover
from judgetrain.data_builders.procedures import write_procedures
from judgetrain.data_builders.synthetic import write_frame_folders


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) by relative path, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def siblings(out: Path) -> list[str]:
    """What lies beside ``out`` but ``out`` itself and its writer lock (judgetrain.writer); an atomic swap
    leaves nothing there."""
    lock = writer.lock_file(out)
    return sorted(p.name for p in out.parent.iterdir() if p.name not in (out.name, lock.name, lock.name + ".json"))


def leftovers(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if is_leftover(p.name))


def tc_config(out, **kw) -> timecatch.TimeCatchConfig:
    """A TimeCatch build of four synthetic frame folders (seconds), random LPIPS backbone."""
    base = dict(out=out, synthetic=4, synthetic_kind="frames", seed=1, lpips_random_backbone=True, tasks=["temporal_detect"],
                progress=False)
    return timecatch.TimeCatchConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def tc_built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tc-base") / "X"
    timecatch.build(tc_config(out))
    return out


@pytest.fixture
def tc_copy(tc_built, tmp_path) -> Path:
    out = tmp_path / "X"
    shutil.copytree(tc_built, out)
    return out


# --------------------------------------------------------------------------- TimeCatch, through build()


def test_another_seed_into_a_built_folder_is_refused_and_the_build_stays(tc_copy):
    before = snapshot(tc_copy)
    with pytest.raises(BuildError) as e:
        timecatch.build(tc_config(tc_copy, seed=2))
    message = str(e.value)
    assert "seed: 1 → 2" in message and "--overwrite" in message and "--out NEW" in message
    assert message.count("\n  - ") == 1  # only the seed differs
    assert snapshot(tc_copy) == before  # 12 records of seed 1, not 24 of both
    info = json.loads((tc_copy / "build.json").read_text())
    assert info["seed"] == 1 and info["identity"]["seed"] == 1
    assert not (tc_copy.parent / "X.work").exists()  # refused before any work started


def test_the_same_build_twice_is_a_no_op(tc_copy, capsys):
    before = snapshot(tc_copy)
    stat = {p: p.stat().st_mtime_ns for p in tc_copy.rglob("*")}
    capsys.readouterr()
    info = timecatch.build(tc_config(tc_copy))
    assert "already built with these settings" in capsys.readouterr().out
    assert info == json.loads((tc_copy / "build.json").read_text())
    assert snapshot(tc_copy) == before and {p: p.stat().st_mtime_ns for p in tc_copy.rglob("*")} == stat
    assert not (tc_copy.parent / "X.work").exists()  # nothing was decoded or measured again
    # what only says how to run (progress, the LPIPS device, --strict on a build that skipped nothing) is the same build
    assert timecatch.build(tc_config(tc_copy, progress=True, device="cpu", strict=True)) == info


def test_overwrite_replaces_the_build_whole(tc_copy, tmp_path):
    info = timecatch.build(tc_config(tc_copy, seed=2, overwrite=True))
    assert info["seed"] == 2 and info["identity"]["seed"] == 2
    assert json.loads((tc_copy / "build.json").read_text()) == info
    fresh = timecatch.build(tc_config(tmp_path / "fresh" / "X", seed=2))
    assert info["splits"] == fresh["splits"]  # exactly seed 2's records: nothing of seed 1 mixed in
    assert siblings(tc_copy) == ["fresh"]  # no .X.old-* / .X.partial-* and no X.work left


def test_a_folder_that_is_no_build_is_refused(tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BuildError, match=r"--out .*results: exists and holds no build.json.*not empty \(notes.txt\)"):
        timecatch.build(tc_config(out))
    assert snapshot(out) == {"notes.txt": b"mine"}
    (tmp_path / "empty").mkdir()  # an empty folder is fine
    assert timecatch.build(tc_config(tmp_path / "empty"))["seed"] == 1
    info = timecatch.build(tc_config(out, overwrite=True))
    assert not (out / "notes.txt").exists() and json.loads((out / "build.json").read_text()) == info


def test_a_relative_and_an_absolute_manifest_are_the_same_build(tmp_path, monkeypatch, capsys):
    manifest = write_frame_folders(tmp_path / "src", 4, seed=5, progress=False)
    monkeypatch.chdir(tmp_path)
    rel = Path("src") / "manifest.jsonl"
    timecatch.build(tc_config(Path("ds"), synthetic=None, frames=rel))
    before = snapshot(tmp_path / "ds")
    capsys.readouterr()
    timecatch.build(tc_config(tmp_path / "ds", synthetic=None, frames=manifest.resolve()))
    assert "already built" in capsys.readouterr().out and snapshot(tmp_path / "ds") == before
    # the manifest by content: the same bytes elsewhere are the same build, other bytes are not
    shutil.copytree(tmp_path / "src", tmp_path / "copy")
    assert build_identity(tc_config("a", synthetic=None, frames=tmp_path / "copy" / "manifest.jsonl"), "timecatch", "1") == \
        build_identity(tc_config("b", synthetic=None, frames=rel), "timecatch", "1")
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines[:3]) + "\n")
    with pytest.raises(BuildError, match=r"frames\.sha256: '[0-9a-f]{64}' → '[0-9a-f]{64}'"):
        timecatch.build(tc_config(Path("ds"), synthetic=None, frames=rel))
    assert snapshot(tmp_path / "ds") == before


def test_a_rerun_after_a_kill_leaves_no_leftovers_under_the_work_folder(tmp_path):
    """Planted: what a kill inside io.atomic_folder / io.atomic_path leaves, in every folder of OUT.work."""
    out = tmp_path / "X"
    first = timecatch.build(tc_config(out, keep_work=True))
    work = tmp_path / "X.work"
    seq = next(p for p in (work / "sequences").iterdir() if p.is_dir())
    shutil.rmtree(out)  # killed before the records were saved: no build in OUT yet
    planted = [work / "sequences" / f".{seq.name}.partial-0123abcd", work / "sequences" / f".{seq.name}.old-89abcdef",
               seq / ".seq.json.deadbeef.tmp", work / "arrow" / ".x.0badf00d.tmp.png"]
    for p in planted:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.name.endswith((".tmp", ".png")):
            p.write_bytes(b"half")
        else:
            p.mkdir()
            (p / "000.png").write_bytes(b"half")
    (work / "frames-notes.txt").write_text("not a leftover")
    assert len(leftovers(work)) == 4
    again = timecatch.build(tc_config(out, keep_work=True))
    assert leftovers(work) == [] and not any(p.exists() for p in planted)
    assert (work / "frames-notes.txt").read_text() == "not a leftover"
    assert again["splits"] == first["splits"]


def test_a_rerun_after_a_real_kill_leaves_no_leftovers(tmp_path):
    """A real SIGKILL of a --keep-work build once its first sequence is done (wherever the kill
    lands, the rerun must leave nothing half-written under OUT.work and finish the build)."""
    out = tmp_path / "X"
    argv = ["build", "timecatch", "--out", str(out), "--synthetic", "6", "--synthetic-kind", "frames", "--seed", "1",
            "--lpips-random-backbone", "--tasks", "temporal_detect", "--keep-work", "--no-progress"]
    entry = "import sys; from judgetrain.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", entry, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sequences = tmp_path / "X.work" / "sequences"
    deadline = time.monotonic() + 120
    while not (sequences.is_dir() and any(sequences.iterdir())) and proc.poll() is None:
        assert time.monotonic() < deadline, "the build made no progress"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    info = timecatch.build(tc_config(out, synthetic=6, keep_work=True))
    assert leftovers(tmp_path / "X.work") == [] and siblings(out) == ["X.work"]
    assert json.loads((out / "build.json").read_text()) == info


# --------------------------------------------------------------------------- PRISM, through the command line


def cli(*argv: str) -> int:
    from judgetrain.cli import main

    return main(list(argv))


def test_prism_with_other_layouts_into_a_built_folder_is_refused_then_overwritten(tmp_path, capsys):
    out = str(tmp_path / "prism")
    base = ("build", "prism", "--out", out, "--synthetic", "4", "--synthetic-size", "64", "--perturbations", "swap,semantic-1",
            "--no-progress")
    assert cli(*base) == 0
    before = snapshot(Path(out))
    capsys.readouterr()
    assert cli(*base, "--layouts", "P0,P4,P6") == 2
    err = capsys.readouterr().err
    assert "layouts: ['P0', 'P1', 'P2', 'P3', 'P4', 'P5', 'P6'] → ['P0', 'P4', 'P6']" in err and "--overwrite" in err
    assert snapshot(Path(out)) == before
    assert cli(*base) == 0 and snapshot(Path(out)) == before  # the first command again: nothing to do
    assert "already built" in capsys.readouterr().out
    assert cli(*base, "--layouts", "P0,P4,P6", "--overwrite") == 0
    info = json.loads((Path(out) / "build.json").read_text())
    assert info["args"]["layouts"] == ["P0", "P4", "P6"] and info["identity"]["layouts"] == ["P0", "P4", "P6"]
    assert siblings(Path(out)) == []


def test_prism_procedures_relative_or_absolute_are_one_build(tmp_path, monkeypatch, capsys):
    manifest = write_procedures(tmp_path / "procs", 4, seed=2, size=64, progress=False)
    monkeypatch.chdir(tmp_path)
    cfg = dict(layouts=["P0"], modes=["pairwise"], perturbations=["swap"], progress=False)
    prism.build(prism.PrismConfig(out=Path("ds"), procedures=Path("procs/manifest.jsonl"), **cfg))
    before = snapshot(tmp_path / "ds")
    capsys.readouterr()
    prism.build(prism.PrismConfig(out=tmp_path / "ds", procedures=manifest.resolve(), **cfg))
    assert "already built" in capsys.readouterr().out and snapshot(tmp_path / "ds") == before
    with pytest.raises(BuildError, match=r"procedures: \{'sha256': '[0-9a-f]{64}'\} → None\n.*synthetic: None → 100"):
        prism.build(prism.PrismConfig(out=tmp_path / "ds", **cfg))  # the synthetic source instead


# --------------------------------------------------------------------------- video-mcq: it writes into OUT itself


def vmcq_config(out, **kw):
    base = dict(out=out, synthetic=2, frames=16, fps=8, size="64x48", progress=False)
    return video_mcq.VideoMcqConfig(**{**base, **kw})


def test_video_mcq_refuses_another_build_and_overwrite_replaces_it_atomically(tmp_path, capsys):
    out = tmp_path / "vmcq"
    first = video_mcq.build(vmcq_config(out))
    assert first["identity"]["seed"] == 42 and json.loads((out / "build.json").read_text()) == first
    before = snapshot(out)
    capsys.readouterr()
    assert video_mcq.build(vmcq_config(out)) == first and snapshot(out) == before
    assert "already built" in capsys.readouterr().out
    with pytest.raises(BuildError, match="seed: 42 → 7"):
        video_mcq.build(vmcq_config(out, seed=7))
    assert snapshot(out) == before
    info = video_mcq.build(vmcq_config(out, seed=7, overwrite=True))
    assert info["seed"] == 7 and info["identity"]["seed"] == 7 and info["args"]["out"] == str(out)
    assert json.loads((out / "build.json").read_text()) == info and siblings(out) == []
    assert info["counts"]["videos_kept"] == 0  # none of seed 42's videos stood in for seed 7's
    assert sorted(p.name for p in (out / "videos").iterdir()) == ["vmcq-00000.mp4", "vmcq-00001.mp4"]
