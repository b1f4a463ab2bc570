"""Identity by content (judgetrain.identity): the cached file hash sees files replaced in
place, a model folder is its files wherever it is spelled from, and differences read
old → new."""

import os
import shutil
import subprocess

from judgetrain import identity
from judgetrain.identity import differences, files_identity, git_state, model_identity, sha256_file


def test_the_hash_is_cached_and_a_file_changed_in_place_is_hashed_again(tmp_path, monkeypatch):
    monkeypatch.setenv(identity.CACHE_ENV, str(tmp_path / "cache"))
    path = tmp_path / "w.safetensors"
    path.write_bytes(b"a" * 100)
    first = sha256_file(path)
    assert len(first) == 64 and len(list((tmp_path / "cache" / "sha256").iterdir())) == 1
    stat = path.stat()
    path.write_bytes(b"b" * 100)  # same size; restore the old mtime: ctime and the content still tell
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert sha256_file(path) != first
    replacement = tmp_path / "new"
    replacement.write_bytes(b"a" * 100)
    os.replace(replacement, path)
    assert sha256_file(path) == first


def test_a_model_is_its_files_not_its_spelling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights-1")
    (model / "notes.md").write_text("ignored")
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    assert model_identity("m") == model_identity(str(model)) == model_identity(copy)
    assert sorted(model_identity("m")["files"]) == ["config.json", "model.safetensors"]
    (copy / "model.safetensors").write_bytes(b"weights-2")  # same config.json, other weights
    assert model_identity(copy) != model_identity(model)
    assert differences(model_identity(model), model_identity(copy)) == [
        f"files.model.safetensors: {sha256_file(model / 'model.safetensors')!r} → {sha256_file(copy / 'model.safetensors')!r}"]
    assert model_identity("Qwen/Qwen3-VL-2B-Instruct") == {"hub_id": "Qwen/Qwen3-VL-2B-Instruct"}
    assert files_identity([model / "config.json"]) == files_identity([copy / "config.json"])


def test_differences_read_old_then_new_and_git_state_sees_uncommitted_changes(tmp_path):
    assert differences({"seed": 1, "a": {"b": 2}}, {"seed": 2, "a": {"b": 2}}) == ["seed: 1 → 2"]
    assert differences({"a": 1}, {"a": 1, "b": None}) == []
    repo = tmp_path / "repo"
    repo.mkdir()
    assert git_state(repo) == {"commit": None, "dirty": None}

    def run(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    run("init", "-q")
    (repo / "f").write_text("1")
    run("add", "f")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    state = git_state(repo / "f")
    assert len(state["commit"]) == 40 and state["dirty"] is False
    (repo / "f").write_text("2")
    assert git_state(repo)["dirty"] is True


def test_a_path_is_its_content_a_dataset_its_split_hashes(tmp_path):
    from judgetrain.identity import path_identity

    (tmp_path / "a.jsonl").write_text('{"id": 1}\n')
    assert path_identity(tmp_path / "a.jsonl") == {"sha256": sha256_file(tmp_path / "a.jsonl")}
    built = tmp_path / "ds"
    built.mkdir()
    (built / "build.json").write_text('{"builder": "prism", "splits": {"train": {"rows": 3, "content_hash": "abc"}}}')
    assert path_identity(built) == {"builder": "prism", "splits": {"train": "abc"}}
    media = tmp_path / "m"
    media.mkdir()
    (media / "ann.json").write_text("[1]")
    (media / "v.mp4").write_bytes(b"x" * 10)
    first = path_identity(media)
    (media / "v.mp4").write_bytes(b"y" * 10)  # media count by name and size: the same
    assert path_identity(media) == first
    (media / "ann.json").write_text("[2]")  # annotations by content: another
    assert path_identity(media) != first
    assert path_identity(tmp_path / "nope") == {"missing": str((tmp_path / "nope").resolve())}
