"""The training throughput benchmark (benchmarks/bench_train.py): what it counts in a batch,
the FLOPs it credits, the one setting each lever changes, the figures it reports, an end-to-end
run of both arms on the tiny model, and the real-width models it trains (Qwen3-VL-2B and
Qwen2.5-VL-7B next to Qwen3-VL-8B in ``judgetrain.models.tiny.REAL_WIDTHS``)."""

import json

import pytest
import torch


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_train")


# --------------------------------------------------------------------------- real widths


def _with_real_vocab(model, vocab: int) -> int:
    """Parameters with the checkpoint's vocabulary instead of the tiny tokenizer's."""
    total = sum(p.numel() for p in model.parameters())
    width = model.get_input_embeddings().weight.shape[1]
    tables = 1 if model.config.tie_word_embeddings else 2
    return total - tables * model.get_input_embeddings().weight.numel() + tables * vocab * width


def test_qwen3_vl_2b_real_widths() -> None:
    from judgetrain.models.tiny import random_real_width

    model, _ = random_real_width("qwen3-vl-2b", device="meta")
    text, vision = model.config.text_config, model.config.vision_config
    assert (len(model.model.language_model.layers), len(model.model.visual.blocks)) == (28, 24)
    assert (text.hidden_size, text.intermediate_size, text.num_attention_heads, text.num_key_value_heads, text.head_dim) == (
        2048, 6144, 16, 8, 128)
    assert (vision.hidden_size, vision.intermediate_size, vision.num_heads, vision.patch_size, vision.out_hidden_size) == (
        1024, 4096, 16, 16, 2048)
    assert vision.deepstack_visual_indexes == [5, 11, 17] and len(model.model.visual.deepstack_merger_list) == 3
    assert model.config.tie_word_embeddings and model.get_output_embeddings().weight is model.get_input_embeddings().weight
    # what these widths come to with the real 151,936-token vocabulary (one tied table)
    assert _with_real_vocab(model, 151936) == 2_127_532_032


def test_qwen2_5_vl_7b_real_widths() -> None:
    from judgetrain.models.tiny import random_real_width

    model, _ = random_real_width("qwen2.5-vl-7b", device="meta")
    text, vision = model.config.text_config, model.config.vision_config
    assert (len(model.model.language_model.layers), len(model.model.visual.blocks)) == (28, 32)
    assert (text.hidden_size, text.intermediate_size, text.num_attention_heads, text.num_key_value_heads) == (3584, 18944, 28, 4)
    assert model.model.language_model.layers[0].self_attn.head_dim == 128
    assert (vision.hidden_size, vision.intermediate_size, vision.num_heads, vision.patch_size, vision.window_size) == (
        1280, 3420, 16, 14, 112)
    assert vision.fullatt_block_indexes == [7, 15, 23, 31] and not model.config.tie_word_embeddings
    # Qwen/Qwen2.5-VL-7B-Instruct's safetensors hold 8,292,166,656 parameters (untied 152,064-token tables)
    assert _with_real_vocab(model, 152064) == 8_292_166_656


def test_real_widths_at_reduced_depth_keep_their_shares() -> None:
    from judgetrain.models.tiny import random_real_width

    model, _ = random_real_width("qwen2.5-vl-7b", text_layers=2, vision_layers=4, device="meta")
    assert model.config.vision_config.fullatt_block_indexes == [3]  # one in four blocks attends fully, the last
    assert model.config.text_config.layer_types == ["full_attention", "full_attention"]
    model, _ = random_real_width("qwen2.5-vl-7b", text_layers=1, vision_layers=16, device="meta")
    assert model.config.vision_config.fullatt_block_indexes == [7, 15]
    model, _ = random_real_width("qwen3-vl-2b", text_layers=2, vision_layers=2, device="meta")
    assert model.config.vision_config.deepstack_visual_indexes == [0, 1]
    with pytest.raises(ValueError, match="known: qwen3-vl-8b, qwen3-vl-2b, qwen2.5-vl-7b"):
        random_real_width("qwen3-vl-4b")


# --------------------------------------------------------------------------- counting and FLOPs


def test_batch_stats_of_a_padded_batch(bench) -> None:
    inputs = {"input_ids": torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]]),
              "attention_mask": torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]),
              "labels": torch.tensor([[-100, -100, -100, 8, 9], [-100, -100, 7, -100, -100]]),
              "image_grid_thw": torch.tensor([[1, 4, 4], [1, 2, 2]])}
    assert bench.batch_stats(inputs, pad_id=0, window_patches=None) == {
        "real": 8, "slots": 10, "records": 2, "completion": 3, "len_sq": 25 + 9,
        "patches": 20, "patch_sq": 256 + 16, "patch_win": 256 + 16}
    assert bench.batch_stats(inputs, pad_id=0, window_patches=4)["patch_win"] == 16 * 4 + 4 * 4


def test_batch_stats_of_packed_rows(bench) -> None:
    # two rows: records of 3 and 2 tokens then 3 pad tokens; one record of 4 then 4 pad tokens;
    # positions as judgetrain's packing lays them out, (4, rows, length) with the text row first
    ids = torch.tensor([[5, 6, 7, 5, 6, 0, 0, 0], [5, 6, 7, 8, 0, 0, 0, 0]])
    text = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 2, 3, 0, 1, 2, 3]])
    inputs = {"input_ids": ids, "position_ids": text.expand(4, -1, -1), "labels": torch.full_like(ids, -100)}
    stats = bench.batch_stats(inputs, pad_id=0, window_patches=None)
    assert (stats["real"], stats["slots"], stats["records"], stats["len_sq"], stats["completion"]) == (9, 16, 3, 9 + 4 + 16, 0)


def test_step_flops_hand_worked(bench) -> None:
    shape = {"n_dec": 10, "layers": 2, "heads": 2, "head_dim": 4, "n_vit": 3, "n_merge": 8, "vit_layers": 2,
             "vit_hidden": 5, "merge": 2, "vit_full_layers": 1, "window_patches": 3}
    step = {"real": 7, "len_sq": 29, "patches": 8, "patch_sq": 40, "patch_win": 24}
    # attention 6*2*2*4*29 = 2784; ViT forward 2*3*8 + 2*8*(8/4) = 80; ViT attention forward 4*5*(40 + 24) = 1280
    assert bench.step_flops(step, shape) == (6 * 10 * 7 + 2784 + 3 * 80 + 3 * 1280, 4 * 10 * 7 + 2784 + 80 + 1280)
    assert bench.step_flops(step, {}) == (0.0, 0.0)


def test_each_lever_changes_one_setting(bench) -> None:
    import importlib.util

    recipe = {"attn_implementation": "sdpa", "gradient_checkpointing": True, "per_device_train_batch_size": 2,
              "effective_batch_size": 16, "packing": True}
    assert bench.lever_args("packing", recipe, [])[0] == ["--packing", "false"]
    assert bench.lever_args("packing", recipe, ["--packing", "false"])[0] == ["--packing", "true", "--padding_free", "false"]
    # the levers of the judgetrain arm's defaults: each turns one off, `plain` both (TRL's padded batches)
    base = bench.DEFAULT_JUDGETRAIN_ARGS.split()
    assert bench.lever_args("vision_cache", recipe, base)[0] == ["--vision_feature_cache", "false"]
    assert bench.lever_args("vision_cache", recipe, [])[0] == ["--vision_feature_cache", "true"]
    assert bench.lever_args("padding_free", recipe, base)[0] == ["--padding_free", "false"]
    assert bench.lever_args("padding_free", recipe, [])[0] is None  # the recipe packs: its rows are padding-free
    assert bench.lever_args("plain", recipe, base)[0] == [
        "--packing", "false", "--padding_free", "false", "--vision_feature_cache", "false"]
    assert bench.lever_args("attn", recipe, [])[0] == ["--attn_implementation", "eager"]
    assert bench.lever_args("attn", {**recipe, "attn_implementation": "eager"}, [])[0] == ["--attn_implementation", "sdpa"]
    assert bench.lever_args("checkpointing", recipe, [])[0] == ["--gradient_checkpointing", "false"]
    assert bench.lever_args("batch", recipe, [])[0] == ["--per_device_train_batch_size", "4"]
    assert bench.lever_args("batch", {"per_device_train_batch_size": 2}, [])[0] == [
        "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1"]
    assert bench.lever_args("compile", recipe, [])[0] == ["--torch_compile", "true"]
    assert bench.lever_args("workers", recipe, [])[0] == ["--dataloader_num_workers", "2", "--dataloader_pin_memory", "true"]
    assert bench.lever_args("group_by_length", recipe, [])[0] == [
        "--train_sampling_strategy", "group_by_length", "--packing", "false"]
    assert bench.lever_args("group_by_length", recipe, ["--packing", "false"])[0] == [
        "--train_sampling_strategy", "group_by_length"]
    assert bench.lever_args("group_rows", {**recipe, "packing": True}, [])[0] == ["--train_sampling_strategy", "group_by_length"]
    assert bench.lever_args("group_rows", {**recipe, "packing": False}, [])[0] is None
    liger, what = bench.lever_args("liger", recipe, [])
    if importlib.util.find_spec("liger_kernel") is None:
        assert liger is None and "not installed" in what
    else:
        assert liger == ["--use_liger_kernel", "true"]
    flash, what = bench.lever_args("flash_attn", recipe, [])
    import torch

    if importlib.util.find_spec("flash_attn") is None or not torch.cuda.is_available():
        assert flash is None and "CUDA GPU" in what
    else:
        assert flash == ["--attn_implementation", "flash_attention_2"]
    with pytest.raises(ValueError, match="unknown lever 'flash'"):
        bench.lever_args("flash", recipe, [])


def test_summary_and_comparison(bench) -> None:
    def step(real, slots, seconds):
        return {"real": real, "slots": slots, "records": 2, "seconds": seconds, "flops": 4.0 * real, "flops_needed": 2.0 * real}

    trl = {"steps": [step(90, 100, 9.0), step(80, 100, 4.0), step(60, 100, 4.0)], "losses": [3.0, 2.0, 2.2],
           "peak_rss_mb": 1000.0}
    jt = {"steps": [step(90, 90, 9.0), step(80, 80, 2.0), step(60, 60, 2.0)], "losses": [3.0, 2.1, 2.1],
          "peak_rss_mb": 1100.0}
    a, b = bench.summarize(trl, 1, ceiling=70.0), bench.summarize(jt, 1, ceiling=70.0)
    assert a["clock"] == "wall" and a["tokens_per_wall_s"] == a["tokens_per_s"]
    assert (a["tokens_per_s"], a["records_per_s"], a["real_tokens_all_steps"]) == (17.5, 0.5, 230)
    assert a["padding_fraction"] == pytest.approx(0.3)
    assert (b["tokens_per_s"], b["padding_fraction"], b["peak_mb"]) == (35.0, 0.0, 1100.0)
    assert a["loss_mean_timed"] == pytest.approx(2.1) and a["loss_se_timed"] == pytest.approx(0.1)
    assert a["mfu"] == pytest.approx(4 * 140 / 8 / 70) and a["mfu_needed"] == pytest.approx(a["mfu"] / 2)
    c = bench.compare(a, b, trl, jt)
    assert c["tokens_per_s_ratio"] == 2.0 and c["peak_memory_ratio"] == pytest.approx(1.1)
    assert c["same_batches"] and c["losses_agree"] and c["loss_difference"] == pytest.approx(0.0)
    # pooled spread of the timed steps: deviations (-0.1, 0.1) and (0, 0), 4 - 2 degrees of freedom -> sd 0.1;
    # se of the difference of two 2-step means 0.1 * (1/2 + 1/2) ** 0.5; tolerance 3 se
    assert c["loss_tolerance"] == pytest.approx(0.3)
    jt["losses"] = [3.0, 3.1, 3.1]
    assert not bench.compare(a, bench.summarize(jt, 1, ceiling=70.0), trl, jt)["losses_agree"]


# --------------------------------------------------------------------------- end to end


@pytest.mark.slow
def test_bench_runs_both_arms_on_the_same_records(bench, tmp_path) -> None:
    """Tiny Qwen3-VL, 24 mixed TimeCatch + PRISM records, batch 8 x accumulation 1: three steps are
    one epoch, so every record is seen once and the counted real tokens are their lengths. One
    micro-batch a step, so both arms compute the same loss exactly: with accumulation, plain
    TRL trains Qwen-VL on the mean of micro-batch means and judgetrain on the token-weighted mean
    over the step (judgetrain.train.trainer), which differ."""
    import datasets
    from transformers import AutoProcessor

    from judgetrain.train import record_length

    out = tmp_path / "bench.json"
    argv = ["--arch", "tiny", "--cache", str(tmp_path), "--out", str(out), "--timecatch-clips", "2", "--prism-procedures", "2",
            "--prism-layouts", "P0", "--train-records", "24", "--batch", "8", "--effective-batch", "8", "--steps", "2",
            "--warmup-steps", "1", "--judgetrain-args", "--packing false", "--levers", "packing", "--arms", "trl,judgetrain"]
    assert bench.main(argv) == 0
    got = json.loads(out.read_text())
    trl, jt, packed = (got["arms"][k] for k in ("trl", "judgetrain", "judgetrain + packing"))
    steps = {r["label"]: r["steps"] for r in got["results"]}

    # both arms see the same records in the same batches, and train the same
    assert [s["real"] for s in steps["trl"]] == [s["real"] for s in steps["judgetrain"]]
    assert [s["records"] for s in steps["trl"]] == [8, 8, 8]
    assert got["comparison"]["trl"]["same_batches"] and got["comparison"]["trl"]["losses_agree"]
    assert got["comparison"]["trl"]["loss_difference"] == pytest.approx(0.0, abs=1e-5)
    # one micro-batch a step: the same training, so the adapters' updates agree (the judgetrain arm keeps the
    # vision features, as its recipe says, which changes nothing but float rounding)
    assert got["comparison"]["trl"]["adapter"]["init_distance"] == 0.0
    assert got["comparison"]["trl"]["adapter"]["update_distance"] < 1e-3
    # one epoch: the real tokens are the 24 records' lengths, images expanded
    processor = AutoProcessor.from_pretrained(next((tmp_path / "train-models").iterdir()))
    data = sorted((tmp_path / "train-data").iterdir())[0]
    train = datasets.concatenate_datasets([datasets.load_from_disk(str(data / d))["train"] for d in ("timecatch", "prism")])
    lengths = [record_length(processor, row) for row in train.select(range(24))]
    assert trl["real_tokens_all_steps"] == jt["real_tokens_all_steps"] == sum(lengths)
    assert trl["records_all_steps"] == 24 and min(lengths) < max(lengths)
    assert 0 < trl["padding_fraction"] < 1 and trl["padding_fraction"] == jt["padding_fraction"]
    # packed rows: every token slot but the rows' tails is a record's; records keep their lengths
    assert 0 <= packed["padding_fraction"] < trl["padding_fraction"]
    assert min(lengths) <= packed["tokens_per_record"] <= max(lengths)
    assert all(s["records"] >= 1 for s in steps["judgetrain + packing"])
