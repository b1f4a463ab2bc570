"""Two seeded builds of every builder that writes media are byte-identical, file by file.

Each builder runs twice through the real command line in one process (so the second
build's video encoder has the first one's history, which is what used to change MP4
bytes), into two folders. Every file of the dataset and of the synthetic sources it kept
(MP4s, PNGs, manifests, arrow files) must match byte for byte, and build.json must match
once the two roots are written the same (it records absolute source paths).
"""

import json

import pytest

from judgetrain.cli import main as cli

BUILDS = {
    "timecatch-videos": ["timecatch", "--synthetic", "6", "--seed", "7", "--lpips-random-backbone", "--keep-work"],
    "timecatch-frames": ["timecatch", "--synthetic", "6", "--seed", "7", "--lpips-random-backbone",
                         "--synthetic-kind", "frames", "--keep-work"],
    "video-mcq": ["video-mcq", "--synthetic", "6", "--seed", "3"],
    "prism": ["prism", "--synthetic", "5", "--seed", "3", "--layouts", "P0,P6", "--keep-work"],
    "mirage": ["mirage", "--synthetic", "6", "--seed", "3", "--keep-work"],
    "ordering-probe": ["ordering-probe", "--synthetic", "5", "--seed", "3", "--keep-work"],
}


def _files(root, name):
    """Relative path -> bytes of every file the build left, minus the arrow cache (lock
    files and cache folders are named after the absolute path) and the resume
    bookkeeping (it keys on file mtimes)."""
    out = {}
    for folder in (root / name, root / f"{name}.work"):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix()
            if "/arrow/" in rel or rel.endswith(".lock") or "/sequences/" in rel:
                continue
            out[rel] = path.read_bytes()
    return out


@pytest.mark.parametrize("name", list(BUILDS))
def test_two_seeded_builds_are_byte_identical(name, tmp_path, monkeypatch):
    trees = []
    for run in ("a", "b"):
        root = tmp_path / run
        root.mkdir()
        monkeypatch.chdir(root)
        assert cli(["build", *BUILDS[name], "--out", name, "--no-progress"]) == 0
        trees.append((root, _files(root, name)))
    (root_a, a), (root_b, b) = trees
    assert sorted(a) == sorted(b)
    media = [p for p in a if p.endswith((".mp4", ".png", ".jpg", ".arrow"))]
    assert media, "the build wrote no media to compare"
    info_a = json.loads(a.pop(f"{name}/build.json").decode().replace(str(root_a), "ROOT"))
    info_b = json.loads(b.pop(f"{name}/build.json").decode().replace(str(root_b), "ROOT"))
    assert info_a == info_b
    different = [p for p in a if a[p] != b[p]]
    assert different == []
    if "splits" in info_a:  # the record builders: content hashes per split, equal by the line above
        assert all(len(s["content_hash"]) == 64 for s in info_a["splits"].values())
