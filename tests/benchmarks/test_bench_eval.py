"""The evaluation-cost benchmark (benchmarks/bench_eval.py): the FLOPs it credits, hand-worked,
and a run of every configuration at Qwen3-VL-2B widths cut to one decoder and one ViT layer, tiny
frames (seconds), checking the work it counts and the ratios it reports."""

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_eval")


def test_model_flops_hand_worked(bench) -> None:
    from judgetrain.models.tiny import random_real_width

    model, _ = random_real_width("qwen3-vl-2b", text_layers=1, vision_layers=1, device="meta")
    # one Qwen3-VL-2B decoder layer: q 2048x2048, k and v 2048x1024, o 2048x2048, gate/up 2048x6144,
    # down 6144x2048, q/k norms 128 each, two RMSNorms 2048 each
    layer = 2048 * 2048 * 2 + 2048 * 1024 * 2 + 3 * 2048 * 6144 + 2 * 128 + 2 * 2048
    assert layer == 50_336_000
    n = {"decoder_tokens": 7, "decoder_slots": 10, "attention_pairs": 60, "attention_slot_pairs": 100, "vit_patches": 0,
         "vit_attention_pairs": 0}
    # what is computed, padding included: 2 x weights x token slots + 4 x 1 layer x 16 heads x 128 x query-key slot pairs
    assert bench.model_flops(model, n) == 2 * layer * 10 + 4 * 16 * 128 * 100 == 1_007_539_200
    one_patch = bench.model_flops(model, {**n, "decoder_slots": 0, "attention_slot_pairs": 0, "vit_patches": 1})
    vit = dict(model.model.visual.named_parameters())
    merger = sum(p.numel() for name, p in vit.items() if "merger" in name)
    assert merger > 0  # the 2x2 patch merger (and DeepStack's) runs once per 4 patches
    assert one_patch == 2 * (sum(p.numel() for p in vit.values()) - merger) + 2 * merger / 4


def test_bench_runs_every_configuration(bench, tmp_path) -> None:
    out = tmp_path / "bench_eval.json"
    argv = ["--arch", "qwen3-vl-2b", "--items", "8", "--timecatch-frames", "2,4", "--frames", "2", "--frame-size", "32",
            "--batch-size", "2",
            "--budget", "2", "--phases", "2", "--orderings", "2", "--lpips-pairs", "2", "--out", str(out)]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text())
    (m,) = report["models"]
    assert (m["arch"], m["decoder_layers"], m["vit_layers"]) == ("qwen3-vl-2b", 1, 1)
    rows = m["configurations"]
    single, unsorted = rows["timecatch, one at a time"], rows["timecatch, batched (2), input order"]
    ordered, batched = rows["timecatch, batched (2), length-sorted"], rows["timecatch, batched (2), sorted, shared frames"]
    # a 32x32 frame is 2x2 patches of 16: 4 ViT patches; six records a sequence of 2..4 frames share them
    from judgetrain.scoring.vision import image_key

    items = bench.timecatch_items(8, (2, 4), 32)
    frames = sum(len(images) for _, images, _ in items)
    distinct = len({image_key(im) for _, images, _ in items for im in images})
    assert distinct < frames
    assert single["vit_patches"] == unsorted["vit_patches"] == ordered["vit_patches"] == 4 * frames
    assert batched["vit_patches"] == 4 * distinct
    assert rows["PhaseFusion 2x2f + decode"]["vit_patches"] == rows["union 4f + decode"]["vit_patches"] == 16
    assert rows["1 ordering, shared prefix"]["vit_patches"] == rows["2 orderings, shared prefix"]["vit_patches"] == 8
    # the same real tokens however they are batched; one at a time pads nothing, sorted batches pad less than
    # batches in input order, and the FLOPs count the padding computed
    assert single["decoder_tokens"] == batched["decoder_tokens"] == unsorted["decoder_tokens"] > 0
    assert single["decoder_slots"] == single["decoder_tokens"] and single["padding"] == 0
    assert ordered["decoder_slots"] <= unsorted["decoder_slots"]  # sorted runs of fixed size pad the least
    assert ordered["decoder_slots"] == batched["decoder_slots"]
    assert single["model_flops"] <= ordered["model_flops"] <= unsorted["model_flops"]
    assert batched["model_flops"] < ordered["model_flops"]  # the frames encoded once
    # fusion runs the question after each of its 2 prefixes; the second ordering adds its own rest
    assert rows["PhaseFusion 2x2f + decode"]["decoder_tokens"] > rows["union 4f + decode"]["decoder_tokens"]
    assert rows["2 orderings, shared prefix"]["decoder_tokens"] > rows["1 ordering, shared prefix"]["decoder_tokens"]
    r = m["ratios"]
    assert r["batching"]["measured"] == pytest.approx(single["seconds"] / batched["seconds"])
    assert r["batching"]["flop_ratio"] == pytest.approx(single["model_flops"] / batched["model_flops"])
    assert r["sorting"]["measured"] == pytest.approx(unsorted["seconds"] / ordered["seconds"])
    assert r["sorting"]["flop_ratio"] == pytest.approx(unsorted["model_flops"] / ordered["model_flops"])
    assert r["sharing"]["flop_ratio"] == pytest.approx(ordered["model_flops"] / batched["model_flops"])
    assert r["sharing"]["flop_ratio"] > 1
    k, one = rows["2 orderings, shared prefix"], rows["1 ordering, shared prefix"]
    assert r["orderings"]["measured"] == pytest.approx(k["seconds"] / one["seconds"])
    assert r["orderings"]["flop_ratio"] == pytest.approx(k["model_flops"] / one["model_flops"])
    assert r["orderings"]["ours"] == pytest.approx(r["orderings"]["measured"] / r["orderings"]["flop_ratio"])
    assert [r[key]["goal"] for key in ("orderings", "batching", "sorting", "sharing", "phasefusion")] == \
        ["<= 1.2x", ">= 3x", "> 1x", "> 1x", "<= 0.8x"]
    assert r["orderings"]["met"] == (r["orderings"]["measured"] <= 1.2)
    assert report["lpips"]["pairs"] == 2 and report["lpips"]["ratio"]["goal"] == ">= 5x"
    assert m["max_abs_diff_batched_vs_single"] < 1e-4
