"""Contracts with PEFT (judgetrain.compat.peft): what judgetrain relies on, checked on PEFT's real
matcher, failing naming PEFT and the name it relies on."""

from __future__ import annotations

import contextlib

import pytest

from judgetrain.compat import peft as compat
from judgetrain.compat.versions import UpstreamChanged, installed_version


@contextlib.contextmanager
def relied_on(name: str):
    """Fail naming PEFT, its version and ``name`` when the block finds it changed."""
    try:
        yield
    except (AssertionError, AttributeError, ImportError, TypeError, UpstreamChanged) as e:
        pytest.fail(f"peft {installed_version('peft')} changed {name}, which judgetrain relies on: {type(e).__name__}: {e}")


def test_targets_module_matches_as_peft_injects():
    """A string is a regex full-matched against the whole dotted name; a list names modules by
    their last parts; a module under modules_to_save is never targeted."""
    from peft import LoraConfig

    with relied_on("peft.tuners.tuners_utils.check_target_module_exists"):
        regex = LoraConfig(target_modules=r".*language_model.*\.q_proj")
        assert compat.targets_module(regex, "model.language_model.layers.0.self_attn.q_proj")
        assert not compat.targets_module(regex, "model.visual.blocks.0.attn.q_proj")
        assert not compat.targets_module(regex, "model.language_model.layers.0.self_attn.q_proj.lora_A")  # whole name
        names = LoraConfig(target_modules=["q_proj", "v_proj"], modules_to_save=["visual"])
        assert compat.targets_module(names, "model.language_model.layers.0.self_attn.v_proj")
        assert not compat.targets_module(names, "model.language_model.layers.0.self_attn.qq_proj")
        assert not compat.targets_module(names, "visual.q_proj")


def test_a_removed_matcher_is_named(monkeypatch):
    import importlib

    from peft import LoraConfig

    monkeypatch.delattr(importlib.import_module("peft.tuners.tuners_utils"), "check_target_module_exists")
    with pytest.raises(UpstreamChanged, match=r"^peft \S+ no longer offers peft\.tuners\.tuners_utils\.check_target_module_exists"):
        compat.targets_module(LoraConfig(target_modules="q_proj"), "q_proj")
