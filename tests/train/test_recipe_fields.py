"""`judgetrain train --help` lists every recipe field without importing torch or TRL's trainer
(tests/test_commands.py checks every command's help for that): from a stored copy that must equal the live rendering for this install (regenerate it with
`python -m judgetrain.train.recipe_fields --write`), and that is rendered live whenever its key
(TRL's and transformers' versions, judgetrain's argument modules) does not match."""

from __future__ import annotations

import json

from judgetrain.train import recipe_fields


def test_the_stored_listing_is_the_live_one_for_this_install():
    """The copy is regenerated whenever a judgetrain argument module changes (else this fails),
    and what `--help` prints equals the live rendering: the copy where this install has the
    versions it was made with, the live rendering where it has others."""
    stored = json.loads(recipe_fields.SNAPSHOT.read_text())
    current = recipe_fields.snapshot_key()
    sources = [k for k in current if k.endswith(".py")]
    assert {k: stored["key"].get(k) for k in sources} == {k: current[k] for k in sources}, \
        "recipe_fields.json is stale: run `python -m judgetrain.train.recipe_fields --write`"
    live = recipe_fields.render_recipe_help()
    assert recipe_fields.recipe_help() == live
    if stored["key"] == current:
        assert stored["text"] == live
    assert "--learning_rate" in live and "--lora_r" in live and "--consistency_objective" in live


def test_a_listing_whose_key_does_not_match_is_rendered_live(tmp_path, monkeypatch):
    stale = tmp_path / "recipe_fields.json"
    stale.write_text(json.dumps({"key": {**recipe_fields.snapshot_key(), "trl": "0.0.1"}, "text": "stale"}))
    monkeypatch.setattr(recipe_fields, "SNAPSHOT", stale)
    assert recipe_fields.recipe_help() == recipe_fields.render_recipe_help() != "stale"
