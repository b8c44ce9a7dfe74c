#!/usr/bin/env bash
# The GPU path, measured in about six minutes on one GPU (a second GPU adds a 2-process torchrun). Stages run in
# order of what they decide, each under its own time limit and all under GPU_CHECK_BUDGET seconds (default 420), so
# a slow stage is cut short and reported instead of eating the others' time:
#   1. throughput of `base` without and with torch.compile: s/step, samples/s, FLOPs, MFU vs the bf16 peak, phase
#      split, peak memory, compile time (the MFU target is `base`, bf16, compiled);
#   2. a real `small` run on the GPU (workers, pinned copies, evaluation, a profiler trace), then `jepa doctor` on it;
#   3. the diagnostics overhead on `base` (default cadences vs off, measured over whole 500-step cadence windows);
#   4. `jepa check --preset base`: masks, parameters, loader and step speed, memory, projection, bottleneck;
#   5. throughput of `small` without and with compile;
#   6. with two or more GPUs, `small` under torchrun on 2 processes for 60 steps, checked with `jepa doctor`.
# Every figure is printed, and also kept under $OUT (default gpu_check_out/) with the device and the commands.
#
#     bash benchmarks/gpu_check.sh            # from the repository root, with the package installed
#
# Record what it prints in benchmarks/RESULTS.md (device, command, table).
set -uo pipefail

OUT="${OUT:-gpu_check_out}"
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: > "$LOG"
STATUS=0
DEADLINE=$((SECONDS + ${GPU_CHECK_BUDGET:-420}))

run() {  # run LIMIT_SECONDS NAME COMMAND...: print and log the command and everything it prints
  local limit="$1" name="$2"
  shift 2
  local left=$((DEADLINE - SECONDS))
  if [ "$left" -lt 20 ]; then
    echo "=== $name: skipped, the budget is spent ($left s left)" | tee -a "$LOG"
    STATUS=1
    return
  fi
  if [ "$limit" -gt "$left" ]; then limit=$left; fi
  echo "=== $name: $*" | tee -a "$LOG"
  local start=$SECONDS
  timeout --signal=TERM --kill-after=10 "$limit" "$@" 2>&1 | tee "$OUT/$name.txt" | tee -a "$LOG"
  local code=${PIPESTATUS[0]}
  echo "=== $name: exit $code after $((SECONDS - start)) s" | tee -a "$LOG"
  if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then STATUS=1; fi  # jepa check exits 1 for "not feasible": a result
}

if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device: this script measures the GPU path only" | tee -a "$LOG"
  exit 2
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
} | tee -a "$LOG"
GPUS=$(python -c "import torch; print(torch.cuda.device_count())")

RUNS="${TMPDIR:-/tmp}/gpu_check_runs"
rm -rf "$RUNS"
run 200 throughput_base python benchmarks/throughput.py --presets base --compile both --steps 30 --warmup 3
run 100 train_small jepa train --preset small --quiet --name gpu1 --profile-steps 40:42 \
  --set optim.steps=120 --set optim.warmup_steps=20 --set data.num_train=8192 --set data.num_heldout=1024 \
  --set diagnostics.eval_every_steps=120 --set logging.checkpoint_every_steps=60 --set "logging.runs_dir=\"$RUNS\""
run 20 doctor_small jepa doctor "$RUNS/gpu1"
ls -la "$RUNS/gpu1" "$RUNS/gpu1/traces" 2>&1 | tee -a "$LOG"
run 150 diagnostics_base python benchmarks/diagnostics_overhead.py --presets base --steps 10 --rounds 2 --warmup 5 \
  --max-window 500 --min-rounds 2 --max-rounds 2
run 60 check_base jepa check --preset base --steps 5 --loader-batches 8
run 120 throughput_small python benchmarks/throughput.py --presets small --compile both --steps 30 --warmup 3
if [ "$GPUS" -ge 2 ]; then
  run 90 torchrun_2gpu torchrun --standalone --nproc_per_node=2 -m jepa_core.train --preset small --quiet \
    --name ddp2 --set optim.steps=60 --set optim.warmup_steps=10 --set diagnostics.eval_every_steps=60 \
    --set logging.checkpoint_every_steps=60 --set "logging.runs_dir=\"$RUNS\""
  run 20 torchrun_doctor jepa doctor "$RUNS/ddp2"
else
  echo "=== torchrun_2gpu: skipped ($GPUS GPU)" | tee -a "$LOG"
fi
echo "figures and commands: $LOG" | tee -a "$LOG"
exit $STATUS
