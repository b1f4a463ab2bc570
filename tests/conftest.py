from __future__ import annotations

import os

import pytest

# Tests never reach a model hub: fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


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
    PhaseFusion tests (tests/test_phasefusion.py, tests/test_phasefusion_scale.py)."""
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
