from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# Tests never reach a model hub: fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
# content-hash cache (judgetrain.identity): the session's own, never the user's ~/.cache
os.environ.setdefault("JUDGETRAIN_CACHE", tempfile.mkdtemp(prefix="judgetrain-cache-"))


# every family the registry has, and the InternVL3.5 variant (a Qwen3 decoder)
TINY_FAMILIES = ("qwen3-vl", "qwen2.5-vl", "llava-onevision", "internvl", "internvl3.5", "gemma-4")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """``tiny_model(name)``: the folder of a tiny random checkpoint of ``name`` (seed 0), built
    on first use and shared by the session's tests, which only read it."""
    from judgetrain.models.tiny import build_tiny

    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_tiny(name, root / name, seed=0)
        return built[name]

    return get


@pytest.fixture(scope="session")
def tiny_root(tiny_model) -> Path:
    """The folder holding every tiny checkpoint of :data:`TINY_FAMILIES`, one sub-folder each."""
    folders = [tiny_model(name) for name in TINY_FAMILIES]
    return folders[0].parent


@pytest.fixture(scope="session")
def synthetic_manifest(tmp_path_factory):
    """Twelve synthetic physics clips (a quarter long enough for the 9–16 set)."""
    from judgetrain.data_builders.synthetic import write_physics_videos

    return write_physics_videos(tmp_path_factory.mktemp("clips"), 12, seed=3, long_fraction=0.25, progress=False)


@pytest.fixture(scope="session")
def timecatch_build(tmp_path_factory, synthetic_manifest):
    """A TimeCatch build over the synthetic clips, random LPIPS backbone (offline)."""
    from judgetrain.data_builders import timecatch

    out = tmp_path_factory.mktemp("tc") / "ds"
    cfg = timecatch.TimeCatchConfig(out=out, videos=synthetic_manifest, seed=7, lpips_random_backbone=True,
                                    prompts=("A", "B"), progress=False)
    info = timecatch.build(cfg)
    return out, info, cfg


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Three short physics clips and a hand-written video-MCQ manifest (DESIGN.md fields), for the
    PhaseFusion, consistency-tuning and NExT-QA tests."""
    import json

    from judgetrain.data_builders.synthetic import write_physics_videos

    root = tmp_path_factory.mktemp("pf-clips")
    write_physics_videos(root, 3, seed=11, size=(64, 48), duration_range_s=(3.0, 5.0), progress=False)
    lines = [
        {"id": "pf-0", "video": "videos/physics-00000.mp4", "question": "Which object touches the floor first?",
         "options": ["the red ball", "the blue cube", "the green cylinder"], "answer": 1, "benchmark": "synthetic-physics"},
        {"id": "pf-1", "video": "videos/physics-00001.mp4", "question": "Which two objects collide first?",
         "options": ["red and blue", "blue and green", "red and green", "none"], "answer": 3, "benchmark": "synthetic-physics"},
        {"id": "pf-2", "video": "videos/physics-00002.mp4", "question": "Which object moves fastest?",
         "options": ["the cube", "the ball"], "answer": 0, "benchmark": "synthetic-physics", "duration": 4.0},
    ]
    (root / "manifest.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root / "manifest.jsonl"
