"""An evaluation given a data folder that does not exist names the builders whose folders it reads."""

from __future__ import annotations

import pytest

from judgetrain.cli import main as cli_main


@pytest.mark.parametrize(
    ("command", "builds", "other"),
    [
        ("judge", "judgetrain build prism --out", "build timecatch"),
        ("timecatch", "judgetrain build timecatch --out", "build prism"),
    ],
)
def test_missing_data_folder_names_the_builder_of_that_evaluation(command, builds, other, tmp_path, capsys):
    missing = tmp_path / "data" / "nope"
    assert cli_main(["eval", command, "--model", str(tmp_path / "m"), "--data", str(missing), "--out", str(tmp_path / "r")]) != 0
    err = capsys.readouterr().err
    assert f"{missing}: no such dataset folder" in err and f"`{builds} {missing}`" in err
    assert other not in err
    assert not (tmp_path / "r").exists()
