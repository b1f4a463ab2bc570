"""`judgetrain train --help` lists every recipe field without importing torch or TRL's trainer
(tests/test_commands.py checks every command's help for that), TRL's read from the installed
source: the listing's fields are the recipe parser's, whatever release is installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from judgetrain.train import recipe_fields
from judgetrain.train.parser import make_parser

# what TRL's and transformers' source computes rather than states (judgetrain.compat.dataclass_source.Unread):
# the listing shows the expression for a default, and no choices for a choice
COMPUTED = {("optim", "default"), ("log_level", "choices"), ("log_level_replica", "choices")}


def _actions(parser) -> dict[tuple[str, ...], dict]:
    return {
        tuple(a.option_strings): {
            "dest": a.dest,
            "nargs": a.nargs,
            "const": a.const,
            "default": a.default,
            "help": a.help,
            "choices": list(a.choices) if a.choices else None,
            "required": a.required,
        }
        for a in parser._actions
        if a.dest != "help"
    }


def test_the_listing_holds_the_recipe_parsers_fields_with_their_defaults_and_help():
    """Every option of the recipe parser (TRL's SFTConfig imported) is listed, with its default,
    help, choices and arity; only what the source computes differs, and is shown as computed."""
    listed, parsed = _actions(recipe_fields.recipe_parser()), _actions(make_parser())
    assert listed.keys() == parsed.keys()
    differ = {(a["dest"], key) for flags, a in listed.items() for key in a if a[key] != parsed[flags][key]}
    assert differ == COMPUTED
    optim = next(a for a in listed.values() if a["dest"] == "optim")
    assert optim["default"] == "default_optim, as transformers computes it"


def test_a_grpo_recipes_listing_holds_its_parsers_fields_and_help_adds_only_what_grpo_adds():
    """`method: grpo` reads the recipe into TRL's GRPOConfig: its listing (GRPOConfig imported) has the
    GRPO parser's fields; `--help`'s GRPO part lists GRPOArguments and GRPOConfig's fields SFTConfig lacks."""
    from trl import GRPOConfig, SFTConfig

    listed, parsed = _actions(recipe_fields.recipe_parser(GRPOConfig, "grpo")), _actions(make_parser("grpo"))
    assert listed.keys() == parsed.keys()
    assert {(a["dest"], key) for flags, a in listed.items() for key in a if a[key] != parsed[flags][key]} <= COMPUTED
    only = {a["dest"] for a in _actions(recipe_fields.recipe_parser(method="grpo", only_added=True)).values()}
    sft = {a["dest"] for a in _actions(make_parser()).values()}
    assert {"rewards", "num_generations", "beta", "temperature", "max_completion_length", "use_vllm"} <= only
    assert only - {"method", "rewards"} == {a["dest"] for a in parsed.values()} - sft - {"rewards"}
    assert "max_length" in {f for f in SFTConfig.__dataclass_fields__} and "max_length" not in only


def test_a_reward_recipes_listing_holds_its_parsers_fields_and_help_adds_only_what_reward_adds():
    """`method: reward` reads the recipe into TRL's RewardConfig: its listing (RewardConfig imported) has the
    reward parser's fields; `--help`'s reward part lists RewardArguments and RewardConfig's fields SFTConfig lacks."""
    from trl import RewardConfig

    listed, parsed = _actions(recipe_fields.recipe_parser(RewardConfig, "reward")), _actions(make_parser("reward"))
    assert listed.keys() == parsed.keys()
    assert {(a["dest"], key) for flags, a in listed.items() for key in a if a[key] != parsed[flags][key]} <= COMPUTED
    only = {a["dest"] for a in _actions(recipe_fields.recipe_parser(method="reward", only_added=True)).values()}
    sft = {a["dest"] for a in _actions(make_parser()).values()}
    assert {"margin_per_score_point", "center_rewards_coefficient"} <= only
    assert only - {"method"} == {a["dest"] for a in parsed.values()} - sft


def test_the_listing_imports_no_torch_and_heads_each_dataclass():
    code = (
        "import sys\nfrom judgetrain.train.recipe_fields import recipe_help\nprint(recipe_help())\n"
        "print(sorted(m for m in ('torch', 'trl.trainer.sft_config', 'trl.trainer.grpo_config', 'trl.trainer.reward_config') "
        "if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    *text, imported = done.stdout.splitlines()
    assert imported == "[]", done.stderr[-3000:]
    for heading in (
        "TRL's ModelConfig with judgetrain's model fields",
        "judgetrain's DataArguments",
        "judgetrain's MethodArguments",
        "judgetrain's ConsistencyArguments",
        "TRL's SFTConfig",
        "`method: grpo`: judgetrain's GRPOArguments",
        "`method: grpo`: TRL's GRPOConfig",
        "`method: reward`: judgetrain's RewardArguments",
        "`method: reward`: TRL's RewardConfig",
    ):
        assert any(line.startswith("recipe fields") and heading in line for line in text), heading
    assert not (Path(recipe_fields.__file__).parent / "recipe_fields.json").exists()  # nothing stored to go stale
