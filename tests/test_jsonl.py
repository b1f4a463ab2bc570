"""The one JSON Lines reader (judgetrain.jsonl): bytes, split on \\n only, each line decoded
on its own, every bad line located and the rest read."""

import json

import pytest

from judgetrain.jsonl import inside, optional_text, parse_json, read_jsonl, text


def test_lines_are_numbered_and_bad_ones_located(tmp_path):
    path = tmp_path / "m.jsonl"
    good = json.dumps({"id": "a", "text": "one\u2028two\u0085three"}, ensure_ascii=False).encode()
    crlf = json.dumps({"id": "c"}).encode() + b"\r"
    lines = [good, b"", b'{"id": "b", "x": "\xff\xfe"}', b"[1, 2]", b'{"id": ', crlf, json.dumps({"id": "d"}).encode()]
    path.write_bytes(b"\n".join(lines) + b"\n")
    got = list(read_jsonl(path))
    assert [g.line for g in got] == [1, 3, 4, 5, 6, 7]  # the blank line 2 is not a row; U+2028/U+0085 split nothing
    assert got[0].row == {"id": "a", "text": "one\u2028two\u0085three"} and got[0].problem is None
    offset = len(good) + 1 + 1 + len(b'{"id": "b", "x": "')
    assert got[1].row is None and got[1].problem.startswith(f"not valid UTF-8 at byte {offset};")
    assert str(got[1]).startswith(f"{path}:3: not valid UTF-8 at byte {offset}")
    assert got[2].problem.startswith("not a JSON object (an array)")
    assert got[3].problem.startswith("not JSON (")
    assert got[4].row == {"id": "c"} and got[5].row == {"id": "d"}


def test_field_checks_name_the_field_and_the_fix():
    assert text({"id": 7}, "id", "a name", ids=True) == "7"
    assert text({}, "id", "a name", default="v.mp4") == "v.mp4"
    with pytest.raises(ValueError, match=r"^source: missing; name it$"):
        text({"source": None}, "source", "name it")
    with pytest.raises(ValueError, match=r"^category: a number, not a string; "):
        text({"category": 3}, "category", "e.g. pizza")
    with pytest.raises(ValueError, match="^id: a boolean, not a string"):
        text({"id": True}, "id", "a name", ids=True)
    assert optional_text({"description": None}, "description", "") == ""
    with pytest.raises(ValueError, match="^description: an array, not a string"):
        optional_text({"description": ["x"]}, "description", "a sentence")


def test_numbers_and_nesting_json_cannot_hold_are_located_lines_not_exceptions(tmp_path):
    # json.loads raises ValueError (int() digit limit) and RecursionError here, not JSONDecodeError
    path = tmp_path / "m.jsonl"
    lines = [b'{"id": "a"}', b'{"id": "big", "n": ' + b"1" * 4301 + b"}", b'{"id": "deep", "x": ' + b"[" * 100_000 + b"]" * 100_000
             + b"}", b'{"id": "b"}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    got = list(read_jsonl(path))
    assert [(g.line, g.row) for g in got] == [(1, {"id": "a"}), (2, None), (3, None), (4, {"id": "b"})]
    assert got[1].problem == "not JSON this reader can take: a number of more than 4300 digits; write it as a string"
    assert got[2].problem.startswith("not JSON this reader can take: arrays or objects nested more than about ")
    assert got[2].problem.endswith(" levels deep; flatten the nesting")


def test_parse_json_says_what_is_wrong_and_the_fix():
    assert parse_json('{"a": [1, 2]}') == (None, {"a": [1, 2]})
    assert parse_json('{"a": \n 1,}', "fix the file") == ("not JSON (Expecting property name enclosed in double quotes "
                                                          "at line 2 column 4); fix the file", None)
    assert parse_json("9" * 5000)[0].endswith("digits; write it as a string")


def test_a_nul_byte_in_a_path_is_named_with_the_fix(tmp_path):
    with pytest.raises(ValueError) as exc:
        inside(tmp_path, "a\x00b.mp4", "video")
    assert str(exc.value) == "video: 'a\\x00b.mp4' holds a NUL byte (\\x00), which no file path can; fix the path"


LOOP_FIX = "a symbolic link on the way loops or cannot be read; fix or remove the link, or drop the line"


@pytest.fixture
def looped(tmp_path):
    """A manifest folder with a link loop ``a -> b -> a`` and one manifest per reader whose one line names ``a``."""
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "a").symlink_to(tmp_path / "b")
    rows = {
        "frames": {"id": "x", "frames": ["a/0.png", "a/1.png", "a/2.png", "a/3.png"], "source": "s"},
        "procedures": {"id": "x", "category": "c", "steps": [{"text": f"s{k}", "image": "a"} for k in range(4)]},
        "mcq": {"id": "x", "video": "a", "question": "q", "options": ["a", "b"], "answer": 0, "benchmark": "b"},
    }
    for name, row in rows.items():
        (tmp_path / f"{name}.jsonl").write_text(json.dumps(row) + "\n")
    return tmp_path


def test_a_symlink_loop_is_a_located_problem_not_an_exception(looped):
    for rel in ("a", "a/0.png"):
        with pytest.raises(ValueError) as exc:
            inside(looped, rel, "video")
        message = str(exc.value)
        assert message.startswith(f"video: {rel!r} cannot be resolved (") and message.endswith(LOOP_FIX)
        assert str(looped / rel) in message  # the full path the loop starts from


@pytest.mark.parametrize("argv", [
    ["build", "timecatch", "--frames", "{root}/frames.jsonl", "--lpips-random-backbone", "--strict", "--no-progress"],
    ["build", "prism", "--procedures", "{root}/procedures.jsonl", "--strict", "--no-progress"],
    ["eval", "phasefusion", "--model", "{root}/no-model", "--manifest", "{root}/mcq.jsonl"],
])
def test_every_manifest_reader_names_a_link_loop_by_manifest_and_line(looped, argv, capsys):
    from judgetrain.cli import main as cli

    manifest = next(a for a in argv if a.endswith(".jsonl")).format(root=looped)
    argv = [a.format(root=looped) for a in argv]
    assert cli([*argv, "--out", str(looped / "out")]) == 2  # no model loads: the manifest is read first
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: " in err
    located = [line for line in err.splitlines() if f"{manifest}:1: " in line]
    assert located and LOOP_FIX in located[0] and str(looped / "a") in located[0], err
