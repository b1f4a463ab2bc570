"""The typed config layer every command shares (judgetrain.config): YAML defaults, flags
win, unknown keys and flags fail with a suggestion, --help lists every field."""

from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from judgetrain import config
from judgetrain.config import ConfigError, arg
from judgetrain.data_builders import timecatch
from judgetrain.data_builders.core import WorkBuildArgs


@dataclass(kw_only=True)
class Toy(WorkBuildArgs):
    tasks: list[str] = arg(["a", "b"], "tasks")
    ratio: float = arg(0.5, "a ratio", identity=True)
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
