#!/usr/bin/env bash
# One prepared check of the GPU path: a short ACT training under `raycluster train --cluster.use_gpu=true`
# (NCCL process group, mixed precision) and the same under plain LeRobot (torchrun), samples/s of both;
# then, where LeRobot main's wheel is at hand (../shared/wheels or .whl/lerobot-main/), FSDP2 over every GPU
# (--cluster.sharding=fsdp, 2+ GPUs) and HSDP (2 replicas x 2 shards, 4+ GPUs) through raycluster on it.
#
#   bash bench/gpu_check.sh            # on a GPU machine (wheels for ray/lerobot in .whl/ are installed first)
#   bash bench/gpu_check.sh --cpu      # the reduced CPU form that CI runs, so the script keeps working
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3)}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} RAY_AUTH_MODE=disabled WANDB_MODE=disabled HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

if [ "${1:-}" = "--cpu" ] || ! "$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  # Small on CPU: this form only proves that the script and its three runs work end to end.
  mode=cpu steps=${STEPS:-4} device=cpu use_gpu=false precision=no nproc=1 batch=4 loaders=0
  dataset_size="--episodes 2 --frames 40"
else
  mode=gpu steps=${STEPS:-300} device=cuda use_gpu=true precision=bf16 batch=32 loaders=2
  dataset_size="--episodes 8 --frames 100 --image-size 96"
  nproc=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi
work=${WORK:-$(mktemp -d)}
echo "gpu_check: mode=$mode steps=$steps workers=$nproc work=$work"
"$PY" -m raycluster dataset synthetic --root "$work/dataset" $dataset_size >/dev/null
tiny=$("$PY" -c 'from raycluster.demo import TINY_ACT; print(" ".join(a for a in TINY_ACT if "device" not in a))')
flags="--dataset.repo_id=raycluster/synthetic --dataset.root=$work/dataset $tiny --policy.device=$device
  --steps=$steps --batch_size=$batch --num_workers=$loaders --seed=1 --save_freq=$steps --log_freq=$steps"

# Same precision on both sides for the ratio: LeRobot's own use_amp rule.
[ $mode = gpu ] && amp="--policy.use_amp=true" || amp=""
t0=$EPOCHREALTIME
"$PY" -m torch.distributed.run --nproc-per-node="$nproc" bench/plain_lerobot.py $flags $amp \
  --output_dir="$work/plain" >"$work/plain.log" 2>&1 || { tail -30 "$work/plain.log"; exit 1; }
t1=$EPOCHREALTIME
"$PY" -m raycluster train --cluster.num_workers="$nproc" --cluster.use_gpu=$use_gpu $flags $amp \
  --output_dir="$work/ray" >"$work/ray.log" 2>&1 || { tail -30 "$work/ray.log"; exit 1; }
t2=$EPOCHREALTIME
# The bf16 path (ACT has no dtype flag, so raycluster's override sets it) over NCCL. On CPU the override is
# `no`, the run above's own precision: that run stands for it (a third cluster would prove nothing more).
if [ $mode = gpu ]; then
  "$PY" -m raycluster train --cluster.num_workers="$nproc" --cluster.use_gpu=$use_gpu \
    --cluster.mixed_precision=$precision $flags --steps=$(( steps < 20 ? steps : 20 )) \
    --output_dir="$work/ray_bf16" >"$work/ray_bf16.log" 2>&1 || { tail -30 "$work/ray_bf16.log"; exit 1; }
else
  ln -s ray "$work/ray_bf16"
fi

"$PY" - "$work" "$t0" "$t1" "$t2" <<'PYEOF'
import json, sys
from pathlib import Path
work, (t0, t1, t2) = Path(sys.argv[1]), map(float, sys.argv[2:5])
plain_wall, ray_wall = t1 - t0, t2 - t1
log = (work / "plain.log").read_text()
plain = json.loads(log.split("BENCH ", 1)[1].splitlines()[0])
ray = json.loads((work / "ray" / "raycluster_summary.json").read_text())
bf16 = json.loads((work / "ray_bf16" / "raycluster_summary.json").read_text())
print(f"{'run':<28}{'samples/s':>12}{'wall s':>10}  backend  precision")
print(f"{'plain torchrun lerobot':<28}{plain['samples_per_s']:>12.1f}{plain_wall:>10.1f}")
print(f"{'raycluster train':<28}{ray['samples_per_s']:>12.1f}{ray_wall:>10.1f}  {ray['backend']:<8} {ray['mixed_precision']}")
print(f"{'raycluster train (override)':<28}{bf16['samples_per_s'] or 0:>12.1f}{'':>10}  {bf16['backend']:<8} {bf16['mixed_precision']}")
print(f"ratio raycluster/plain samples/s: {ray['samples_per_s'] / plain['samples_per_s']:.3f}")
assert bf16["final_step"] == bf16["steps"], bf16
PYEOF

# LeRobot main: sharded training, which accelerate allows on GPUs only (on CPU it refuses --parallelism.dp_shard).
main_wheel=$(ls ../shared/wheels/lerobot-*.whl .whl/lerobot-main/lerobot-*.whl 2>/dev/null | tail -1 || true)
if [ $mode = cpu ] || [ -z "$main_wheel" ]; then
  [ -n "$main_wheel" ] && why="CPU: accelerate shards on GPUs only" || why="no LeRobot main wheel"
  echo "lerobot main: FSDP/HSDP skipped ($why)"
  exit 0
fi
"$PY" -m pip install -q --no-index --no-deps --target "$work/lerobot-main" "$main_wheel"
main_flags="$flags --steps=$(( steps < 50 ? steps : 50 )) --accelerator.mixed_precision=bf16"
sharded() {  # name, then raycluster train flags
  local name=$1; shift
  PYTHONPATH="$work/lerobot-main:$PYTHONPATH" "$PY" -m raycluster train --cluster.use_gpu=true $main_flags "$@" \
    --output_dir="$work/$name" >"$work/$name.log" 2>&1 || { tail -30 "$work/$name.log"; exit 1; }
  "$PY" -c 'import json, sys; s = json.load(open(sys.argv[1])); assert s["final_step"] == s["steps"], s
print(f"lerobot main {sys.argv[2]:<8} {s[\"samples_per_s\"] or 0:>10.1f} samples/s  {s[\"backend\"]} {s[\"mixed_precision\"]}")' \
    "$work/$name/raycluster_summary.json" "$name"
  ls "$work/$name/checkpoints/last/pretrained_model/"
}
if [ "$nproc" -ge 2 ]; then
  sharded fsdp --cluster.num_workers="$nproc" --cluster.sharding=fsdp
else
  echo "lerobot main: FSDP needs 2 GPUs, this machine has $nproc"
fi
if [ "$nproc" -ge 4 ]; then
  sharded hsdp --cluster.num_workers=4 --parallelism.dp_replicate=2 --parallelism.dp_shard=2
else
  echo "lerobot main: HSDP (2 x 2) needs 4 GPUs, this machine has $nproc"
fi
