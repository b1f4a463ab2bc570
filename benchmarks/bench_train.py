"""Training throughput benchmark (issues 16 and 41): ``judgetrain train`` against plain
``trl.SFTTrainer`` scripts side by side in one run, on the same model (one folder on disk), the
same records, seed, learning rate and records per optimizer step.

    python benchmarks/bench_train.py                    # CPU: Qwen3-VL-2B widths, 2 decoder + 1 ViT layers (~8 min)
    python benchmarks/bench_train.py --levers all       # + each lever on the judgetrain arm (~20 min on 2 cores)
    python benchmarks/bench_train.py --device cuda --frame-size 448 --prism-size 448 --levers all   # GPU, full depth
    bash benchmarks/gpu_check.sh                        # the whole GPU check in one command

Records: a TimeCatch build (4-16 frames of synthetic physics clips written at --frame-size) and a
PRISM pairwise build (--prism-layouts: two sequences of 4-8 step images, or two grid images),
made with ``judgetrain build`` into benchmarks/out/train-data/ once. Model: random weights at a
released checkpoint's widths (``judgetrain.models.tiny.random_real_width``; --layers cuts the
depth), saved with ``save_pretrained`` and a processor holding --max-pixels into
benchmarks/out/train-models/; every arm loads that folder. Each arm runs in its own process (so
its peak memory is its own) for --warmup-steps + --steps optimizer steps.

Arms. ``trl``, the fair baseline: SFTTrainer as a competent user configures it for the same
memory budget: its own vision collator (padded batches), LoRA through ``peft_config``, and from
the judgetrain arm's resolved settings everything that decides what is trained or what memory
is spent (optimizer, schedule, seed, per-device batch, gradient accumulation, max_length,
precision, gradient checkpointing, LoRA r/alpha/dropout/targets). ``trl-defaults``: the same
but with TRL's default gradient checkpointing (on), what a script that leaves it alone runs.
``judgetrain``: ``judgetrain.train.setup`` + ``train_and_save`` on --recipe (default
recipes/qwen3vl-2b/timecatch-lora.yaml) with the bench's model, data and steps, plus
--judgetrain-args (default: padding-free micro-batches of the same records TRL pads, and the
vision feature cache). Equal training, not only equal loss functions: the schedule is constant
(--schedule constant: no warm-up keeps the rate near zero over the timed steps), every arm takes
the same records per optimizer step (checked step by step), and the adapters' distance from
TRL's is reported (their updates, final minus initial, relative to TRL's update). ``--levers``
adds judgetrain arms with one setting changed each: the vision feature cache or padding-free
collation off, best-fit packing (rows of max_length: other records a step), attention
implementation, gradient checkpointing, per-device batch, torch.compile, dataloader workers +
pinned memory, length-grouped sampling, length-grouped packed rows, Liger kernels.

Measured per arm over the timed steps: real tokens/s (2-D attention-mask ones, or the non-pad
tokens of packed rows), padding fraction (1 - real / token slots), records/s, peak memory (CPU:
the process's max RSS; CUDA: max_memory_allocated), the training loss, and MFU against a matmul
ceiling measured in the same run (the convention is printed with the results). Every arm's
settings are printed side by side. Writes benchmarks/out/bench_train.json (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
REPO = Path(__file__).resolve().parents[1]
LEVERS = ("plain", "vision_cache", "padding_free", "packing", "attn", "checkpointing", "batch", "compile", "workers", "group_by_length",
          "group_rows", "liger", "flash_attn")
# the baselines: TRL configured for the judgetrain arm's memory budget, and TRL with its defaults
TRL_ARMS = ("trl", "trl-defaults")
# the judgetrain arm: the same records TRL pads, laid end to end (padding_free), and the frozen vision tower's
# features computed once per distinct image (vision_feature_cache); --levers turns each off
DEFAULT_JUDGETRAIN_ARGS = "--packing false --padding_free true --vision_feature_cache true"
# What the TRL arms copy from the judgetrain arm's resolved settings: the optimizer, schedule, data order, batch
# and precision must match or the two trainings could not be compared; the fair arm also copies what decides the
# memory budget (gradient checkpointing); everything else stays at TRL's defaults.
SHARED_FIELDS = ("seed", "data_seed", "learning_rate", "lr_scheduler_type", "warmup_steps", "warmup_ratio",
                 "weight_decay", "optim", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
                 "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "max_length", "bf16", "fp16")
FAIR_FIELDS = ("gradient_checkpointing",)
# printed side by side for every arm (what each trainer really ran with, read from its TrainingArguments)
SETTINGS_SHOWN = ("per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "learning_rate",
                  "lr_scheduler_type", "warmup_steps", "max_length", "packing", "padding_free", "vision_feature_cache",
                  "bf16", "torch_compile", "use_liger_kernel", "dataloader_num_workers", "train_sampling_strategy")
MFU_CONVENTION = (
    "MFU = model FLOPs of the timed steps / their time (the rates' clock) / the matmul ceiling on the same clock. Model FLOPs "
    "(PaLM App. B, causal): per real decoder token 6*N_dec (N_dec = decoder-layer and LM-head weights; "
    "embedding lookups excluded) plus attention 6*L*H*d_head*T^2 per record of T tokens (half of PaLM's "
    "12*L*H*Q*T per token, as a causal mask needs half the score matrix); per ViT patch 6*N_vit "
    "(blocks, patch embedding; mergers per merged token) plus 12*D_vit*P per layer for an image of P "
    "patches (window layers: the window's patches). 'needed' counts what a LoRA step on a frozen base "
    "computes instead: 4*N_dec (no weight gradients), the ViT forward only (2*N_vit, 4*D*P), attention "
    "unchanged. Gradient checkpointing's recomputation is never counted. Ceiling: the best of repeated "
    "square torch.matmul calls in the training dtype (2*n^3 FLOPs each).")


# --------------------------------------------------------------------------- measuring inside an arm


def batch_stats(inputs, pad_id: int | None, window_patches: int | None) -> dict:
    """Counts of one micro-batch as the model receives it: real tokens (2-D attention-mask ones,
    else non-pad tokens), token slots (input_ids elements), completion tokens (labels != -100),
    records with their lengths (rows of a padded batch; in a packed row, runs that restart at
    position 0, or cu_seq_lens), and ViT patches per image (image_grid_thw)."""
    ids = inputs["input_ids"]
    mask = inputs.get("attention_mask")
    if mask is not None and mask.dim() == 2:
        keep = mask.bool()
    else:
        keep = ids != pad_id if pad_id is not None else ids.new_ones(ids.shape, dtype=bool)
    lengths = record_lengths(inputs, keep)
    labels = inputs.get("labels")
    grid = inputs.get("image_grid_thw")
    patches = [int(p) for p in grid.prod(-1).tolist()] if grid is not None else []
    win = window_patches or 0
    return {"real": int(keep.sum()), "slots": int(ids.numel()), "records": len(lengths),
            "completion": int((labels != -100).sum()) if labels is not None else 0,
            "len_sq": sum(t * t for t in lengths), "patches": sum(patches), "patch_sq": sum(p * p for p in patches),
            "patch_win": sum(p * min(p, win) for p in patches) if win else sum(p * p for p in patches)}


def record_lengths(inputs, keep) -> list[int]:
    """Lengths of the records in a batch: cu_seq_lens_q when given; else runs of real tokens
    that start where the (first channel of the) position ids is 0; else one per row."""
    cu = inputs.get("cu_seq_lens_q")
    if cu is not None:
        return [int(b - a) for a, b in zip(cu.tolist()[:-1], cu.tolist()[1:])]
    pos = inputs.get("position_ids")
    if pos is not None:
        pos = pos[0] if pos.dim() == 3 else pos  # M-RoPE (3 or 4, B, T): every channel restarts per record
        out = []
        for row, k in zip(pos.tolist(), keep.tolist()):
            n = 0
            for p, real in zip(row, k):
                if real and p == 0 and n:
                    out.append(n)
                    n = 0
                n += bool(real)
            out += [n] if n else []
        return out
    return [int(n) for n in keep.sum(1).tolist() if n]


def model_shape(model) -> dict:
    """The sizes the FLOP count needs, read from a Qwen-VL model (PEFT-wrapped or not); {} for others."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = base.config
    if not hasattr(cfg, "vision_config") or not hasattr(base.model, "language_model"):
        return {}
    text, vis = cfg.get_text_config(), cfg.vision_config

    def count(*parts):
        return sum(p.numel() for n, p in base.named_parameters() if "lora_" not in n and any(s in n for s in parts))

    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    full = getattr(vis, "fullatt_block_indexes", None)
    window = getattr(vis, "window_size", None)
    return {"n_dec": count(".language_model.layers.") + base.get_output_embeddings().weight.numel(),
            "layers": text.num_hidden_layers, "heads": text.num_attention_heads, "head_dim": head_dim,
            "n_vit": count(".visual.blocks.", ".visual.patch_embed."), "n_merge": count(".visual.merger", "deepstack_merger"),
            "vit_layers": vis.depth, "vit_hidden": vis.hidden_size, "merge": vis.spatial_merge_size,
            "vit_full_layers": len(full) if full is not None else vis.depth,
            "window_patches": (window // vis.patch_size) ** 2 if window else None}


def step_flops(s: dict, shape: dict) -> tuple[float, float]:
    """(model FLOPs by the 6N convention, FLOPs a LoRA step on a frozen base needs) of one step's counts."""
    if not shape:
        return 0.0, 0.0
    attn = 6 * shape["layers"] * shape["heads"] * shape["head_dim"] * s["len_sq"]
    merged = s["patches"] / shape["merge"] ** 2
    full, windowed = shape["vit_full_layers"], shape["vit_layers"] - shape["vit_full_layers"]
    vit_attn_fwd = 4 * shape["vit_hidden"] * (full * s["patch_sq"] + windowed * s["patch_win"])
    vit_fwd = 2 * shape["n_vit"] * s["patches"] + 2 * shape["n_merge"] * merged
    model = 6 * shape["n_dec"] * s["real"] + attn + 3 * vit_fwd + 3 * vit_attn_fwd
    needed = 4 * shape["n_dec"] * s["real"] + attn + vit_fwd + vit_attn_fwd
    return float(model), float(needed)


class Meter:
    """Per optimizer step: wall and CPU seconds between step ends (data loading and collation
    included) and the counts of its micro-batches, taken in ``trainer.training_step``; peak memory."""

    KEYS = ("real", "slots", "records", "completion", "len_sq", "patches", "patch_sq", "patch_win")

    def __init__(self):
        import torch

        self.cuda = torch.cuda.is_available()
        self.steps: list[dict] = []
        self.pending = dict.fromkeys(self.KEYS, 0)
        self.t_last = None
        self.shape: dict = {}
        self.adapter_init: dict = {}
        self.settings: dict = {}
        self.own_args = None
        self.attn = None  # the attention implementation the arm asked for (its spec or its model arguments)

    def _now(self) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process and its dataloader workers, live or ended)."""
        import resource

        import psutil
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        ended = resource.getrusage(resource.RUSAGE_CHILDREN)
        live = 0.0
        for c in psutil.Process().children(recursive=True):
            try:
                live += sum(c.cpu_times()[:2])
            except psutil.Error:  # a worker that ended in between is in RUSAGE_CHILDREN now
                pass
        return time.perf_counter(), time.process_time() + ended.ru_utime + ended.ru_stime + live

    def attach(self, trainer) -> None:
        from transformers import TrainerCallback

        meter, inner = self, trainer.training_step
        pad_id = getattr(getattr(trainer.processing_class, "tokenizer", trainer.processing_class), "pad_token_id", None)
        self.shape = model_shape(trainer.model)

        def training_step(model, inputs, *args, **kwargs):
            for k, v in batch_stats(inputs, pad_id, self.shape.get("window_patches")).items():
                meter.pending[k] += v
            return inner(model, inputs, *args, **kwargs)

        class Timer(TrainerCallback):
            def on_train_begin(self, args, state, control, **kw):
                import torch

                meter.adapter_init = trainable_state(trainer.model)
                own = meter.own_args or args  # judgetrain's own settings (its TRL copy says packing: false when it packs)
                meter.settings = {k: getattr(own, k, None) for k in SETTINGS_SHOWN}
                meter.settings["attn_implementation"] = meter.attn
                if meter.cuda:
                    torch.cuda.reset_peak_memory_stats()
                meter.t_last = meter._now()

            def on_step_end(self, args, state, control, **kw):
                now = meter._now()
                meter.steps.append({**meter.pending, "seconds": now[0] - meter.t_last[0], "cpu_seconds": now[1] - meter.t_last[1]})
                meter.pending, meter.t_last = dict.fromkeys(meter.KEYS, 0), now

        trainer.training_step = training_step
        trainer.add_callback(Timer())

    def result(self, trainer, adapter_path: Path | None = None) -> dict:
        """The arm's figures; with ``adapter_path``, its trainable weights before and after training
        are written there (safetensors, keys ``init/NAME`` and ``final/NAME``) for the distance check."""
        import resource

        import torch

        for s in self.steps:
            s["flops"], s["flops_needed"] = step_flops(s, self.shape)
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        # the settings as the trainer read them; bools and strings as they are (enums by value)
        settings = {k: getattr(v, "value", v) for k, v in self.settings.items()}
        out = {"steps": self.steps, "losses": losses, "shape": self.shape, "threads": torch.get_num_threads(),
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "settings": settings,
               "vision_cache": vision_cache_counts(trainer)}
        if adapter_path is not None and self.adapter_init:
            from safetensors.torch import save_file

            final = trainable_state(trainer.model)
            save_file({**{f"init/{k}": v for k, v in self.adapter_init.items()}, **{f"final/{k}": v for k, v in final.items()}},
                      str(adapter_path))
            out["adapter"] = str(adapter_path)
        if self.cuda:
            out["peak_cuda_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
            out["peak_cuda_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
        return out


def trainable_state(model) -> dict:
    """The trainable weights (LoRA's) by their name under PEFT, as float32 CPU copies."""
    return {_peft_name(n): p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def _peft_name(name: str) -> str:
    """A parameter's name without the wrappers an arm may add around the PEFT model (DDP's ``module.``)."""
    return name[len("module."):] if name.startswith("module.") else name


def vision_cache_counts(trainer) -> dict | None:
    """Images shown to and encoded by the vision tower under judgetrain's feature cache, when on."""
    cache = getattr(trainer, "vision_features", None)
    if cache is None:
        return None
    return {k: getattr(cache, k) for k in ("seen", "encoded", "hits", "bytes") if hasattr(cache, k)}


def adapter_distance(path: Path, base_path: Path) -> dict:
    """How far an arm's training went from the baseline's: the distance between their updates
    (final - initial trainable weights, over the names both have), relative to the baseline's
    update, and the relative distance of their initial weights (0 when both start alike)."""
    import torch
    from safetensors.torch import load_file

    a, b = load_file(str(path)), load_file(str(base_path))
    names = sorted(k[len("final/"):] for k in b if k.startswith("final/") and k in a)
    if not names:
        return {"compared": 0, "error": "no trainable weight of the same name in both arms"}
    upd_a = torch.cat([(a[f"final/{n}"] - a[f"init/{n}"]).flatten() for n in names])
    upd_b = torch.cat([(b[f"final/{n}"] - b[f"init/{n}"]).flatten() for n in names])
    init_a = torch.cat([a[f"init/{n}"].flatten() for n in names])
    init_b = torch.cat([b[f"init/{n}"].flatten() for n in names])
    only = len([k for k in b if k.startswith("final/")]) - len(names)
    return {"compared": len(names), "not_in_both": only,
            "update_distance": float((upd_a - upd_b).norm() / upd_b.norm().clamp_min(1e-30)),
            "init_distance": float((init_a - init_b).norm() / init_b.norm().clamp_min(1e-30)),
            "update_norm_ratio": float(upd_a.norm() / upd_b.norm().clamp_min(1e-30))}


def run_trl(spec: dict, meter: Meter):
    """The baseline: a plain TRL script, as a user would write it (defaults except ``spec["sft"]``)."""
    import datasets
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForImageTextToText, AutoProcessor, set_seed
    from trl import SFTConfig, SFTTrainer

    set_seed(spec["sft"]["seed"])
    model = AutoModelForImageTextToText.from_pretrained(spec["model"], dtype=getattr(torch, spec["dtype"]),
                                                        attn_implementation=spec.get("attn_implementation"))
    processor = AutoProcessor.from_pretrained(spec["model"])
    train = datasets.concatenate_datasets([datasets.load_from_disk(d)["train"] for d in spec["datasets"]])
    if spec.get("train_records"):
        train = train.select(range(min(spec["train_records"], len(train))))
    known = set(SFTConfig.__dataclass_fields__)
    args = SFTConfig(output_dir=spec["output_dir"], logging_steps=1, save_strategy="no", report_to="none",
                     **{k: v for k, v in spec["sft"].items() if k in known})
    peft_config = LoraConfig(task_type="CAUSAL_LM", **spec["lora"])
    trainer = SFTTrainer(model=model, args=args, train_dataset=train, processing_class=processor, peft_config=peft_config)
    meter.attn = spec.get("attn_implementation")
    meter.attach(trainer)
    trainer.train()
    return trainer


def run_judgetrain(spec: dict, meter: Meter):
    """``judgetrain train`` on the recipe, through the same setup/train/save path as the command."""
    from judgetrain.train import setup, train_and_save

    run = setup(list(spec["argv"]))
    meter.own_args, meter.attn = run.training_args, run.model_args.attn_implementation
    meter.attach(run.trainer)
    train_and_save(run)
    return run.trainer


def child(spec_path: Path) -> int:
    """One arm in this process; its result (or its error) goes to ``spec["result"]``."""
    import traceback

    import torch

    spec = json.loads(spec_path.read_text())
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    t0 = time.perf_counter()
    out = {"label": spec["label"], "kind": spec["kind"], "ok": False}
    try:
        meter = Meter()
        trainer = (run_trl if spec["kind"] == "trl" else run_judgetrain)(spec, meter)
        out.update(meter.result(trainer, Path(spec["result"]).with_suffix(".adapter.safetensors")), ok=True)
    except BaseException as e:  # reported as this arm's result; the other arms still run
        out["error"] = f"{type(e).__name__}: {e}".strip()
        traceback.print_exc()
    out["process_s"] = time.perf_counter() - t0
    Path(spec["result"]).write_text(json.dumps(out, indent=1))
    return 0 if out["ok"] else 1


# --------------------------------------------------------------------------- preparing data, model, arms


def judgetrain_cmd(cwd: Path, *words: str) -> None:
    """``judgetrain WORDS`` in a subprocess (the real command line), failing loudly. Run from
    ``cwd``, not the checkout, whose judgetrain/ folder would shadow an installed judgetrain."""
    cmd = [sys.executable, "-m", "judgetrain", *words, "--no-progress"]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{shlex.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def build_data(args) -> list[Path]:
    """TimeCatch and PRISM builds for these settings, made once under benchmarks/out/train-data/."""
    w, h = args.frame_size
    root = args.cache / "train-data" / (f"tc{args.timecatch_clips}-{w}x{h}-pr{args.prism_procedures}-{args.prism_size}-"
                                        f"{args.prism_layouts.replace(',', '')}-s{args.seed}")
    tc, prism = root / "timecatch", root / "prism"
    if not (tc / "build.json").is_file():
        from judgetrain.data_builders.synthetic import write_physics_videos

        manifest = write_physics_videos(root / "clips", args.timecatch_clips, seed=args.seed, size=(w, h),
                                        long_fraction=0.4, progress=False)
        judgetrain_cmd(root, "build", "timecatch", "--out", str(tc), "--videos", str(manifest), "--lpips-random-backbone",
                       "--seed", str(args.seed), *(["--device", "cpu"] if args.device == "cpu" else []))
    if not (prism / "build.json").is_file():
        judgetrain_cmd(root, "build", "prism", "--out", str(prism), "--synthetic", str(args.prism_procedures), "--modes", "pairwise",
                       "--layouts", args.prism_layouts, "--synthetic-size", str(args.prism_size), "--seed", str(args.seed))
    return [tc, prism]


def build_model(args) -> Path:
    """The model folder both arms load: --model as given, the tiny Qwen3-VL (--arch tiny), or
    random weights at --arch's real widths; saved with the processor's --max-pixels, once."""
    if args.model:
        return args.model
    import shutil

    from transformers import AutoImageProcessor, AutoProcessor

    from judgetrain.models.tiny import build_tiny, random_real_width

    dtype = "float32" if args.device == "cpu" else "bfloat16"
    layers = "full" if args.layers is None else f"{args.layers[0]}-{args.layers[1]}"
    folder = args.cache / "train-models" / f"{args.arch}-{layers}-{dtype}-px{args.max_pixels}-s{args.seed}"
    if folder.is_dir():
        return folder
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if args.arch == "tiny":
        build_tiny("qwen3-vl", partial, seed=args.seed)
    else:
        text, vision = args.layers or (None, None)
        model, processor = random_real_width(args.arch, text_layers=text, vision_layers=vision, seed=args.seed,
                                             dtype=dtype, device=args.device)
        model.save_pretrained(partial)
        processor.save_pretrained(partial)
        del model
    # The per-image budget is stored with the processor, so both arms read the same image sizes.
    processor = AutoProcessor.from_pretrained(partial)
    processor.image_processor = AutoImageProcessor.from_pretrained(partial, max_pixels=args.max_pixels)
    processor.save_pretrained(partial)
    partial.rename(folder)
    return folder


def bench_recipe(args, model_dir: Path, data: list[Path], out: Path) -> tuple[Path, dict]:
    """The recipe with the bench's model, data and steps (data filters dropped: the record mix is
    the bench's; no evaluation, saving or reporting); returns its path and its settings."""
    import yaml

    recipe = yaml.safe_load(args.recipe.read_text())
    # the family comes from the model folder's config (the bench may swap Qwen3-VL for Qwen2.5-VL widths)
    for key in ("tasks", "layouts", "max_frames", "mixture_weights", "max_eval_samples", "resume_from_checkpoint", "family"):
        recipe.pop(key, None)
    recipe.update(model_name_or_path=str(model_dir), datasets=[str(d) for d in data], eval_split=None,
                  output_dir=str(out / "runs" / "judgetrain"), max_steps=args.warmup_steps + args.steps,
                  eval_strategy="no", save_strategy="no", report_to="none", logging_steps=1, overwrite=True)
    recipe.pop("run_name", None)
    if args.train_records:
        recipe["max_train_samples"] = args.train_records
    if args.device == "cpu":
        recipe.update(dtype="float32", bf16=False)
    if args.schedule == "constant":  # equal training over the timed steps: no warm-up holding the rate near zero
        recipe.update(lr_scheduler_type="constant", warmup_steps=0)
    if args.lora_dropout is not None:  # LoRA dropout draws its masks per tensor shape: a padded batch and a packed
        recipe["lora_dropout"] = args.lora_dropout  # row of the same records would train on different masks
    if args.batch:
        recipe["per_device_train_batch_size"] = args.batch
    if args.effective_batch:
        recipe["effective_batch_size"] = args.effective_batch
    if args.max_length:
        recipe["max_length"] = args.max_length
    longest = longest_record(model_dir, data, args.train_records)
    if longest > (recipe.get("max_length") or 1024):
        print(f"[bench] max_length {recipe.get('max_length')} -> {longest}: the longest record, so nothing is refused or cut")
        recipe["max_length"] = longest
    path = out / "recipe.yaml"
    path.write_text(f"# bench_train's copy of {args.recipe}\n" + yaml.safe_dump(recipe, sort_keys=True))
    return path, recipe


def longest_record(model_dir: Path, data: list[Path], limit: int | None) -> int:
    """Tokens of the longest training record with its images expanded (judgetrain's own count)."""
    import datasets
    from transformers import AutoProcessor

    from judgetrain.train import record_length

    processor = AutoProcessor.from_pretrained(model_dir)
    train = datasets.concatenate_datasets([datasets.load_from_disk(str(d))["train"] for d in data])
    rows = train.select(range(min(limit, len(train)))) if limit else train
    return max(record_length(processor, row) for row in rows)


def resolved(recipe_path: Path, extra: list[str]):
    """judgetrain's own parse of the recipe (the values its trainer will use), with the
    settings judgetrain derives from it on one process of unpacked records (the gradient
    accumulation that effective_batch_size implies: the TRL arm packs nothing)."""
    from judgetrain.train import Facts, derive, parse

    model_args, data_args, training_args = parse(["--config", str(recipe_path), *extra])
    return model_args, data_args, derive(data_args, training_args, Facts(world_size=1)).training_args


def trl_spec(args, model_dir: Path, data: list[Path], recipe_path: Path, out: Path, label: str) -> dict:
    """A TRL arm: the judgetrain arm's optimizer/schedule/batch/precision/LoRA values (``trl``, the fair
    one, also its gradient checkpointing), TRL's defaults otherwise."""
    from transformers import AutoConfig

    from judgetrain.models import detect_family

    model_args, _data_args, training_args = resolved(recipe_path, shlex.split(args.judgetrain_args))
    sft = {}
    for k in SHARED_FIELDS + (FAIR_FIELDS if label == "trl" else ()):
        if hasattr(training_args, k):
            v = getattr(training_args, k)
            sft[k] = getattr(v, "value", v)
    family = detect_family(AutoConfig.from_pretrained(model_dir))
    lora = {"r": model_args.lora_r, "lora_alpha": model_args.lora_alpha, "lora_dropout": model_args.lora_dropout,
            "target_modules": model_args.lora_target_modules or family.lora_target_regex}
    return {"kind": "trl", "label": label, "model": str(model_dir), "dtype": model_args.dtype if model_args.dtype != "auto" else "float32",
            "datasets": [str(d) for d in data], "train_records": args.train_records, "sft": sft, "lora": lora,
            "attn_implementation": model_args.attn_implementation, "output_dir": str(out / "runs" / label)}


def flag_value(words: list[str], flag: str, default: bool) -> bool:
    """The last ``flag true|false`` in ``words`` (flags win over the recipe, the last over earlier ones)."""
    value = default
    for i, word in enumerate(words[:-1]):
        if word == flag:
            value = words[i + 1].lower() in ("true", "1", "yes")
    return value


def lever_args(lever: str, recipe: dict, base: list[str]) -> tuple[list[str] | None, str]:
    """The judgetrain flags that change one setting from the judgetrain arm's, and what they do (None: not here)."""
    import importlib.util

    from trl import SFTConfig

    packing = flag_value(base, "--packing", bool(recipe.get("packing")))
    padding_free = flag_value(base, "--padding_free", bool(recipe.get("padding_free")))
    if lever == "plain":
        return ["--packing", "false", "--padding_free", "false", "--vision_feature_cache", "false"], (
            "no packing, padding-free rows or vision cache: TRL's padded batches through judgetrain's trainer")
    if lever == "vision_cache":
        on = flag_value(base, "--vision_feature_cache", bool(recipe.get("vision_feature_cache")))
        return ["--vision_feature_cache", str(not on).lower()], f"vision feature cache {'off' if on else 'on'}"
    if lever == "padding_free":
        if packing:
            return None, "padding-free micro-batches: the arm packs rows already"
        return ["--padding_free", str(not padding_free).lower()], (
            "padding-free off (TRL's padded batches of the same records)" if padding_free else "padding-free micro-batches")
    if lever == "packing":
        if packing:
            return ["--packing", "false"], "best-fit packing off (padded batches of records)"
        return ["--packing", "true", "--padding_free", "false"], "best-fit packing into rows of max_length (other records a step)"
    if lever == "attn":
        now = recipe.get("attn_implementation") or "sdpa"
        other = "eager" if now != "eager" else "sdpa"
        return ["--attn_implementation", other], f"attention {other} (recipe: {now})"
    if lever == "checkpointing":
        on = bool(recipe.get("gradient_checkpointing", True))
        return ["--gradient_checkpointing", str(not on).lower()], f"gradient checkpointing {'off' if on else 'on'}"
    if lever == "batch":
        b, eff = recipe.get("per_device_train_batch_size", 8), recipe.get("effective_batch_size")
        new = 2 * b if eff is None or eff % (2 * b) == 0 else max(1, b // 2)
        extra = [] if eff else ["--gradient_accumulation_steps", str(max(1, b * recipe.get("gradient_accumulation_steps", 1) // new))]
        return ["--per_device_train_batch_size", str(new), *extra], (f"per-device batch {new} (recipe: {b}"
                                                                     + ("; rows, accumulation from records per row)" if packing else ")"))
    if lever == "compile":
        return ["--torch_compile", "true"], "torch.compile (inductor)"
    if lever == "workers":
        return ["--dataloader_num_workers", "2", "--dataloader_pin_memory", "true"], "2 dataloader workers, pinned memory"
    if lever == "group_by_length":
        flag = (["--train_sampling_strategy", "group_by_length"] if "train_sampling_strategy" in SFTConfig.__dataclass_fields__
                else ["--group_by_length", "true"])
        return [*flag, *(["--packing", "false"] if packing else [])], "length-grouped sampling" + (", packing off" if packing else "")
    if lever == "group_rows":
        if not packing:
            return None, "length-grouped packed rows: the arm does not pack"
        return ["--train_sampling_strategy", "group_by_length"], "length-grouped packed rows (rows of like length per micro-batch)"
    if lever == "liger":
        if importlib.util.find_spec("liger_kernel") is None:
            return None, "Liger kernels: liger-kernel is not installed here (pip install liger-kernel; GPU only)"
        return ["--use_liger_kernel", "true"], "Liger kernels"
    if lever == "flash_attn":
        import torch

        if not torch.cuda.is_available() or importlib.util.find_spec("flash_attn") is None:
            return None, ("flash-attention 2 (varlen path for packed and padding-free rows): needs a CUDA GPU and the "
                          "flash_attn package (pip install flash-attn --no-build-isolation)")
        return ["--attn_implementation", "flash_attention_2"], "flash-attention 2 (varlen over the rows' restarting positions)"
    raise ValueError(f"unknown lever {lever!r}; known: {', '.join(LEVERS)}")


def arm_specs(args, model_dir: Path, data: list[Path], out: Path) -> tuple[list[dict], dict, list[str]]:
    """Every arm to run (trl, judgetrain, one per lever), the recipe's settings, and levers not measured here."""
    recipe_path, recipe = bench_recipe(args, model_dir, data, out)
    base = shlex.split(args.judgetrain_args)
    specs, skipped = [], []
    specs += [trl_spec(args, model_dir, data, recipe_path, out, label) for label in TRL_ARMS if label in args.arms]
    if "judgetrain" in args.arms:
        specs.append({"kind": "judgetrain", "label": "judgetrain", "argv": ["--config", str(recipe_path), *base]})
    for lever in args.levers:
        if lever == "compile" and args.skip_compile:
            skipped.append("torch.compile on CPU (with `--levers all`; name it to run it): inductor compiles for minutes on "
                           "2 cores at the first step and again at each new batch shape; measure it on a GPU")
            continue
        flags, what = lever_args(lever, recipe, base)
        if flags is None:
            skipped.append(what)
            continue
        specs.append({"kind": "judgetrain", "label": f"judgetrain + {lever}", "what": what,
                      "argv": ["--config", str(recipe_path), *base, *flags, "--output_dir", str(out / "runs" / lever)]})
    for s in specs:
        s["threads"] = args.threads
    return specs, recipe, skipped


def run_arm(spec: dict, out: Path, timeout: int) -> dict:
    """One arm in a fresh process; its result dict (``ok`` False with the error on failure)."""
    name = spec["label"].replace(" + ", "-")
    spec_path, result = out / f"arm-{name}.json", out / f"result-{name}.json"
    spec["result"] = str(result)
    spec_path.write_text(json.dumps(spec, indent=1))
    result.unlink(missing_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    with open(out / f"log-{name}.txt", "w") as log:
        try:
            subprocess.run([sys.executable, __file__, "--child", str(spec_path)], cwd=REPO, env=env, stdout=log,
                           stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"label": spec["label"], "ok": False, "error": f"timed out after {timeout} s", "wall_s": timeout}
    got = json.loads(result.read_text()) if result.is_file() else {"label": spec["label"], "ok": False,
                                                                   "error": f"no result; see {out / f'log-{name}.txt'}"}
    got.update(wall_s=time.perf_counter() - t0, what=spec.get("what", ""))
    return got


def matmul_ceiling(device: str, dtype: str, n: int | None = None, seconds: float = 1.0) -> float:
    """FLOP/s of the best of repeated n x n torch.matmul calls (2 n^3 FLOPs each) in ``dtype`` on ``device``;
    on a CPU per second of process CPU time over the torch threads, the clock the CPU arms are timed by."""
    import torch

    threads = torch.get_num_threads()
    clock = time.perf_counter if device != "cpu" else (lambda: time.process_time() / threads)
    n = n or (8192 if device != "cpu" else 2048)
    a = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    b = torch.randn(n, n, device=device, dtype=getattr(torch, dtype))
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    best, t_end = 0.0, time.perf_counter() + seconds
    for _ in range(3):
        a @ b
    while time.perf_counter() < t_end:
        sync()
        t0 = clock()
        for _ in range(10 if device != "cpu" else 1):
            a @ b
        sync()
        best = max(best, (10 if device != "cpu" else 1) * 2 * n**3 / (clock() - t0))
    return best


# --------------------------------------------------------------------------- summary and report


def summarize(r: dict, warmup: int, ceiling: float, clock: str = "wall") -> dict:
    """An arm's figures over its timed steps (those after ``warmup``); token totals over every step.
    Rates per second of ``clock``: "wall", or "cpu", the CPU seconds of the arm's processes over its
    torch threads (the wall time it would take alone on the machine; other jobs do not inflate it)."""
    import statistics

    steps, timed = r["steps"], r["steps"][warmup:]
    wall = sum(s["seconds"] for s in timed)
    cpu = sum(s.get("cpu_seconds", 0.0) for s in timed) / r.get("threads", 1)
    sec = cpu if clock == "cpu" else wall
    real, slots = sum(s["real"] for s in timed), sum(s["slots"] for s in timed)
    losses = r["losses"][warmup:] or r["losses"]
    out = {"steps": len(steps), "timed_steps": len(timed), "timed_s": sec, "clock": clock, "wall_s": wall, "cpu_s_per_thread": cpu,
           "tokens_per_s": real / sec if sec else None, "tokens_per_wall_s": real / wall if wall else None, "records_per_s": sum(s["records"] for s in timed) / sec if sec else None,
           "padding_fraction": 1 - real / slots if slots else None,
           "real_tokens_all_steps": sum(s["real"] for s in steps), "records_all_steps": sum(s["records"] for s in steps),
           "tokens_per_record": sum(s["real"] for s in steps) / max(1, sum(s["records"] for s in steps)),
           "loss_first": r["losses"][0] if r["losses"] else None, "loss_last": r["losses"][-1] if r["losses"] else None,
           "loss_mean_timed": statistics.fmean(losses) if losses else None,
           "loss_se_timed": statistics.stdev(losses) / len(losses) ** 0.5 if len(losses) > 1 else 0.0,
           "peak_mb": r.get("peak_cuda_allocated_mb", r.get("peak_rss_mb")),
           "peak_kind": "max_memory_allocated" if "peak_cuda_allocated_mb" in r else "max RSS of the process"}
    flops = sum(s.get("flops", 0) for s in timed)
    if flops and sec and ceiling:
        out["mfu"] = flops / sec / ceiling
        out["mfu_needed"] = sum(s.get("flops_needed", 0) for s in timed) / sec / ceiling
        out["model_tflops_per_s"] = flops / sec / 1e12
    return out


def compare(trl: dict, jt: dict, trl_run: dict, jt_run: dict) -> dict:
    """Ratios and agreement checks between the two arms (summaries and raw results). The losses
    agree when their timed means differ by at most 3 standard errors of the difference (the
    step-to-step spread of both arms' losses, pooled: over the timed steps, or over every step
    when an arm has fewer than two) or 1% of TRL's loss."""
    import statistics

    n = min(trl["timed_steps"], jt["timed_steps"])
    losses = [r["losses"][-n:] if n >= 2 else r["losses"] for r in (trl_run, jt_run)]
    spread = [x - statistics.fmean(ls) for ls in losses for x in ls]
    sd = (sum(d * d for d in spread) / max(1, len(spread) - 2)) ** 0.5
    se = sd * (1 / max(1, trl["timed_steps"]) + 1 / max(1, jt["timed_steps"])) ** 0.5
    tol = max(3 * se, 0.01 * abs(trl["loss_mean_timed"]))
    return {"tokens_per_s_ratio": jt["tokens_per_s"] / trl["tokens_per_s"],
            "records_per_s_ratio": jt["records_per_s"] / trl["records_per_s"],
            "peak_memory_ratio": jt["peak_mb"] / trl["peak_mb"] if trl["peak_mb"] else None,
            "loss_difference": jt["loss_mean_timed"] - trl["loss_mean_timed"], "loss_tolerance": tol,
            "losses_agree": abs(jt["loss_mean_timed"] - trl["loss_mean_timed"]) <= tol,
            "same_batches": [(s["records"], s["real"]) for s in trl_run["steps"]] == [(s["records"], s["real"]) for s in jt_run["steps"]],
            "adapter": adapter_distance(Path(jt_run["adapter"]), Path(trl_run["adapter"]))
            if jt_run.get("adapter") and trl_run.get("adapter") else None}


def distance_note(arm: dict, base: dict | None) -> str:
    """"; adapter update X from the judgetrain arm's" for a lever arm (equal training shows as ~1e-6)."""
    if not base or not arm.get("adapter") or not base.get("adapter"):
        return ""
    d = adapter_distance(Path(arm["adapter"]), Path(base["adapter"]))
    arm["adapter_distance_from_judgetrain"] = d
    return f"; update {d['update_distance']:.1e} from the judgetrain arm's" if "update_distance" in d else ""


def settings_table(results: list[dict]) -> str:
    """Every arm's settings as its trainer read them, side by side (a markdown table, arms as columns)."""
    arms = [r for r in results if r.get("ok") and r.get("settings")]
    keys = list(dict.fromkeys(k for r in arms for k in r["settings"]))
    lines = ["| setting | " + " | ".join(r["label"] for r in arms) + " |", "| --- |" + " --- |" * len(arms)]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(str(r["settings"].get(k, "–")) for r in arms) + " |")
    return "\n".join(lines)


def table(rows: list[tuple[str, dict, str]], base: dict | None) -> str:
    """A markdown table of arms (label, summary, note), with ratios against ``base``."""
    cpu = rows and rows[0][1]["clock"] == "cpu"
    lines = [f"| arm | real tokens/s{' (CPU time)' if cpu else ''} | ratio | {'(wall) | ' if cpu else ''}records/s | padding "
             "| peak MB | loss (timed mean ± se) | MFU (needed) | note |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if cpu else "")]
    for label, s, note in rows:
        ratio = f"{s['tokens_per_s'] / base['tokens_per_s']:.2f}×" if base and s.get("tokens_per_s") else "–"
        mfu = f"{100 * s['mfu']:.1f}% ({100 * s['mfu_needed']:.1f}%)" if "mfu" in s else "–"
        wall = f"{s['tokens_per_wall_s']:.1f} | " if cpu else ""
        lines.append(f"| {label} | {s['tokens_per_s']:.1f} | {ratio} | {wall}{s['records_per_s']:.3f} | {100 * s['padding_fraction']:.1f}% "
                     f"| {s['peak_mb']:.0f} | {s['loss_mean_timed']:.4f} ± {s['loss_se_timed']:.4f} | {mfu} | {note} |")
    return "\n".join(lines)


def report(results: list[dict], args, ceiling: float, skipped: list[str], info: dict) -> dict:
    """Print the tables and checks; return everything for the JSON file."""
    by = {r["label"]: r for r in results}
    summaries = {r["label"]: summarize(r, args.warmup_steps, ceiling, args.clock) for r in results if r.get("ok")}
    failed = {r["label"]: r.get("error", "?") for r in results if not r.get("ok")}
    out = {"info": info, "ceiling_flops_per_s": ceiling, "mfu_convention": MFU_CONVENTION, "arms": summaries,
           "failed": failed, "not_measured": skipped}
    print(f"\n## bench_train: {info['model']} on {info['device']}, {info['records']} records, "
          f"{args.warmup_steps} warm-up + {args.steps} timed optimizer steps per arm\n")
    notes = {"trl": "fair baseline: the judgetrain arm's settings", "trl-defaults": "TRL's defaults (gradient checkpointing on)"}
    base_rows = [(k, summaries[k], notes.get(k, "")) for k in (*TRL_ARMS, "judgetrain") if k in summaries]
    print(table(base_rows, summaries.get("trl")))
    print("\n### settings, as each trainer read them\n")
    print(settings_table(results))
    out["comparison"] = {}
    for base in TRL_ARMS:
        if base not in summaries or "judgetrain" not in summaries:
            continue
        c = compare(summaries[base], summaries["judgetrain"], by[base], by["judgetrain"])
        out["comparison"][base] = c
        print(f"\njudgetrain / {base}: {c['tokens_per_s_ratio']:.2f}× real tokens/s, {c['records_per_s_ratio']:.2f}× records/s, "
              f"peak memory {c['peak_memory_ratio']:.2f}×; same records every step: {'yes' if c['same_batches'] else 'NO'}; "
              f"timed-mean losses differ by {c['loss_difference']:+.4f} (tolerance {c['loss_tolerance']:.4f} = max(3 se of "
              f"the difference from the pooled step-to-step spread, 1% of TRL's loss)): {'agree' if c['losses_agree'] else 'DISAGREE'}")
        a = c.get("adapter")
        if a and "update_distance" in a:
            print(f"  adapters ({a['compared']} tensors): update distance {a['update_distance']:.2e} of TRL's update "
                  f"(norm ratio {a['update_norm_ratio']:.4f}); initial weights {a['init_distance']:.2e} apart")
    for r in results:
        if r.get("vision_cache"):
            v = r["vision_cache"]
            print(f"- {r['label']}: vision feature cache encoded {v.get('encoded')} of {v.get('seen')} images shown")
    lever_rows = [(k, s, by[k].get("what", "") + distance_note(by[k], by.get("judgetrain")))
                  for k, s in summaries.items() if k.startswith("judgetrain + ")]
    if lever_rows and "judgetrain" in summaries:
        print("\n### levers (one setting of the judgetrain arm changed each; ratio against the judgetrain arm)\n")
        print(table([("judgetrain", summaries["judgetrain"], "")] + lever_rows, summaries["judgetrain"]))
    for what in skipped:
        print(f"- not measured: {what}")
    for label, err in failed.items():
        print(f"- {label} FAILED: {err.splitlines()[0][:300] if err else '?'}")
    clock = ("per second of CPU time over the torch threads (process + dataloader workers), which other jobs on a "
             "shared machine do not inflate; (wall): per wall second") if args.clock == "cpu" else "per wall second"
    print(f"\nrates: {clock}. ceiling: {ceiling / 1e12:.3f} TFLOP/s ({info['ceiling_kind']}, same clock). {MFU_CONVENTION}")
    return out


def yaml_value(path: Path, key: str):
    """One top-level value of a recipe file (None when absent)."""
    import yaml

    return (yaml.safe_load(path.read_text()) or {}).get(key)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--arch", default="qwen3-vl-2b", help="real widths (qwen3-vl-2b, qwen3-vl-8b, qwen2.5-vl-7b) or tiny")
    p.add_argument("--layers", help="TEXT,VISION depth, or 'full' (default: CPU 2,1, which keeps the ViT's share of "
                                    "the FLOPs at the full model's, about a third; CUDA full)")
    p.add_argument("--model", type=Path, help="a model folder instead of --arch (real checkpoint or earlier build)")
    p.add_argument("--recipe", type=Path, default=REPO / "recipes/qwen3vl-2b/timecatch-lora.yaml",
                   help="the judgetrain arm's recipe (default: the Qwen3-VL-2B one, which packs)")
    p.add_argument("--judgetrain-args", default=DEFAULT_JUDGETRAIN_ARGS,
                   help=f"extra judgetrain flags (default: {DEFAULT_JUDGETRAIN_ARGS})")
    p.add_argument("--arms", default="trl,trl-defaults,judgetrain", help="which of trl, trl-defaults, judgetrain to run")
    p.add_argument("--schedule", choices=["constant", "recipe"], default="constant",
                   help="learning-rate schedule of every arm: constant (default; equal training over the timed steps) "
                        "or the recipe's (its warm-up keeps the rate near zero over a few steps)")
    p.add_argument("--lora-dropout", type=float, default=0.0,
                   help="LoRA dropout of every arm (default 0: dropout draws its masks per tensor shape, so a padded "
                        "batch and a packed row of the same records would train differently; -1: the recipe's)")
    p.add_argument("--levers", default="", help=f"comma list of {', '.join(LEVERS)}, or all")
    p.add_argument("--steps", type=int, help="timed optimizer steps per arm (default: the rest of --epochs)")
    p.add_argument("--epochs", type=int, default=3, help="passes over the records, warm-up included, when --steps is not "
                   "given (default 3, as the recipes train: the vision feature cache pays from the second)")
    p.add_argument("--warmup-steps", type=int, help="untimed optimizer steps first (default: CPU 1, CUDA 2)")
    p.add_argument("--batch", type=int, help="per-device batch in records (default: CPU 2, CUDA 4: micro-batches of "
                                             "several records of mixed lengths, where padding exists)")
    p.add_argument("--effective-batch", type=int, help="effective batch in records (default: CPU 4, CUDA the recipe's)")
    p.add_argument("--max-length", type=int, help="max_length, the packed row length (default: the recipe's; CPU: 1024, "
                                                  "as CPU-size records are about a quarter of 448² ones)")
    p.add_argument("--train-records", type=int, help="use the first N training records of the mix (default: CPU 24, "
                   "six steps an epoch; CUDA all)")
    p.add_argument("--timecatch-clips", type=int, default=8)
    p.add_argument("--prism-procedures", type=int, default=2)
    p.add_argument("--prism-layouts", default="P0,P5,P6")
    p.add_argument("--frame-size", default="160x120", help="TimeCatch clip size WxH (default: the builder's 160x120)")
    p.add_argument("--prism-size", type=int, default=128, help="PRISM step image side (default: the builder's 128)")
    p.add_argument("--max-pixels", type=int, default=448 * 448, help="processor's per-image pixel budget (default 448²)")
    p.add_argument("--threads", type=int, help="torch threads per arm (default: torch's)")
    p.add_argument("--seed", type=int, default=0, help="data and weight seed (training seed: the recipe's)")
    p.add_argument("--clock", choices=["wall", "cpu"], help="what the rates are per second of (default: CPU cpu, the arms' "
                   "CPU time over their threads, which other jobs on a shared machine do not inflate; CUDA wall)")
    p.add_argument("--child-timeout", type=int, default=1800)
    p.add_argument("--cache", type=Path, default=OUT, help="where data and model builds are kept (default benchmarks/out)")
    p.add_argument("--out", type=Path, default=OUT / "bench_train.json")
    args = p.parse_args(argv)
    if args.child:
        return args
    size = [int(x) for x in args.frame_size.lower().split("x")]
    args.frame_size = (size[0], size[-1])  # "448" is 448x448
    cpu = args.device == "cpu"
    layers = args.layers or ("2,1" if cpu else "full")
    args.layers = None if layers == "full" else tuple(int(x) for x in layers.split(","))
    args.clock = args.clock or ("cpu" if cpu else "wall")
    args.warmup_steps = args.warmup_steps if args.warmup_steps is not None else (1 if cpu else 2)
    args.arms = [a for a in args.arms.split(",") if a]
    explicit_compile = "compile" in args.levers.split(",")
    args.levers = list(LEVERS) if args.levers == "all" else [x for x in args.levers.split(",") if x]
    bad = [x for x in args.levers if x not in LEVERS]
    if bad:
        p.error(f"--levers: unknown {bad}; known: {', '.join(LEVERS)} or all")
    if args.device == "cpu":
        # Scaled to a CPU: a few records a step, rows of about two CPU-size records (as 4096 holds about two
        # 448² ones on a GPU), and no torch.compile in "all" (inductor's compile on 2 cores outlasts the run).
        args.effective_batch = args.effective_batch or 4
        args.max_length = args.max_length or 1024
    args.batch = args.batch or (2 if cpu else 4)
    args.train_records = args.train_records or (24 if cpu else None)
    args.lora_dropout = None if args.lora_dropout is not None and args.lora_dropout < 0 else args.lora_dropout
    args.skip_compile = args.device == "cpu" and "compile" in args.levers and not explicit_compile
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        return child(args.child)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    work = args.out.parent / (args.out.stem + ".work")
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = build_data(args)
    import datasets

    n_records = sum(len(datasets.load_from_disk(str(d))["train"]) for d in data)
    n_records = min(n_records, args.train_records or n_records)
    model_dir = build_model(args)
    if args.steps is None:  # --epochs passes over the records, the warm-up steps included
        per_step = args.effective_batch or yaml_value(args.recipe, "effective_batch_size") or args.batch
        args.steps = max(1, args.epochs * -(-n_records // per_step) - args.warmup_steps)
    print(f"[bench] data {', '.join(map(str, data))}; model {model_dir} ({time.perf_counter() - t0:.0f} s)", flush=True)
    specs, recipe, skipped = arm_specs(args, model_dir, data, work)
    dtype = "float32" if args.device == "cpu" else "bfloat16"
    ceiling = matmul_ceiling(args.device, dtype, seconds=2.0)
    results = []
    for spec in specs:
        t1 = time.perf_counter()
        results.append(run_arm(spec, work, args.child_timeout))
        status = "ok" if results[-1].get("ok") else f"FAILED: {results[-1].get('error', '')[:200]}"
        args.out.write_text(json.dumps({"partial": True, "results": results}, default=str))  # kept if a time limit stops the run
        print(f"[bench] arm {spec['label']}: {time.perf_counter() - t1:.0f} s, {status}", flush=True)
    ceiling = max(ceiling, matmul_ceiling(args.device, dtype, seconds=2.0))  # the better of before and after the arms
    depth = "" if args.model or args.arch == "tiny" else (" (full depth)" if args.layers is None else
                                                           f" ({args.layers[0]}+{args.layers[1]} layers)")
    info = {"model": f"{args.model or args.arch}{depth}",
            "device": torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads",
            "records": n_records, "recipe": str(args.recipe),
            "judgetrain_args": args.judgetrain_args, "ceiling_kind": f"{dtype} torch.matmul", "model_dir": str(model_dir),
            "versions": {m: __import__(m).__version__ for m in ("torch", "transformers", "trl", "peft")},
            "loadavg": os.getloadavg(), "total_s": time.perf_counter() - t0, "command": shlex.join(sys.argv)}
    out = report(results, args, ceiling, skipped, info)
    out["results"] = results
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str))
    print(f"\n[bench] {time.perf_counter() - t0:.0f} s in all; results in {args.out}")
    return 0 if not out["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
