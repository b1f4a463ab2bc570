"""A study is one set of settings: the first controller records what defines it (recipe content,
search space, objectives, overrides), a later controller that asks for other settings is refused
before any trial, naming each difference, and a study of an older judgetrain is checked on what
it recorded. No training: the refusal comes before the first trial, and the study's trials here
are told complete at once."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from judgetrain import cli, config, sweep
from judgetrain.sweep.definition import DEFINITION

REPO = Path(__file__).resolve().parents[2]
TINY_RECIPE = REPO / "recipes" / "tiny" / "qwen3vl-prism-pairwise-lora.yaml"  # max_steps: 8
TINY_SPACE = REPO / "recipes" / "spaces" / "tiny.yaml"


def storage_url(tmp_path: Path, kind: str) -> str:
    return f"journal:{tmp_path / 's.journal'}" if kind == "journal" else f"sqlite:///{tmp_path / 's.db'}"


def argv(storage: str, out: Path, *extra: str, recipe: Path = TINY_RECIPE, space: Path = TINY_SPACE) -> list[str]:
    return [str(recipe), "--space", str(space), "--storage", storage, "--study", "s", "--objective", "eval_loss",
            "--out", str(out), *extra]


def parse(args: list[str]) -> sweep.SweepConfig:
    (cfg,) = config.parse(sweep.make_parser(), args)
    return cfg


def load(storage: str, name: str = "s") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=sweep.storage_from_url(storage, heartbeat_interval=None))


def complete_two_trials(study: optuna.Study, cfg: sweep.SweepConfig) -> None:
    """Two trials as the first controller samples them, told complete (no training)."""
    for value in (0.5, 0.25):
        trial = study.ask()
        cfg.search_space.suggest(trial)
        study.tell(trial, value)


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_controller_of_other_settings_is_refused_naming_each_difference(tmp_path, kind, capsys):
    storage = storage_url(tmp_path, kind)
    first = parse(argv(storage, tmp_path / "trials", "--trials", "2"))
    complete_two_trials(sweep.open_study(first), first)  # the first controller's 8-step study, full
    recorded = load(storage).user_attrs[DEFINITION]
    assert recorded["objectives"] == [["eval_loss", "minimize"]] and recorded["overrides"] == {}
    # the same settings again (a restarted controller, another machine): joined; the study is full, nothing runs
    assert cli.main(["sweep", *argv(storage, tmp_path / "trials", "--trials", "2")]) == 0
    capsys.readouterr()
    # once accepted: its 2-step trials were added and pruned against the 8-step ones
    space = tmp_path / "space.yaml"
    space.write_text(TINY_SPACE.read_text().replace("lora_r: {choices: [4, 8]}", "lora_r: {choices: [4, 8, 16]}"))
    assert cli.main(["sweep", *argv(storage, tmp_path / "other", "--trials", "4", "--max-steps", "2", space=space)]) == 2
    err = capsys.readouterr().err
    assert err.endswith(
        f"error: study 's' in {storage} was made with other settings, and trials of both would be compared (and pruned) "
        "as one study:\n"
        "  - overrides.--max_steps: (none) → 2\n"
        "  - space.params.lora_r.choices: [4, 8] → [4, 8, 16]\n"
        "Run with the study's settings to add trials to it, or name a new study: --study s-2\n")
    study = load(storage)
    assert len(study.trials) == 2 and study.user_attrs[DEFINITION] == recorded  # the study as it was
    assert not (tmp_path / "other").exists()  # nothing written for the refused controller
    # other recipe text, another objective of the same direction
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(TINY_RECIPE.read_text().replace("max_steps: 8", "max_steps: 4"))
    with pytest.raises(sweep.SweepError) as exc:
        sweep.open_study(parse(argv(storage, tmp_path / "t", "--objective", "judge:PRISM-Temporal/loss",
                                    "--direction", "minimize", recipe=recipe)))
    assert "  - objectives: [[\"eval_loss\", \"minimize\"]] → [[\"judge:PRISM-Temporal/loss\", \"minimize\"]]\n" in str(exc.value)
    assert f"  - recipe_sha256: {recorded['recipe_sha256'][:12]}… → " in str(exc.value)
    # a new study for the new settings: accepted, with its own record
    new = parse([*argv(storage, tmp_path / "new", "--max_steps", "2", space=space), "--study", "s-2"])
    assert sweep.open_study(new).user_attrs[DEFINITION]["overrides"] == {"--max_steps": "2"}


def test_overrides_are_compared_by_field_whatever_their_spelling():
    from judgetrain.sweep.definition import overrides_by_field

    assert overrides_by_field(["--max-steps", "2", "--report_to", "none", "--max_steps=4"]) == \
        {"--max_steps": "4", "--report_to": "none"}  # the last one of a field wins, as on the trainer's command line
    assert overrides_by_field(["--datasets", "a", "b", "--bf16"]) == {"--bf16": "", "--datasets": "a b"}


def test_a_study_of_an_older_judgetrain_is_checked_on_what_it_recorded(tmp_path, capsys):
    storage = storage_url(tmp_path, "journal")
    cfg = parse(argv(storage, tmp_path / "t", "--max_steps", "4"))
    # what open_study recorded before studies had a definition
    study = optuna.create_study(study_name="s", storage=sweep.storage_from_url(storage), direction="minimize")
    for key, value in {"recipe": str(TINY_RECIPE), "recipe_yaml": TINY_RECIPE.read_text(), "space": str(TINY_SPACE),
                       "objectives": [["eval_loss", "minimize"]], "fixed": {}, "extra": ["--max_steps", "4"]}.items():
        study.set_user_attr(key, value)
    with pytest.raises(sweep.SweepError, match=r"  - overrides.--max_steps: 4 → 2\n"):
        sweep.open_study(parse(argv(storage, tmp_path / "t", "--max_steps", "2")))
    assert DEFINITION not in load(storage).user_attrs  # a refused controller records nothing
    capsys.readouterr()
    sweep.open_study(cfg)  # what it recorded matches: joined, and its space recorded from now on
    assert "was made before studies recorded their search space" in capsys.readouterr().err
    assert load(storage).user_attrs[DEFINITION] == sweep.study_definition(cfg)
    space = tmp_path / "space.yaml"
    space.write_text(TINY_SPACE.read_text().replace("high: 1.0e-2", "high: 1.0e-1"))
    with pytest.raises(sweep.SweepError, match=r"  - space.params.learning_rate.high: 0.01 → 0.1\n"):
        sweep.open_study(parse(argv(storage, tmp_path / "t", "--max_steps", "4", space=space)))


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_two_new_controllers_at_once_cannot_both_define_the_study(tmp_path, kind):
    """The study lock orders them: while the test holds it, a second controller (other settings)
    waits to read the study; the first records its definition meanwhile, so the second is refused."""
    import threading

    from judgetrain.sweep.definition import check_definition

    storage = storage_url(tmp_path, kind)
    first, second = parse(argv(storage, tmp_path / "a")), parse(argv(storage, tmp_path / "b", "--max_steps", "2"))
    study = optuna.create_study(study_name="s", storage=sweep.storage_from_url(storage, heartbeat_interval=None))
    outcome: list = []

    def open_second() -> None:
        try:
            outcome.append(sweep.open_study(second))
        except sweep.SweepError as e:
            outcome.append(e)

    with sweep.study_lock(storage):
        opener = threading.Thread(target=open_second)
        opener.start()
        check_definition(study, first)  # the first controller, inside the lock the second waits for
    opener.join()
    (got,) = outcome
    assert isinstance(got, sweep.SweepError) and "  - overrides.--max_steps: (none) → 2\n" in str(got)
    assert load(storage).user_attrs[DEFINITION] == sweep.study_definition(first)
