"""Reasoning judges: a tiny Qwen3-VL whose chat template opens a thinking block (as
Qwen3-VL-*-Thinking's does) is scored after the block's closing text by `eval timecatch`,
`eval judge` and `eval phasefusion`; run.json records the prefill and its identity holds it;
`--prefill ''` turns it off and a `--prefill TEXT` wins. Real models, real templates."""

from __future__ import annotations

import json
import sys
from unittest import mock

import numpy as np
import pytest

from judgetrain import records
from judgetrain.cli import main as cli_main
from judgetrain.eval import judge as J, phasefusion as PF, timecatch as T
from judgetrain.eval.core import prefill as P, runs
from judgetrain.models.registry import QWEN3_THINKING, get_family, load_processor
from judgetrain.scoring.prompts import FAMILY_PREFILL, render_prompt, resolve_prefill, template_prefill

CLOSE = "\n</think>\n\n"  # what Qwen3-VL-*-Thinking writes between its opened block and the answer


@pytest.fixture(scope="module")
def thinking(tiny_model):
    return tiny_model("qwen3-vl-thinking")


def _info(out):
    return json.loads((out / runs.RUN_INFO).read_text())


def _probs(out):
    return [r["probs"] for r in runs.read_predictions(out / runs.PREDICTIONS)]


def test_the_chat_template_decides_the_prefill(thinking, tiny_model, tmp_path):
    instruct = tiny_model("qwen3-vl")
    family = get_family("qwen3-vl")
    assert family.thinking == QWEN3_THINKING and QWEN3_THINKING.prefill == CLOSE
    processor = load_processor(thinking)
    assert template_prefill(processor) == template_prefill(processor, family) == CLOSE
    assert template_prefill(load_processor(instruct)) is None  # the instruct template opens no block
    assert resolve_prefill(FAMILY_PREFILL, family, processor) == CLOSE
    assert resolve_prefill(FAMILY_PREFILL, family) is None  # no processor, no template to read
    assert resolve_prefill("", family, processor) is None and resolve_prefill("X\n", family, processor) == "X\n"
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Is it coherent?"}]}]
    assert render_prompt(processor, prompt, CLOSE).endswith("Is it coherent?<|im_end|>\n<|im_start|>assistant\n"
                                                            "<think>\n\n</think>\n\n")
    assert P.run_prefill(thinking) == P.RunPrefill(CLOSE, P.FROM_TEMPLATE)
    assert P.run_prefill(instruct) == P.RunPrefill("", P.NO_THINKING)
    assert P.run_prefill(thinking, setting="") == P.RunPrefill("", P.FROM_FLAG)
    assert P.run_prefill(instruct, setting="Answer: ") == P.RunPrefill("Answer: ", P.FROM_FLAG)
    # nothing to read: no prefill, and the load that follows names what is missing
    assert P.run_prefill(tmp_path / "missing") == P.RunPrefill("", P.UNREAD)


def test_prefill_flag_is_shared_by_every_evaluation(tmp_path):
    from judgetrain import config

    base = ["--model", "m", "--out", str(tmp_path / "o")]
    parsers = {"timecatch": (T.make_parser(), ["--data", "d"]), "judge": (J.make_parser(), ["--data", "d"]),
               "phasefusion": (PF.make_parser(), ["--manifest", "m.jsonl"])}
    for name, (parser, own) in parsers.items():
        assert config.parse(parser, [*base, *own])[0].prefill is None, name  # the model's own
        assert config.parse(parser, [*base, *own, "--prefill", ""])[0].prefill == "", name
        assert config.parse(parser, [*base, *own, "--prefill", "none"])[0].prefill == "", name  # the old word
        assert config.parse(parser, [*base, *own, "--prefill", "family"])[0].prefill is None, name
        assert config.parse(parser, [*base, *own, "--prefill", "<x>"])[0].prefill == "<x>", name
        assert "prefill" in config.identity(config.parse(parser, [*base, *own])[0]), name


# --------------------------------------------------------------------------- eval timecatch


def test_eval_timecatch_scores_after_the_prefill(thinking, timecatch_build, tmp_path):
    from judgetrain.scoring import Scorer

    data = timecatch_build[0]
    fields = {"split": "validation", "limit": 4, "batch_size": 2, "progress": False}
    T.evaluate(str(thinking), data, tmp_path / "default", **fields)
    info = _info(tmp_path / "default")
    assert (info["prefill"], info["prefill_from"], info["identity"]["prefill"]) == (CLOSE, P.FROM_TEMPLATE, CLOSE)
    T.evaluate(str(thinking), data, tmp_path / "off", prefill="", **fields)
    off = _info(tmp_path / "off")
    assert (off["prefill"], off["prefill_from"], off["identity"]["prefill"]) == ("", P.FROM_FLAG, "")

    items = list(records.load(data)["validation"].select(range(4)))
    for prefill, run in ((CLOSE, "default"), (None, "off")):  # the same scores as the engine given that text
        scorer = Scorer.from_pretrained(thinking, dtype="float32", device="cpu", batch_size=2, prefill=prefill,
                                        progress=False)
        expected = [s.probs for s in scorer.score(items[:2])] + [s.probs for s in scorer.score(items[2:])]
        np.testing.assert_allclose(_probs(tmp_path / run), expected, atol=1e-5, rtol=0)
    assert np.abs(np.array(_probs(tmp_path / "default")) - np.array(_probs(tmp_path / "off"))).max() > 1e-3
    # another prefill is another run: never resumed into this folder
    with pytest.raises(runs.PredictionsError, match=r"prefill: '\\n</think>\\n\\n' → ''"):
        T.evaluate(str(thinking), data, tmp_path / "default", prefill="", **fields)


# --------------------------------------------------------------------------- eval judge


def _judge(model, data, out, *extra):
    argv = ["eval", "judge", "--model", str(model), "--data", str(data), "--split", "test", "--out", str(out),
            "--tasks", "pairwise", "--limit", "4", "--batch-size", "2", "--no-progress", *extra]
    with mock.patch.object(sys, "argv", ["judgetrain", *argv]):  # run.json records the command line
        return cli_main(argv)


def test_eval_judge_scores_after_the_prefill_and_prefill_empty_turns_it_off(thinking, prism_build, tmp_path):
    assert _judge(thinking, prism_build, tmp_path / "default") == 0
    assert _judge(thinking, prism_build, tmp_path / "explicit", "--prefill", CLOSE) == 0
    assert _judge(thinking, prism_build, tmp_path / "off", "--prefill", "") == 0
    default, explicit, off = (_info(tmp_path / n) for n in ("default", "explicit", "off"))
    assert (default["prefill"], default["prefill_from"], default["identity"]["prefill"]) == (CLOSE, P.FROM_TEMPLATE, CLOSE)
    assert (explicit["prefill"], explicit["prefill_from"]) == (CLOSE, P.FROM_FLAG)
    assert (off["prefill"], off["prefill_from"], off["identity"]["prefill"]) == ("", P.FROM_FLAG, "")
    assert _probs(tmp_path / "default") == _probs(tmp_path / "explicit")  # the same text: the same scores
    assert np.abs(np.array(_probs(tmp_path / "default")) - np.array(_probs(tmp_path / "off"))).max() > 1e-3
    # the same text given by hand is the same run: it resumes the default one and scores nothing
    assert _judge(thinking, prism_build, tmp_path / "default", "--prefill", CLOSE) == 0
    assert len(runs.read_predictions(tmp_path / "default" / runs.PREDICTIONS)) == 4


def test_in_process_judge_scoring_uses_the_model_prefill(thinking, tiny_model):
    """judge_metrics (training-time validation, sweeps) scores a model in memory as `eval judge` does."""
    from judgetrain.eval.judge.command import model_scorer
    from judgetrain.models import load_model_and_processor

    assert model_scorer(*load_model_and_processor(thinking, dtype="float32")).prefill == CLOSE
    assert model_scorer(*load_model_and_processor(tiny_model("qwen3-vl"), dtype="float32")).prefill is None


# --------------------------------------------------------------------------- eval phasefusion


def test_eval_phasefusion_scores_after_the_prefill(thinking, clips, tmp_path):
    fields = {"budget": 2, "phases": 1, "orderings": 2, "arms": ["single"], "limit": 1, "latency_lines": 0,
              "progress": False}

    def posteriors(out):
        return [r["posterior"] for r in runs.read_predictions(out / runs.PREDICTIONS) if r["kind"] == "pass"]

    PF.evaluate(str(thinking), clips, tmp_path / "default", **fields)
    PF.evaluate(str(thinking), clips, tmp_path / "explicit", prefill=CLOSE, **fields)
    PF.evaluate(str(thinking), clips, tmp_path / "off", prefill="", **fields)
    default, off = _info(tmp_path / "default"), _info(tmp_path / "off")
    assert (default["prefill"], default["prefill_from"], default["identity"]["prefill"]) == (CLOSE, P.FROM_TEMPLATE, CLOSE)
    assert (off["prefill"], off["identity"]["prefill"]) == ("", "")
    assert posteriors(tmp_path / "default") == posteriors(tmp_path / "explicit") != []
    assert np.abs(np.array(posteriors(tmp_path / "default")) - np.array(posteriors(tmp_path / "off"))).max() > 1e-3
