"""Rationale distillation: the real google-genai SDK against a local Gemini stand-in
(faults, retries, cache, kill and resume, rate limit, key hygiene), the local and
replay teachers, the SFT records (prompts, completions, labels, meta, statistics)
and that the training entrypoint takes them unchanged."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics as stats_lib
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from judgetrain import config, records
from judgetrain.cli import main as cli
from judgetrain.data_builders import mirage, prism, rationales
from judgetrain.data_builders.core import BuildError
from judgetrain.scoring import choice_letter, likert_1_5, parser_for_record

sys.path.insert(0, str(Path(__file__).parent))
from fake_gemini import FakeGemini, inline_images  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
KEY = "AIzaTEST-never-written-7c1e5b"
TAG = re.compile(r"^\[([0-9a-f]{16})\] ")


@pytest.fixture(scope="module")
def prism_data(tmp_path_factory):
    """18 PRISM records: 3 synthetic procedures, one shuffle negative each, layouts P0 and P6, both modes."""
    out = tmp_path_factory.mktemp("prism") / "ds"
    prism.build(prism.PrismConfig(out=out, synthetic=3, layouts=("P0", "P6"), perturbations=("shuffle",), synthetic_size=64,
                                  progress=False))
    return out


@pytest.fixture
def gemini_env(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GEMINI_BASE_URL", raising=False)


def gemini_cfg(data, out, url, **kw):
    base = dict(data=data, out=out, teacher="gemini", base_url=url, timeout=0.6, attempts=3, retry_delay=0.01, rpm=60000,
                workers=2, progress=False)
    return rationales.RationaleConfig(**{**base, **kw})


def all_rows(path):
    ds = records.load(path, verify=True)
    return {row["id"]: (split, row) for split in ds for row in ds[split]}


def text_of(row):
    return row["completion"][0]["content"][0]["text"]


def files_under(*roots):
    return [p for root in roots for p in Path(root).rglob("*") if p.is_file()]


# --------------------------------------------------------------------------- Gemini through the real SDK


def test_gemini_faults_are_retried_counted_and_never_invented(prism_data, tmp_path, gemini_env, capsys, caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    src = all_rows(prism_data)
    n = len(src)
    input_files = sorted(files_under(prism_data))
    # per distinct content, in order of first arrival: the outcomes of its attempts (then "ok")
    script = [["429"], ["500", "500"], ["timeout"], ["malformed"], ["schema"], ["429", "429", "429"]]
    with FakeGemini(KEY, script=script, hold=1.2) as fake:
        out = tmp_path / "out"
        infos = rationales.build(gemini_cfg(prism_data, out, fake.url))
        first_calls = list(fake.calls)

        assert len(fake.bodies) == n  # every record's prompt is distinct, so one content per record
        assert fake.outcomes() == Counter(ok=n - 3, **{"429": 4, "500": 2, "timeout": 1, "malformed": 1, "schema": 1})
        assert set(fake.successes().values()) == {1}  # nothing answered twice
        timed_out = next(c.digest for c in first_calls if c.outcome == "timeout")
        assert fake.successes()[timed_out] == 1  # a timeout is retried by the SDK

        info = infos["with_rationale"]
        c = info["counts"]["teacher"]
        assert (c["asked"], c["answered"], c["failed"], c["calls"], c["cache_hits"]) == (n, n - 3, 3, n, 0)
        assert c["http_requests"] == len(first_calls)  # the client's request hook saw every attempt the server saw
        assert c["tokens"]["thoughts_token_count"] == 100 * (n - 3)
        reasons = sorted(f["reason"] for f in info["failures"])
        assert re.match(r"HTTP 429 RESOURCE_EXHAUSTED: You exceeded your current quota.* \(after 3 attempt\(s\)\)$", reasons[0])
        assert reasons[1].startswith("malformed response body: JSONDecodeError")
        assert reasons[2] == "the answer lacks ['answer']"
        assert info["failures"] == infos["score_only"]["failures"]
        failed = {f["id"] for f in info["failures"]}

        answered = fake.answered()
        for variant in rationales.VARIANTS:
            rows = all_rows(out / variant)
            assert set(rows) == set(src) - failed  # the failures are left out, nothing stands in for them
            for rid, (split, row) in rows.items():
                meta = json.loads(row["meta"])
                call = answered[next(d for d in answered if d.startswith(TAG.match(meta["teacher_rationale"]).group(1)))]
                assert (meta["teacher_rationale"], meta["teacher_answer"]) == (call.rationale, call.answer)
                assert row["label"] == call.answer and meta["target"] == "teacher" and meta["sft_variant"] == variant
                assert meta["gold_label"] == src[rid][1]["label"] and meta["teacher"] == "gemini:gemini-2.5-flash"
                assert split == src[rid][0] and row["images"] == src[rid][1]["images"]
                expected = f"{call.rationale}\nAnswer: {call.answer}" if variant == "with_rationale" else call.answer
                assert text_of(row) == expected
                assert parser_for_record(row)(text_of(row)) == row["label"]

        # the request as the SDK sent it: JSON schema with the record's choices, images inline, reasoning-first text
        rid, (split, row) = next(iter(all_rows(out / "with_rationale").items()))
        digest = next(d for d in answered if d.startswith(TAG.match(json.loads(row["meta"])["teacher_rationale"]).group(1)))
        body = fake.bodies[digest]
        gen = body["generationConfig"]
        assert gen["responseMimeType"] == "application/json"
        assert gen["responseSchema"]["properties"]["answer"]["enum"] == row["choices"]
        # the SDK writes the field in proto's snake_case, which the API's JSON parser accepts as well as camelCase
        schema = gen["responseSchema"]
        assert schema.get("propertyOrdering", schema.get("property_ordering")) == ["rationale", "answer"]
        stored = records.load(prism_data)[split]
        stored = stored.with_format("arrow")[stored["id"].index(rid)].to_pylist()[0]
        inline = inline_images(body)
        assert [data for _, data in inline] == [im["bytes"] for im in stored["images"]]  # byte for byte
        assert len(inline) == len(src[rid][1]["images"]) > 0 and {mime for mime, _ in inline} == {"image/png"}
        sent = "".join(p.get("text", "") for p in body["contents"][0]["parts"])
        assert rationales.REASON_FIRST[row["task"]] in sent and rationales.JSON_FIELDS[row["task"]] in sent
        assert rationales.COMMIT not in sent

        # rerun: only the three failures are asked again; everything finished comes from the cache
        infos2 = rationales.build(gemini_cfg(prism_data, out, fake.url))
        again = fake.calls[len(first_calls):]
        assert len(again) == 3 and {x.outcome for x in again} == {"ok"}
        assert set(fake.successes().values()) == {1}
        c2 = infos2["with_rationale"]["counts"]["teacher"]
        assert (c2["answered"], c2["failed"], c2["cache_hits"], c2["calls"]) == (n, 0, n - 3, 3)
        assert len(all_rows(out / "with_rationale")) == n

        # and once more: nothing left to ask or to retry, so nothing to do (the build of the second run, unchanged)
        before = len(fake.calls)
        infos3 = rationales.build(gemini_cfg(prism_data, out, fake.url))
        assert len(fake.calls) == before and infos3 == infos2
        for variant in rationales.VARIANTS:
            assert infos3[variant]["splits"] == infos2[variant]["splits"]

    # the export replays into byte-identical records, with no teacher at all
    export = out / rationales.EXPORT_FILE
    replayed = rationales.build(rationales.RationaleConfig(data=prism_data, out=tmp_path / "replayed", teacher="replay",
                                                           replay=export, progress=False))
    for variant in rationales.VARIANTS:
        assert replayed[variant]["splits"] == infos3[variant]["splits"]
    assert (tmp_path / "replayed" / rationales.EXPORT_FILE).read_bytes() == export.read_bytes()

    assert sorted(files_under(prism_data)) == input_files  # nothing written into the input dataset
    printed = capsys.readouterr()
    for p in files_under(out):
        assert KEY.encode() not in p.read_bytes(), p
    assert KEY not in printed.out + printed.err and KEY not in caplog.text


def test_rate_limit_spaces_every_request_retries_included(prism_data, tmp_path, gemini_env):
    out = tmp_path / "out"
    with FakeGemini(KEY, script=[["429"]]) as fake:
        infos = rationales.build(gemini_cfg(prism_data, out, fake.url, rpm=300, workers=3, limit=4, splits=("validation",),
                                            model="gemini-2.5-pro", cache=tmp_path / "shared-cache"))
    arrivals = sorted(c.t for c in fake.calls)
    assert len(arrivals) == 5  # 4 records, one retried after a 429
    # one request per 0.2 s even with three threads (unlimited, these five take milliseconds); measured on
    # arrival at the server, whose thread start-up jitters single gaps under load, so over the whole span
    assert arrivals[-1] - arrivals[0] >= 4 * 60 / 300 - 0.05, arrivals
    assert {c.model for c in fake.calls} == {"gemini-2.5-pro"}
    assert infos["score_only"]["counts"]["records"] == {"validation": 4}
    assert {json.loads(row["meta"])["teacher"] for _, row in all_rows(out / "score_only").values()} == {"gemini:gemini-2.5-pro"}
    assert len(list((tmp_path / "shared-cache").rglob("*.json"))) == 4 and not (out / "cache").exists()


def test_a_killed_run_resumes_without_repeating_finished_calls(prism_data, tmp_path, gemini_env, monkeypatch):
    n = len(all_rows(prism_data))
    out = tmp_path / "killed"
    env = {**os.environ, "GEMINI_API_KEY": KEY, "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    env.pop("GOOGLE_API_KEY", None)
    with FakeGemini(KEY, delay=0.25) as fake:
        env["GOOGLE_GEMINI_BASE_URL"] = fake.url  # the SDK's own variable, as a proxy user would set it
        # the builder's own entry point, without the start-up cost of every other command of the CLI
        entry = ("import sys; from judgetrain import config; from judgetrain.data_builders import rationales as r; "
                 "sys.exit(r.main(*config.parse(r.make_parser(), sys.argv[1:])))")
        cmd = [sys.executable, "-c", entry, "--data", str(prism_data), "--out", str(out), "--teacher", "gemini",
               "--workers", "1", "--rpm", "60000", "--no-progress"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while len(list((out / "cache").rglob("*.json"))) < 4:
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the build made no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cached = len(list((out / "cache").rglob("*.json")))
        assert 4 <= cached < n and not (out / "with_rationale").exists()
        assert not list((out / "cache").rglob("*.tmp"))
        before = len(fake.calls)

        fake.delay = 0.0
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
        resumed = rationales.build(gemini_cfg(prism_data, out, None, workers=1))
        asked_again = fake.calls[before:]
        assert len(asked_again) == n - cached  # exactly the answers that had not reached the cache
        assert resumed["with_rationale"]["counts"]["teacher"]["cache_hits"] == cached
        # at most the one call in flight at the kill was answered twice (its answer never reached disk)
        assert sum(v - 1 for v in fake.successes().values()) <= 1

        fresh = rationales.build(gemini_cfg(prism_data, tmp_path / "uninterrupted", fake.url))
    for variant in rationales.VARIANTS:
        assert resumed[variant]["splits"] == fresh[variant]["splits"]  # same content hashes as an uninterrupted run


def test_a_rejected_key_stops_the_build_and_a_missing_one_says_where_to_put_it(prism_data, tmp_path, monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(BuildError, match="Set GEMINI_API_KEY"):
        rationales.build(gemini_cfg(prism_data, tmp_path / "a", "http://127.0.0.1:9"))
    monkeypatch.setenv("GEMINI_API_KEY", "wrong-key")
    with FakeGemini(KEY) as fake:
        with pytest.raises(BuildError, match=r"Gemini refused the request \(HTTP 400 INVALID_ARGUMENT: API key not valid"):
            rationales.build(gemini_cfg(prism_data, tmp_path / "b", fake.url, workers=1))
    assert len(fake.calls) <= 2  # stopped at once, not one failure per record


# --------------------------------------------------------------------------- records, prompts, statistics (replay)


def write_replay(path, lines):
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_prompts_ask_for_the_reasoning_first_and_keep_everything_else():
    for builder, tasks in rationales.BASE_INSTRUCTIONS.items():
        for task, base in tasks.items():
            for layout in ("P0", "P6"):
                text = rationales.teacher_instruction(builder, task, layout, rationales.ANSWER_LINE[task])
                head = base[: base.index(rationales.COMMIT)]
                assert text.startswith(head + rationales.REASON_FIRST[task] + " " + rationales.ANSWER_LINE[task])
                assert rationales.COMMIT not in text
                assert text.endswith(prism.GRID_NOTE[task]) == (layout == "P6")
    prompt = [{"role": "user", "content": [{"type": "text", "text": "Task: x"}, {"type": "image", "text": None},
                                           {"type": "text", "text": "Sequence A:\n\n" + prism.instruction_for("pairwise", "P6")}]}]
    new = rationales.rewrite_prompt(prompt, builder="prism", task="pairwise", layout="P6", closing="CLOSE.", rid="r")
    assert new[0]["content"][:2] == prompt[0]["content"][:2]
    assert new[0]["content"][2]["text"] == "Sequence A:\n\n" + rationales.teacher_instruction("prism", "pairwise", "P6", "CLOSE.")
    with pytest.raises(BuildError, match="record 'r': its prompt does not end with the mirage pairwise instruction"):
        rationales.rewrite_prompt(prompt, builder="mirage", task="pairwise", layout="P6", closing="", rid="r")


@pytest.mark.parametrize("text, parser, expected", [
    ("Step 1 shows the dough.\nStep 2 is out of place.\nAnswer: B", choice_letter("AB"), ("Step 1 shows the dough.\nStep 2 is out of place.", "B")),
    ("The order is broken at step 3.\nAnswer: 3\n", likert_1_5(), ("The order is broken at step 3.", "3")),
    ("Answer: A", choice_letter("AB"), "no rationale before the answer line"),
    ("All fine. Answer: A", choice_letter("AB"), "no rationale before the answer line"),
    ("Answer: A\nbecause the steps match", choice_letter("AB"), "the answer 'A' is not alone on the last line"),
    ("Looks coherent.\nAnswer: 7", likert_1_5(), "no parseable answer in the generated text"),
    ("swap red belong", choice_letter("AB"), "no parseable answer in the generated text"),
])
def test_split_answer(text, parser, expected):
    assert rationales.split_answer(text, parser) == expected


def test_replay_statistics_targets_and_the_binary_collapse(prism_data, tmp_path, capsys):
    src = all_rows(prism_data)
    ids = sorted(src)
    point = [r for r in ids if src[r][1]["task"] == "pointwise"]
    pair = [r for r in ids if src[r][1]["task"] == "pairwise"]
    assert len(point) == 12 and len(pair) == 6
    # eleven of twelve pointwise scores in {1, 2}, the paper's collapse; rationale k has k + 2 words
    scores = dict(zip(point, ["1"] * 7 + ["2"] * 4 + ["5"]))
    letters = {r: ("A" if k % 3 else "B") for k, r in enumerate(pair)}
    answer = {**scores, **letters}
    rationale = {r: " ".join(["word"] * (k + 2)) for k, r in enumerate(ids)}
    missing = ids[-1]
    lines = [{"id": r, "rationale": rationale[r], "answer": answer[r], "teacher": "gemini", "model": "gemini-2.5-flash"}
             for r in ids if r != missing]
    replay = write_replay(tmp_path / "given.jsonl", lines)

    (cfg,) = config.parse(rationales.make_parser(), ["--data", str(prism_data), "--out", str(tmp_path / "t"), "--teacher", "replay",
                                                     "--replay", str(replay), "--no-progress"])
    assert rationales.main(cfg) == 0
    printed = capsys.readouterr().out
    point_ans = [answer[r] for r in ids if r in scores and r != missing]
    assert "(Table S6)" in printed
    assert f"pointwise: teacher scores in {{1,2}}: {100 * sum(a in '12' for a in point_ans) / len(point_ans):.1f}%" in printed
    assert f"Dataset written to {tmp_path / 't' / 'with_rationale'}" in printed
    info = records.read_build_info(tmp_path / "t" / "with_rationale")
    assert info["failures"] == [{"id": missing, "split": src[missing][0], "reason": f"no line for this id in {replay}"}]
    # --strict: the same failure stops the build instead, naming the record, and writes no dataset
    (strict,) = config.parse(rationales.make_parser(), ["--data", str(prism_data), "--out", str(tmp_path / "s"), "--teacher",
                                                        "replay", "--replay", str(replay), "--no-progress", "--strict"])
    with pytest.raises(BuildError, match=f"--strict: 1 record\\(s\\) got no usable teacher answer \\(first: {missing}: no line"):
        rationales.main(strict)
    assert not (tmp_path / "s" / "with_rationale").exists()

    answered = [r for r in ids if r != missing]
    st = info["statistics"]
    point_ans = [answer[r] for r in answered if r in scores]
    assert st["teacher_answers"]["pointwise"]["share_1_2"] == pytest.approx(sum(a in "12" for a in point_ans) / len(point_ans))
    assert st["teacher_answers"]["pointwise"]["teacher"] == {c: point_ans.count(c) for c in "12345"}
    from sklearn.metrics import accuracy_score

    assert st["teacher_answers"]["pairwise"]["agreement_with_gold"] == pytest.approx(
        accuracy_score([src[r][1]["label"] for r in pair], [letters[r] for r in pair]))
    for task in ("pairwise", "pointwise"):
        for layout in ("P0", "P6"):
            asked = [r for r in ids if src[r][1]["task"] == task and src[r][1]["layout"] == layout]
            words = [k + 2 for k, r in enumerate(ids) if r in asked and r != missing]
            s = st["rationale_length"][task][layout]
            assert (s["asked"], s["answered"]) == (len(asked), len(words))
            assert s["success_rate"] == pytest.approx(len(words) / len(asked))
            assert s["words_mean"] == pytest.approx(stats_lib.mean(words)) and s["words_std"] == pytest.approx(stats_lib.stdev(words))
            assert s["chars_mean"] == pytest.approx(stats_lib.mean(5 * w - 1 for w in words))

    # --target teacher: every answered record, labelled with the teacher's answer
    rows = all_rows(tmp_path / "t" / "score_only")
    assert {r: row["label"] for r, (_, row) in rows.items()} == {r: answer[r] for r in answered}
    # --target gold: the gold label, and the records where the teacher disagrees are left out
    infos = rationales.build(rationales.RationaleConfig(data=prism_data, out=tmp_path / "g", teacher="replay", replay=replay,
                                                        target="gold", progress=False))
    agree = {r for r in answered if answer[r] == src[r][1]["label"]}
    for variant in rationales.VARIANTS:
        rows = all_rows(tmp_path / "g" / variant)
        assert set(rows) == agree
        assert all(row["label"] == src[r][1]["label"] == json.loads(row["meta"])["teacher_answer"] for r, (_, row) in rows.items())
        assert all(parser_for_record(row)(text_of(row)) == row["label"] for _, row in rows.values())
    assert {s["id"] for s in infos["with_rationale"]["skipped"]} == set(answered) - agree
    assert (tmp_path / "t" / rationales.PLOT_FILE).stat().st_size > 0


def test_bad_replay_lines_are_errors_naming_file_and_line(prism_data, tmp_path):
    src = all_rows(prism_data)
    pair = next(r for r in sorted(src) if src[r][1]["task"] == "pairwise")
    point = next(r for r in sorted(src) if src[r][1]["task"] == "pointwise")
    replay = write_replay(tmp_path / "bad.jsonl", [
        {"id": pair, "rationale": "fine", "answer": "A"},
        "{not json",
        {"id": "prism-unknown", "rationale": "x", "answer": "A"},
        {"id": pair, "rationale": "again", "answer": "B"},
        {"id": point, "rationale": "x", "answer": 3},
        {"id": point, "rationale": "  ", "answer": "3"},
        ["a list"],
    ])
    # --strict: every bad line, file:line each, and no dataset (without --strict these lines are
    # now skipped and counted, as in every other builder: see the next test)
    with pytest.raises(BuildError) as exc:
        rationales.build(rationales.RationaleConfig(data=prism_data, out=tmp_path / "o", teacher="replay", replay=replay,
                                                    strict=True, progress=False))
    text = str(exc.value)
    assert "6 bad line(s)" in text
    assert f"{replay}:2: not JSON" in text
    assert f"{replay}:3: id 'prism-unknown' is not a record of the --data dataset" in text
    assert f"{replay}:4: id {pair!r} already given on line 1" in text
    assert f"{replay}:5: answer 3 is not one of the choices ['1', '2', '3', '4', '5'] (give it as a string)" in text
    assert f"{replay}:7: not a JSON object (an array)" in text  # was "expected an object": the shared reader's wording
    assert not (tmp_path / "o" / "with_rationale").exists()
    # without --strict: the good line is used, the bad ones are listed under skipped, the record of line 5 is a failure
    infos = rationales.build(rationales.RationaleConfig(data=prism_data, out=tmp_path / "o", teacher="replay", replay=replay,
                                                        progress=False))
    info = infos["with_rationale"]
    assert [(s["line"], s["id"]) for s in info["skipped"]] == [(2, None), (3, "prism-unknown"), (4, pair), (5, point), (6, point),
                                                              (7, None)]
    assert {s["path"] for s in info["skipped"]} == {str(replay)} and info["counts"]["teacher"]["bad_lines"] == 6
    failures = {f["id"]: f["reason"] for f in info["failures"]}
    assert failures[point].startswith(f"its line {replay}:5 is bad: answer 3 is not one of the choices")
    assert pair not in failures and set(all_rows(tmp_path / "o" / "with_rationale")) == {pair}


def test_replay_bytes_and_field_types_are_located_not_fatal(prism_data, tmp_path, capsys):
    """The replay teacher as a user runs it, on a file with a bad byte, a non-object row and a
    mistyped teacher among good lines (U+2028 / U+0085 inside rationales, a null model)."""
    src = all_rows(prism_data)
    ids = sorted(src)
    pair = [r for r in ids if src[r][1]["task"] == "pairwise"]
    point = [r for r in ids if src[r][1]["task"] == "pointwise"]

    def good(r, k):
        return {"id": r, "rationale": f"Step\u2028one\u0085fits ({k}).", "answer": "A" if r in pair else "2",
                "teacher": "gemini", "model": None}

    lines = [json.dumps(good(pair[0], 0), ensure_ascii=False).encode(),                                     # 1
             b'{"id": "%s", "rationale": "caf\xe9", "answer": "A"}' % pair[1].encode(),                    # 2 not UTF-8
             b"42",                                                                                          # 3 not an object
             json.dumps(good(point[0], 3) | {"teacher": 7}).encode(),                                        # 4 teacher an int
             json.dumps(good(point[1], 4), ensure_ascii=False).encode()]                                     # 5
    replay = tmp_path / "replay.jsonl"
    replay.write_bytes(b"\n".join(lines) + b"\n")
    argv = ["build", "rationales", "--data", str(prism_data), "--teacher", "replay", "--replay", str(replay), "--no-progress"]
    assert cli([*argv, "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    info = json.loads((tmp_path / "o" / "with_rationale" / "build.json").read_text())
    skipped = {s["line"]: s for s in info["skipped"] if "line" in s}
    assert sorted(skipped) == [2, 3, 4] and {s["path"] for s in skipped.values()} == {str(replay)}
    assert skipped[2]["reason"].startswith("not valid UTF-8 at byte ")
    assert skipped[3]["reason"].startswith("not a JSON object (a number)")
    assert skipped[4]["reason"].startswith("teacher: a number, not a string; ") and skipped[4]["id"] == point[0]
    assert all(f"{replay}:{line}: " in err for line in skipped) and "Traceback" not in err
    rows = all_rows(tmp_path / "o" / "with_rationale")
    assert set(rows) == {pair[0], point[1]}
    assert text_of(rows[pair[0]][1]) == "Step\u2028one\u0085fits (0).\nAnswer: A"
    assert json.loads(rows[point[1]][1]["meta"])["teacher"] == "gemini"
    failures = {f["id"]: f["reason"] for f in info["failures"]}
    assert failures[point[0]].startswith(f"its line {replay}:4 is bad: teacher: a number")
    assert failures[pair[1]] == f"no line for this id in {replay}"  # its only line was not UTF-8: no id to read

    assert cli([*argv, "--out", str(tmp_path / "s"), "--strict"]) == 2
    err = capsys.readouterr().err
    assert "3 bad line(s)" in err and f"{replay}:2: not valid UTF-8" in err and "Traceback" not in err
    assert not (tmp_path / "s" / "with_rationale").exists()


def test_mirage_records_get_their_own_instruction(tmp_path):
    data = tmp_path / "mirage"
    mirage.build(mirage.MirageConfig(out=data, synthetic=2, layouts=("P0", "P6"), synthetic_size=64, progress=False))
    src = all_rows(data)
    replay = write_replay(tmp_path / "r.jsonl", [{"id": r, "rationale": "Both stories start alike.", "answer": "B"} for r in src])
    rationales.build(rationales.RationaleConfig(data=data, out=tmp_path / "o", teacher="replay", replay=replay, progress=False))
    rows = all_rows(tmp_path / "o" / "with_rationale")
    assert set(rows) == set(src)
    for rid, (_, row) in rows.items():
        last = row["prompt"][-1]["content"][-1]["text"]
        assert last.endswith(rationales.teacher_instruction("mirage", "pairwise", row["layout"], rationales.ANSWER_LINE["pairwise"]))
        assert last[: -len(rationales.teacher_instruction("mirage", "pairwise", row["layout"], ""))] in src[rid][1]["prompt"][-1]["content"][-1]["text"]
        assert json.loads(row["meta"])["teacher"] == f"replay:{replay.name}" and text_of(row) == "Both stories start alike.\nAnswer: B"


def test_options_are_checked_together(tmp_path, prism_data):
    cfg = rationales.RationaleConfig(data=prism_data, out=prism_data / "inside", teacher="local", replay=tmp_path / "x.jsonl",
                                     rpm=0, workers=0, limit=0, retry_delay=-1, batch_size="many")
    with pytest.raises(BuildError) as exc:
        cfg.check()
    text = str(exc.value)
    for expected in ("--replay is read only by --teacher replay", "--teacher local needs --model", "--rpm 0", "--workers 0",
                     "--limit 0", "--retry-delay -1", "must be outside the --data folder", "--batch-size 'many'"):
        assert expected in text
    assert rationales.RationaleConfig(data=prism_data, out=tmp_path / "o", teacher="local", batch_size="3").batch_size == 3
    with pytest.raises(BuildError, match=r"--splits test: .* has the splits \['train', 'validation'\]"):
        rationales.build(rationales.RationaleConfig(data=prism_data, out=tmp_path / "o", teacher="replay", replay=tmp_path / "x.jsonl",
                                                    splits=("test",)))
    import datasets

    row = records.make_record(id="t0", task="temporal_detect", images=[], instruction="Is it in order?", answer="yes",
                              choices=["yes", "no"], label="yes", source="s", perturbation="none", position=-1, n_frames=4,
                              layout="A", meta={})
    records.save(datasets.DatasetDict(train=datasets.Dataset.from_list([row], features=records.FEATURES)), tmp_path / "tc",
                 {"builder": "timecatch"})
    with pytest.raises(BuildError, match="was built by 'timecatch'; rationales are distilled for"):
        rationales.build(rationales.RationaleConfig(data=tmp_path / "tc", out=tmp_path / "o", teacher="replay",
                                                    replay=tmp_path / "x.jsonl", progress=False))


def test_cli_takes_a_yaml_config_and_flags_win(prism_data, tmp_path, capsys):
    """`--config rationales.yaml` sets the fields, flags override them, an unknown key fails with a did-you-mean."""
    src = all_rows(prism_data)
    replay = write_replay(tmp_path / "r.jsonl", [{"id": r, "rationale": "Step one fits.", "answer": row["label"]}
                                                  for r, (_, row) in sorted(src.items())])
    yaml_file = tmp_path / "rationales.yaml"
    yaml_file.write_text(f"data: {prism_data}\nteacher: replay\nreplay: {replay}\ntarget: gold\nlimit: 2\n"
                         "splits: train,validation\nmax_new_tokens: 77\n")
    out = tmp_path / "o"
    assert cli(["build", "rationales", "--config", str(yaml_file), "--out", str(out), "--target", "teacher",
                "--splits", "validation", "--no-progress"]) == 0
    for variant in rationales.VARIANTS:
        info = records.read_build_info(out / variant)
        args = info["args"]
        # from the YAML file
        assert (args["data"], args["teacher"], args["replay"]) == (str(prism_data), "replay", str(replay))
        assert args["limit"] == 2 and args["max_new_tokens"] == 77
        # from the flags, over the YAML file
        assert args["target"] == info["protocol"]["target"] == "teacher" and args["splits"] == ["validation"]
        assert args["progress"] is False and args["out"] == str(out)
        assert info["counts"]["records"] == {"validation": 2}
        rows = all_rows(out / variant)
        assert {split for split, _ in rows.values()} == {"validation"} and len(rows) == 2
        assert all(json.loads(row["meta"])["target"] == "teacher" for _, row in rows.values())

    capsys.readouterr()
    yaml_file.write_text(f"data: {prism_data}\nteacher: replay\nreplay: {replay}\ntargett: gold\n")
    assert cli(["build", "rationales", "--config", str(yaml_file), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "unknown key 'targett'; did you mean 'target'?" in err
    assert not (tmp_path / "bad").exists()


# --------------------------------------------------------------------------- local teacher and training


@pytest.fixture(scope="module")
def tiny_qwen(tiny_model):
    return tiny_model("qwen3-vl")


def test_local_teacher_counts_unparseable_generations_as_failures(prism_data, tmp_path, tiny_qwen):
    from judgetrain.scoring import Scorer

    out = tmp_path / "local"
    infos = rationales.build(rationales.RationaleConfig(data=prism_data, out=out, teacher="local", model=str(tiny_qwen), limit=3,
                                                        splits=("train",), max_new_tokens=8, batch_size=3, progress=False))
    info = infos["with_rationale"]
    c = info["counts"]["teacher"]
    assert c["asked"] == 3 and c["answered"] + c["failed"] == 3 and c["calls"] == 3
    # the same greedy generations, read independently: exactly the unusable ones are failures
    items = rationales.collect_items(prism_data, "prism", ["train"], 3,
                                     rationales.LocalTeacher(rationales.RationaleConfig(data=prism_data, out=out, teacher="local",
                                                                                        model=str(tiny_qwen), max_new_tokens=8),
                                                             rationales.TeacherCache(out / "cache")))
    assert all(rationales.ANSWER_LINE[it.task] in it.prompt[-1]["content"][-1]["text"] for it in items)  # asks for "Answer: X"
    ds = records.load(prism_data)
    recs = [it.record(ds[it.split][it.index]["images"]) for it in items]
    gens = Scorer.from_pretrained(tiny_qwen, batch_size=3, progress=False).generate(recs, max_new_tokens=8)
    unusable = {it.id for it, rec, g in zip(items, recs, gens) if isinstance(rationales.split_answer(g.text, parser_for_record(rec)), str)}
    assert {f["id"] for f in info["failures"]} == unusable
    assert unusable  # a tiny random model writes no "Answer: X" line
    assert all(f["reason"].split(" (")[0] in ("no parseable answer in the generated text", "no rationale before the answer line")
               or "is not alone on the last line" in f["reason"] for f in info["failures"])
    assert len(list((out / "cache").rglob("*.json"))) == c["answered"]  # failures are never cached
    assert sum(len(d) for d in records.load(out / "with_rationale").values()) == c["answered"]


def test_the_records_train_with_the_training_entrypoint_unchanged(prism_data, tmp_path, tiny_qwen):
    import torch

    from judgetrain.train import setup

    src = all_rows(prism_data)
    replay = write_replay(tmp_path / "r.jsonl", [{"id": r, "rationale": f"Step one fits.\nStep two fits too ({k}).", "answer": row["label"]}
                                                  for k, (r, (_, row)) in enumerate(sorted(src.items()))])
    out = tmp_path / "o"
    rationales.build(rationales.RationaleConfig(data=prism_data, out=out, teacher="replay", replay=replay, progress=False))
    run = setup(["--config", str(REPO / "recipes/tiny/qwen3vl-timecatch-lora.yaml"), "--model_name_or_path", str(tiny_qwen),
                 "--datasets", str(out / "with_rationale"), "--output_dir", str(tmp_path / "run"), "--max_steps", "1",
                 "--max_train_samples", "2", "--per_device_train_batch_size", "2", "--effective_batch_size", "2",
                 "--save_strategy", "no", "--eval_split", ""])
    ds = run.trainer.train_dataset
    rows = [ds[i] for i in range(2)]
    batch = run.trainer.data_collator(rows)
    tok = run.processor.tokenizer
    for i, row in enumerate(rows):
        trained = batch["labels"][i] != -100
        assert tok.decode(batch["input_ids"][i][trained]) == text_of(row) + "<|im_end|>\n"  # rationale and answer, nothing else
        assert "\nAnswer: " in text_of(row)
    run.trainer.train()
    assert run.trainer.state.global_step == 1 and torch.isfinite(torch.tensor(run.trainer.state.log_history[0]["loss"]))


def test_teacher_answers_legend_covers_no_bar(tmp_path):
    """Every bar as tall as the panel (uniform shares): a legend inside a panel sat on a bar
    whatever corner it took; the one legend is above the panels, clear of bars and titles."""
    from judgetrain.data_builders.rationales.export import answers_figure
    from judgetrain.plotting import pyplot

    stats = {"teacher_answers": {
        "pairwise": {"answered": 6, "choices": ["A", "B"], "teacher": {"A": 3, "B": 3}, "gold": {"A": 3, "B": 3}},
        "pointwise": {"answered": 10, "choices": list("12345"), "teacher": dict.fromkeys("12345", 2),
                      "gold": dict.fromkeys("12345", 2), "share_1_2": 0.4}}}
    fig = answers_figure(stats)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["teacher", "gold"]
    box = legend.get_window_extent(renderer)
    pair, point = fig.axes
    assert [round(p.get_height(), 9) for p in pair.patches] == [50.0] * 4  # 3 of 6, teacher then gold
    assert [round(p.get_height(), 9) for p in point.patches] == [20.0] * 10  # 2 of 10
    assert point.get_title() == "pointwise: teacher vs. gold (n=10, 40% in {1,2})"
    assert not [p for ax in fig.axes for p in ax.patches if p.get_window_extent(renderer).overlaps(box)]
    assert not [ax for ax in fig.axes if ax.title.get_window_extent(renderer).overlaps(box)]
    assert box.y0 >= max(ax.get_window_extent(renderer).y1 for ax in fig.axes)  # above the panels
    assert fig.bbox.x0 <= box.x0 < box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1  # inside the image, not cut off
    pyplot().close(fig)
    path = tmp_path / rationales.PLOT_FILE
    rationales.plot_answers(stats, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and [p.name for p in tmp_path.iterdir()] == [path.name]
