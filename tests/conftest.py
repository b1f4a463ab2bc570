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
