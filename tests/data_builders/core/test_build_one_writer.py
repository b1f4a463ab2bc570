"""One writer per build folder, and never over an input (issue #35): a second build into an --out
another process is writing stops at once naming that process (or, with --wait, builds once it
has finished); an --out that is, holds or lies inside an input (a manifest, the media it lists)
is refused with or without --overwrite, and nothing of the input goes; an --out whose parent
cannot be written is one clean error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgetrain import writer
from judgetrain.data_builders import prism, timecatch
from judgetrain.data_builders.core.common import BuildError
from judgetrain.data_builders.synthetic import write_frame_folders

PRISM = ["--synthetic", "2", "--layouts", "P0", "--synthetic-size", "64", "--no-progress"]


def judgetrain(*args: str) -> list[str]:
    return [sys.executable, "-m", "judgetrain", *args]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_build_into_a_folder_being_written_is_refused_naming_the_first(tmp_path, writer_lock):
    """The bug: two builds (seeds 1 and 2) into one --out ran together; one died with a traceback, the
    other held the first one's frames under its own build.json."""
    out = tmp_path / "ds"
    holder = writer_lock.hold(out)
    done = subprocess.run(judgetrain("build", "prism", "--out", str(out), "--seed", "2", *PRISM), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"error: --out {out}: another judgetrain process is writing this folder: process {holder.pid} on " in done.stderr
    assert "add --wait to start as soon as it has finished" in done.stderr and "(--out NEW_FOLDER)" in done.stderr
    assert not out.exists()  # it wrote nothing


def test_wait_builds_once_the_other_writer_has_finished(tmp_path, writer_lock):
    out = tmp_path / "ds"
    holder = writer_lock.hold(out)
    waiter, said = writer_lock.waiting(judgetrain("build", "prism", "--out", str(out), *PRISM, "--wait"))
    assert f"process {holder.pid} on " in said[-1]
    assert not out.exists()  # still waiting: nothing written while the other one holds the folder
    writer_lock.release()
    stdout, stderr = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, stderr
    assert (out / "build.json").is_file()
    assert not writer.holder_file(out).exists()  # the note of who holds it goes with the process


def test_the_lock_is_held_for_the_build_and_given_back(tmp_path):
    """In-process: while a build runs it holds its --out (the note names this process); a killed
    process leaves the lock free (the kernel's flock), so a build in another process then proceeds."""
    out = tmp_path / "ds"
    prism.build(prism.PrismConfig(out=out, synthetic=2, layouts=("P0",), synthetic_size=64, progress=False))
    assert writer.holder(out)["pid"] == os.getpid()
    writer.release_all()
    assert writer.holder(out) is None
    killed = subprocess.Popen([sys.executable, "-c", "import sys, os\nfrom judgetrain import writer\n"
                               "writer.hold(sys.argv[1])\nos._exit(9)\n", str(out)])
    assert killed.wait(timeout=120) == 9
    assert writer.holder(out) is None  # its note names a process that is gone: nobody holds the folder
    writer.probe(out)  # and the lock is free


@pytest.fixture
def frames_src(tmp_path) -> Path:
    """A frame-folder manifest in src/, its frames in src/frames/, and another folder beside them."""
    write_frame_folders(tmp_path / "src", 3, seed=0, size=(64, 48), frames_range=(4, 5), progress=False)
    (tmp_path / "src" / "media").mkdir()
    (tmp_path / "src" / "media" / "note.txt").write_text("kept\n")
    return tmp_path / "src"


@pytest.mark.parametrize("overwrite", [True, False])
def test_an_out_holding_the_manifest_is_refused_and_nothing_is_deleted(frames_src, overwrite):
    """The bug: `build timecatch --frames src/manifest.jsonl --out src --overwrite` removed manifest.jsonl,
    frames/ and media/ (rc 0); without --overwrite the build replaced src whole too."""
    before = snapshot(frames_src)
    cfg = timecatch.TimeCatchConfig(out=frames_src, frames=frames_src / "manifest.jsonl", overwrite=overwrite,
                                    lpips_random_backbone=True, progress=False)
    with pytest.raises(BuildError) as exc:
        timecatch.build(cfg)
    assert str(exc.value).startswith(f"--out {frames_src} holds --frames ({frames_src / 'manifest.jsonl'}): this command "
                                     "replaces --out whole, which would delete that input. Nothing was written; give --out "
                                     f"a folder apart from {frames_src / 'manifest.jsonl'}")
    assert snapshot(frames_src) == before
    assert not frames_src.with_name("src.work").exists()


def test_an_out_that_is_or_lies_inside_the_media_a_manifest_lists_is_refused(frames_src):
    before = snapshot(frames_src)
    for out, relation in ((frames_src / "frames", "is"), (frames_src / "frames" / "built", "lies inside")):
        cfg = timecatch.TimeCatchConfig(out=out, frames=frames_src / "manifest.jsonl", overwrite=True,
                                        lpips_random_backbone=True, progress=False)
        with pytest.raises(BuildError, match=f"^--out {out} {relation} the media --frames lists \\({frames_src / 'frames'}\\)"):
            timecatch.build(cfg)
    assert snapshot(frames_src) == before


def test_a_build_beside_its_inputs_is_not_refused(frames_src, tmp_path):
    """A folder inside the manifest's folder but apart from its media is no input."""
    out = frames_src / "built"
    cfg = timecatch.TimeCatchConfig(out=out, frames=frames_src / "manifest.jsonl", tasks=["temporal_detect"],
                                    lpips_random_backbone=True, progress=False, splits={"train": 1.0})
    timecatch.build(cfg)
    assert (out / "build.json").is_file()


def test_an_out_under_a_file_or_a_folder_that_cannot_be_written_is_one_clean_error(tmp_path):
    """The bug: a PermissionError traceback. Running as root, chmod stops nothing: a regular file on the
    way (NotADirectoryError) and /sys (EPERM even for root) stand for a folder this user cannot write."""
    (tmp_path / "a_file").write_text("not a folder\n")
    for out, why in ((tmp_path / "a_file" / "out", f"{tmp_path / 'a_file'} is a file, not a folder"),
                     (Path("/sys/judgetrain-test/out"), "this user may not create or write files in /sys")):
        done = subprocess.run(judgetrain("build", "prism", "--out", str(out), *PRISM), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"error: --out {out}: cannot be written: {why}"), done.stderr
        assert "Nothing was written; give --out a " in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_an_out_whose_parent_may_not_be_written_is_one_clean_error(tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        done = subprocess.run(judgetrain("build", "prism", "--out", str(parent / "out"), *PRISM), capture_output=True,
                              text=True, timeout=300)
    finally:
        parent.chmod(0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "PermissionError" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: --out {parent / 'out'}: cannot be written: this user may not create or write "
                                  f"files in {parent} (Permission denied). Nothing was written; give --out a folder you "
                                  f"can write (or change the permissions of {parent})."), done.stderr
    assert not list(parent.iterdir())


def test_two_spellings_of_one_folder_share_one_lock(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert writer.lock_file("real") == writer.lock_file(tmp_path / "real") == writer.lock_file("link")
