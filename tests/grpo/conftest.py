"""What the GRPO tests share: the tiny Qwen3-VL and a PRISM build whose pairwise items come with their twins."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("qwen3-vl")


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Four synthetic procedures (sequences of 4 and of 8 frames), layout P0, every pairwise item with its twin,
    all in train."""
    from judgetrain.data_builders import prism

    out = tmp_path_factory.mktemp("prism-twins") / "prism"
    prism.build(prism.PrismConfig(out=out, synthetic=4, layouts=("P0",), synthetic_size=64, splits={"train": 1.0},
                                  twins=True, progress=False))
    return out
