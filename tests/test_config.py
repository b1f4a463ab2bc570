"""The typed config layer every command shares (judgetrain.config): YAML defaults, flags
win, unknown keys and flags fail with a suggestion, --help lists every field."""

from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from judgetrain import cli, config, yamlfile
from judgetrain.config import ConfigError, arg
from judgetrain.data_builders import timecatch
from judgetrain.data_builders.core import WorkBuildArgs


@dataclass(kw_only=True)
class Toy(WorkBuildArgs):
    tasks: list[str] = arg(["a", "b"], "tasks")
    ratio: float = arg(0.5, "a ratio", identity=True)
    count: int = arg(2, "a count", minimum=1)
    share: float = arg(0.5, "a share", minimum=0, below=1)
    weights: list[float] = arg([1.0], "weights", above=0)
    limit: float = arg(10.0, "a limit", allow_inf=True)
    descriptions: bool = arg(True, "descriptions")
    inputs: list[Path] = arg([], "inputs", positional=True)

    def __post_init__(self):
        self.tasks = config.comma_list(self.tasks)


def _parse(argv, **kw):
    return config.parse(config.make_parser(Toy, "toy", "a toy command"), argv, **kw)[0]


def test_yaml_sets_defaults_and_flags_win(tmp_path, monkeypatch):
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("out: o\nratio: 0.25\ntasks: [x, y]\nseed: 3\nenv: {JUDGETRAIN_TOY: 'on'}\n")
    monkeypatch.delenv("JUDGETRAIN_TOY", raising=False)
    cfg = _parse(["--config", str(yaml_file), "--seed", "9", "--no-descriptions"])
    assert (cfg.out, cfg.ratio, cfg.tasks, cfg.seed, cfg.descriptions) == (Path("o"), 0.25, ["x", "y"], 9, False)
    import os

    assert os.environ["JUDGETRAIN_TOY"] == "on"
    # both spellings of a field, and the comma form of a list
    cfg = _parse(["--out", "o", "--keep-work", "--tasks", "p,q", "r", f"--config={yaml_file}"])
    assert cfg.keep_work is True and cfg.tasks == ["p", "q", "r"] and cfg.ratio == 0.25


def test_unknown_keys_and_flags_fail_with_suggestions(tmp_path):
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("out: o\nrato: 1\nsed: 2\n")
    with pytest.raises(ConfigError) as exc:
        _parse(["--config", str(yaml_file)])
    assert "unknown key 'rato'; did you mean 'ratio'?" in str(exc.value)
    assert "unknown key 'sed'; did you mean 'seed'?" in str(exc.value) and len(exc.value.problems) == 2
    with pytest.raises(ConfigError, match=r"unknown argument '--tasksx'; did you mean '--tasks'\?"):
        _parse(["--out", "o", "--tasksx", "a"])
    with pytest.raises(ConfigError, match="unknown argument '--task'"):  # a prefix is not a field
        _parse(["--out", "o", "--task", "a"])
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="a YAML mapping"):
        _parse(["--config", str(tmp_path / "list.yaml")])
    with pytest.raises(ConfigError, match="no such file"):
        _parse(["--config", str(tmp_path / "missing.yaml")])


def test_positional_words_and_identity_fields():
    cfg = _parse(["a.json", "b.json", "--out", "o"])
    assert cfg.inputs == [Path("a.json"), Path("b.json")]
    assert config.identity(cfg) == {"ratio": 0.5}
    assert config.jsonable(cfg)["out"] == "o" and config.jsonable(cfg)["inputs"] == ["a.json", "b.json"]


def test_help_lists_every_field_with_its_help(capsys):
    parser = timecatch.make_parser()
    with pytest.raises(SystemExit):
        config.parse(parser, ["--help"])
    text = capsys.readouterr().out
    for f in fields(timecatch.TimeCatchConfig):
        assert f"--{f.name}" in text, f.name
        assert f.metadata["help"].split()[0] in text
    assert "--no-descriptions" in text and "judgetrain build timecatch --config" in text


def test_build_yaml_matches_the_same_flags(tmp_path):
    yaml_file = tmp_path / "build.yaml"
    yaml_file.write_text("out: ds\nsynthetic: 5\nsplits: train=0.5,validation=0.5\nprompts: [A, B]\ninterval: ['1.0', 'mtl-aqa=2']\n")
    from_yaml, = config.parse(timecatch.make_parser(), ["--config", str(yaml_file)])
    from_flags, = config.parse(timecatch.make_parser(), ["--out", "ds", "--synthetic", "5", "--splits", "train=0.5,validation=0.5",
                                                         "--prompts", "A,B", "--interval", "1.0", "--interval", "mtl-aqa=2"])
    assert from_yaml == from_flags
    assert from_yaml.splits == {"train": 0.5, "validation": 0.5} and from_yaml.default_interval == 1.0
    assert from_yaml.intervals == {"mtl-aqa": 2.0} and from_yaml.interval_for("mtl-aqa") == 2.0


# --------------------------------------------------------------------------- hostile values (issue 35)


def _cli_error(capsys, argv) -> str:
    """`judgetrain ARGV` as a user runs it: exit status 2, one `error: …`, no traceback."""
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


def test_numbers_outside_their_declared_range_are_refused_all_at_once(tmp_path):
    """`arg(..., minimum=…)` and friends, and finiteness for every float field, checked as the
    flags and the file are parsed: every problem at once, each saying where it was set."""
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("out: o\nshare: 1.0\nweights: [0.5, 0.0]\n")
    with pytest.raises(ConfigError) as exc:
        _parse(["--config", str(yaml_file), "--ratio", "nan", "--count", "0"])
    assert sorted(exc.value.problems) == sorted([
        "ratio: nan is not a finite number; give a finite number (given as --ratio)",
        "count: 0 is below 1; give an integer of at least 1 (given as --count)",
        f"share: 1.0 must be below 1; give a number in [0, 1) ({yaml_file}, line 2)",
        f"weights: 0.0 is zero; give a number above 0 ({yaml_file}, line 3)",
    ])
    assert _parse(["--out", "o", "--limit", "inf", "--ratio=-1e300"]).limit == float("inf")  # declared allow_inf
    with pytest.raises(ConfigError, match=r"limit: nan is not a finite number"):
        _parse(["--out", "o", "--limit", "nan"])
    cfg = _parse(["--out", "o"])
    cfg.count, cfg.ratio = -3, float("inf")  # a config built in code: the same rules, by range_problems
    assert config.range_problems(cfg) == [
        "ratio: inf is not a finite number; give a finite number",
        "count: -3 is below 1; give an integer of at least 1",
    ]


@pytest.mark.parametrize("flag", ["--lpips_threshold", "--synthetic_long_fraction"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_number_fails_any_command_before_it_runs(flag, value, tmp_path, capsys):
    out = tmp_path / "ds"
    err = _cli_error(capsys, ["build", "timecatch", "--out", str(out), "--synthetic", "2", "--lpips-random-backbone",
                              "--no-progress", f"{flag}={value}"])
    assert f"{flag[2:]}: {value} is not a finite number; give " in err and f"(given as {flag})" in err
    assert not out.exists() and not Path(f"{out}.work").exists()


@pytest.mark.parametrize("line, shown, wanted", [
    ("out: [a, b]", "['a', 'b']", "a path"),
    ("synthetic: 2.7", "2.7", "an integer"),
    ("seed: .nan", "nan", "an integer"),
    ("synthetic: true", "True", "an integer"),
    ("descriptions: maybe", "'maybe'", "true or false"),
    ("prompts: {A: 1}", "{'A': 1}", "a string, or a list of them"),
])
def test_yaml_values_take_the_types_their_flags_take(line, shown, wanted, tmp_path, capsys):
    """TRL's YAML path sets argparse defaults, which argparse does not convert: a list for a
    path was a TypeError traceback, 2.7 clips and a NaN seed went on to build."""
    key = line.split(":")[0]
    base = [f"{k}: {v}" for k, v in (("out", tmp_path / "ds"), ("synthetic", 2), ("lpips_random_backbone", "true"))
            if k != key]
    path = tmp_path / "build.yaml"
    path.write_text("\n".join([*base, line]) + "\n")
    err = _cli_error(capsys, ["build", "timecatch", "--config", str(path), "--no-progress"])
    assert f"{path}, line {len(base) + 1}: {key}: {shown} is not {wanted}, as --{key} takes" in err
    assert not (tmp_path / "ds").exists()


def test_yaml_values_that_a_flag_would_give_are_taken_as_the_flag_gives_them(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("out: o\ncount: 3\nshare: 0\nweights: 2\nratio: '0.25'\ntasks: x,y\ndescriptions: no\n")
    cfg = _parse(["--config", str(path)])
    assert cfg == _parse(["--out", "o", "--count", "3", "--share", "0", "--weights", "2", "--ratio", "0.25",
                          "--tasks", "x,y", "--no-descriptions"])
    assert isinstance(cfg.share, float) and cfg.weights == [2.0] and cfg.out == Path("o")


def _bomb(levels: int, key: str) -> str:
    """A billion-laughs YAML: each level an anchored list of nine aliases of the level below."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines[:1] + lines[1:]) + f"\n{key}: *a{levels - 1}\n"


def test_a_yaml_alias_bomb_is_refused_in_a_short_message(tmp_path, capsys, monkeypatch):
    """A 311-byte config made a 39 MB error line (one level deeper, gigabytes): the loader
    measures what the aliases expand to without expanding them."""
    monkeypatch.chdir(tmp_path)
    text = _bomb(7, "tasks")
    body = "\n".join(f"  {line}" for line in text.splitlines()[:-1])  # the anchors under an env mapping, a valid key
    path = tmp_path / "bomb.yaml"
    path.write_text(f"out: ds\nenv:\n{body}\n{text.splitlines()[-1]}\n")
    assert len(path.read_bytes()) < 400
    err = _cli_error(capsys, ["build", "timecatch", "--config", str(path), "--lpips-random-backbone"])
    assert len(err) < 600 and f"{path}: its aliases (*name) expand to more than 1,000,000 values" in err
    path.write_text("tasks: &t [a, *t]\n")
    err = _cli_error(capsys, ["build", "timecatch", "--config", str(path), "--out", str(tmp_path / "ds")])
    assert f"{path}: line 1: an alias inside its own anchor makes an endless value" in err
    path.write_text("x: &x [a]\n" + "y: [" + ", ".join(["*x"] * 1001) + "]\n")
    with pytest.raises(yamlfile.YamlError, match=r"more than 1,000 aliases"):
        yamlfile.read_yaml(path)


def test_a_value_echoed_in_an_error_is_cut_short(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(f"out: {tmp_path / 'ds'}\n{'k' * 1000}: 1\nseed: [{', '.join(['123456789'] * 10_000)}]\n")
    err = _cli_error(capsys, ["build", "timecatch", "--config", str(path)])
    assert "unknown key 'kkkk" in err and "seed: [123456789, 123456789," in err and len(err) < 1_000


def test_a_key_given_twice_is_refused_naming_both_lines(tmp_path, capsys):
    """YAML keeps the last of two equal keys without a word; every --config (and recipe,
    search space, --enqueue list, accelerate config) is read by one loader that refuses it."""
    path = tmp_path / "build.yaml"
    path.write_text(f"out: {tmp_path / 'ds'}\nseed: 1\nsynthetic: 2\nseed: 2\n")
    err = _cli_error(capsys, ["build", "timecatch", "--config", str(path)])
    assert f"{path}: line 4: key 'seed' is given twice (first on line 2); keep one" in err
    path.write_text(f"out: {tmp_path / 'ds'}\nenv:\n  A: 1\n  B: 2\n  A: 3\n")
    assert "line 5: key 'A' is given twice (first on line 3)" in _cli_error(capsys, ["build", "timecatch", "--config", str(path)])
    # a merge (<<) brings keys in that the mapping may override: that is no repeat
    assert yamlfile.load_yaml("base: &b {x: 1, y: 2}\nmine:\n  <<: *b\n  x: 3\n", "t")["mine"] == {"x": 3, "y": 2}
    from judgetrain.sweep.space import SearchSpace

    space = tmp_path / "space.yaml"
    space.write_text("params:\n  learning_rate: {low: 1.0e-5, high: 1.0e-3}\n  learning_rate: {choices: [1]}\n")
    with pytest.raises(yamlfile.YamlError, match=r"line 3: key 'learning_rate' is given twice \(first on line 2\)"):
        SearchSpace.load(space)


@pytest.mark.parametrize("argv, problem", [
    (["quickstart", "--clips", "0"], "clips: 0 is below 1; give an integer of at least 1 (given as --clips)"),
    (["quickstart", "--eval-limit", "-1"], "eval_limit: -1 is negative; give an integer of at least 0 (given as --eval-limit)"),
    (["quickstart", "--seed", "-1"], "seed: -1 is negative; give an integer in [0, 4294967295] (given as --seed)"),
    (["build", "prism", "--out", "p", "--seed", "4294967296"], "seed: 4294967296 is above 4294967295"),
    (["build", "timecatch", "--out", "t", "--synthetic", "2", "--synthetic_long_fraction", "2"],
     "synthetic_long_fraction: 2.0 is above 1; give a number in [0, 1]"),
    (["sweep", "r.yaml", "--trials", "-1"], "trials: -1 is below 1; give an integer of at least 1"),
    (["sweep", "r.yaml", "--poll", "nan"], "poll: nan is not a finite number; give a number above 0"),
    (["sweep", "r.yaml", "--poll", "0"], "poll: 0.0 is zero; give a number above 0"),
    (["sweep", "r.yaml", "--retries", "-1"], "retries: -1 is negative; give an integer of at least 0"),
    (["sweep", "r.yaml", "--heartbeat", "0"], "heartbeat: 0 is below 1"),
    (["sweep", "r.yaml", "--startup_trials", "-2"], "startup_trials: -2 is negative"),
    (["dashboard", "x.db", "--port", "70000"], "port: 70000 is above 65535; give an integer in [1, 65535]"),
])
def test_every_command_refuses_a_number_out_of_range_before_it_runs(argv, problem, tmp_path, capsys, monkeypatch):
    """Fields that no command checked: a synthetic_long_fraction of 2 was a ValueError traceback
    from the generator, a negative seed, trial count or poll went on to run."""
    monkeypatch.chdir(tmp_path)
    err = _cli_error(capsys, argv)
    assert problem in err
    assert list(tmp_path.iterdir()) == []  # nothing started
