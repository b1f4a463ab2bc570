"""What the reward-model tests share: the tiny Qwen3-VL and a PRISM build of pointwise records (each gold
sequence and its perturbations, one sequence a record), all in train."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.fixture(scope="module")
def pointwise(tmp_path_factory):
    """Four synthetic procedures (sequences of 4 and of 8 frames), layout P0, pointwise records only, all in train."""
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism-pointwise") / "prism"
    prism.build(prism.PrismConfig(out=out, synthetic=4, layouts=("P0",), modes=("pointwise",), synthetic_size=64,
                                  splits={"train": 1.0}, progress=False))
    return out
