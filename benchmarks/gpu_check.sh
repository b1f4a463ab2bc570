#!/usr/bin/env bash
# The GPU check of issue 16, in one command, from the repository root on a machine with one CUDA GPU:
#
#     bash benchmarks/gpu_check.sh
#
# 1. installs what the machine lacks from wheels carried in benchmarks/out/wheels/ (no network:
#    pip --no-index), and judgetrain itself from this checkout (--no-deps);
# 2. training throughput, three arms side by side (plain TRL configured fairly: the judgetrain
#    arm's batch, schedule and gradient checkpointing; TRL with its defaults; `judgetrain train` on
#    recipes/qwen3vl-2b/timecatch-lora.yaml with padding-free micro-batches and the vision feature
#    cache), at Qwen3-VL-2B's real widths and full depth (28 + 24 layers, random weights),
#    TimeCatch 4-16 frames and PRISM pairs at 448x448, bf16, constant learning rate, the same
#    records every optimizer step: real tokens/s, padding, peak memory, loss, the adapters' distance,
#    MFU against a bf16 matmul ceiling measured in the same run; plus the levers in $LEVERS on the
#    judgetrain arm (benchmarks/bench_train.py);
# 3. scoring: batched vs one at a time, shared prefix vs full passes (benchmarks/bench_scoring.py)
#    on the same 2B folder;
# 4. PhaseFusion cost at Qwen3-VL-8B's real widths, full depth (benchmarks/bench_phasefusion.py);
# 5. evaluation cost at Qwen2.5-VL-7B and Qwen3-VL-8B widths, full depth, real vocabularies, 448 px
#    frames (benchmarks/bench_eval.py: batched vs one at a time, length-sorted batches, frames shared
#    across records, orderings, PhaseFusion, LPIPS;
#    EVAL_LAYERS sets the depth, 1 when DEVICE=cpu).
#
# About 8 minutes on an H200, plus up to 4 for part 5 (each part has its own time limit, so one
# that hangs cannot eat the rest). Everything is printed and written under $OUT (when set; else
# benchmarks/out/gpu-check/):
# gpu_check.log, bench_train.json, scoring.json, phasefusion.json, bench_eval.json.
#
# Wheels, fetched beforehand on a machine with network (pure-Python, any platform; the TRL version
# is the one judgetrain is tested with, `pip show trl`):
#
#     .venv/bin/pip download trl==1.16.0 liger-kernel --no-deps -d benchmarks/out/wheels
#
# and, for any other module the import check below reports missing (datasets, av, lpips, ...):
#     .venv/bin/pip download PACKAGE --no-deps --only-binary=:all: --python-version 3.11 \
#         --platform manylinux2014_x86_64 -d benchmarks/out/wheels
# DeepSpeed is not needed here (one GPU, no ZeRO) and ships as an sdist that must be compiled
# against the machine's torch, so it is left out. Carry the folder with the checkout (it is git-ignored).
#
# Settings (environment): DEVICE (cuda), ARCH (qwen3-vl-2b), LAYERS (full), SIZE (448: frame and step
# image side), CLIPS (12 TimeCatch clips), PROCS (3 PRISM procedures), EPOCHS (2 passes over the records,
# warm-up included; STEPS instead sets the timed steps), WARMUP (2),
# LEVERS (vision_cache,padding_free,packing,checkpointing,liger,flash_attn: the last two where installed; "all" adds attention, batch, torch.compile,
# dataloader workers and length grouping, about 6 more minutes: raise TRAIN_TIMEOUT), PF_ARCH (qwen3-vl-8b),
# WHEELS (benchmarks/out/wheels), PYTHON (python).
# `DEVICE=cpu ARCH=tiny SIZE=64 CLIPS=2 PROCS=2 STEPS=1 WARMUP=1 LEVERS=packing PF_ARCH= WHEELS=/nonexistent \
#  PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh`
# runs the same steps on a CPU in a couple of minutes, to check the script itself.

set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
case $PY in /*) ;; */*) PY=$PWD/$PY ;; esac  # a relative path keeps working from /tmp below
DEVICE=${DEVICE:-cuda}
ARCH=${ARCH:-qwen3-vl-2b}
LAYERS=${LAYERS:-full}
SIZE=${SIZE:-448}
CLIPS=${CLIPS:-12}
PROCS=${PROCS:-3}
EPOCHS=${EPOCHS:-2}
WARMUP=${WARMUP:-2}
LEVERS=${LEVERS:-vision_cache,padding_free,packing,checkpointing,liger,flash_attn}
PF_ARCH=${PF_ARCH-qwen3-vl-8b}
WHEELS=${WHEELS:-benchmarks/out/wheels}
RESULTS=${OUT:-benchmarks/out/gpu-check}
mkdir -p "$RESULTS"
exec > >(tee -a "$RESULTS/gpu_check.log") 2>&1
T0=$(date +%s)
section() { echo; echo "=== $1 (at $(( $(date +%s) - T0 )) s)"; }
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled PYTHONUNBUFFERED=1

section "machine"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$PY -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda, torch.cuda.is_available())"

section "install: wheels from $WHEELS, then judgetrain (--no-deps)"
shopt -s nullglob
wheels=("$WHEELS"/*.whl "$WHEELS"/*.tar.gz)
if [ ${#wheels[@]} -gt 0 ]; then
    $PY -m pip install -q --no-index --no-deps "${wheels[@]}" || echo "warning: pip could not install every wheel"
else
    echo "no wheels in $WHEELS (see the header of this script)"
fi
# checked from outside the checkout, whose judgetrain/ folder would shadow the installed package;
# editable, so that judgetrain.data_builders and judgetrain.eval map onto data_builders/ and eval/
if ! (cd /tmp && $PY -c "import judgetrain.data_builders, judgetrain.eval") 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-build-isolation -e . || echo "warning: judgetrain did not install"
fi
missing=$(cd /tmp && $PY - <<'EOF'
import importlib.util
mods = ["torch", "transformers", "trl", "peft", "accelerate", "datasets", "safetensors", "av", "lpips", "PIL", "numpy",
        "scipy", "yaml", "tqdm", "rich", "psutil", "judgetrain.data_builders", "liger_kernel"]
print(" ".join(m for m in mods if importlib.util.find_spec(m.split(".")[0]) is None
               or (m == "judgetrain.data_builders" and importlib.util.find_spec(m) is None)))
EOF
)
$PY -c "import transformers, peft, accelerate; print('transformers', transformers.__version__, '| peft', peft.__version__, '| accelerate', accelerate.__version__)"
$PY -c "import trl; print('trl', trl.__version__)" 2>/dev/null
echo "missing modules: ${missing:-none}"

section "training throughput: plain TRL (fair, defaults) vs judgetrain train ($ARCH, layers $LAYERS, ${SIZE}x${SIZE} images, levers $LEVERS)"
timeout ${TRAIN_TIMEOUT:-420} $PY benchmarks/bench_train.py --device "$DEVICE" --arch "$ARCH" --layers "$LAYERS" \
    --frame-size "$SIZE" --prism-size "$SIZE" --max-pixels $(( SIZE * SIZE )) --timecatch-clips "$CLIPS" \
    --prism-procedures "$PROCS" --epochs "$EPOCHS" ${STEPS:+--steps "$STEPS"} --warmup-steps "$WARMUP" --levers "$LEVERS" \
    --out "$RESULTS/bench_train.json"
echo "bench_train exit code: $?"
MODEL=$($PY -c "import json, sys; print(json.load(open(sys.argv[1]))['info']['model_dir'])" "$RESULTS/bench_train.json" 2>/dev/null)

section "scoring: batched vs one at a time, prefix reuse ($ARCH folder ${MODEL:-none})"
DTYPE=$([ "$DEVICE" = cpu ] && echo float32 || echo bfloat16)
if [ -n "$MODEL" ]; then
    timeout ${SCORING_TIMEOUT:-60} $PY benchmarks/bench_scoring.py --model "$MODEL" --device "$DEVICE" --dtype "$DTYPE" \
        --out "$RESULTS/scoring.json"
    echo "bench_scoring exit code: $?"
else
    echo "skipped: no model folder from the training benchmark"
fi

section "PhaseFusion cost (${PF_ARCH:-skipped}, full depth)"
if [ -n "$PF_ARCH" ]; then
    timeout ${PF_TIMEOUT:-100} $PY benchmarks/bench_phasefusion.py --arch "$PF_ARCH" --device "$DEVICE" --dtype "$DTYPE" \
        --repeats 3 --out "$RESULTS/phasefusion.json"
    echo "bench_phasefusion exit code: $?"
fi

section "evaluation cost at real widths (qwen2.5-vl-7b, qwen3-vl-8b; decoder / ViT layers ${EVAL_LAYERS:=$([ "$DEVICE" = cpu ] && echo 1 || echo full)})"
EVAL_SIZE=$([ "$DEVICE" = cpu ] && echo 96 || echo 448)
timeout ${EVAL_TIMEOUT:-240} $PY benchmarks/bench_eval.py --device "$DEVICE" --dtype "$DTYPE" --layers "$EVAL_LAYERS" \
    --vision-layers "$EVAL_LAYERS" --frame-size "$EVAL_SIZE" $([ "$DEVICE" = cpu ] && echo --items 6 --timecatch-frames 2,4 --lpips-pairs 4 || echo --real-vocab --items 32 --batch-size 8 --repeats 3 --lpips-pairs 64) \
    --out "$RESULTS/bench_eval.json"
echo "bench_eval exit code: $?"

section "done: results in $RESULTS"
ls -l "$RESULTS"
