#!/usr/bin/env bash
# Prepared, not run (session 27, l4vis_s27): issue 19, Llama 4's vision model on one GPU. What one to 48 tiles
# of 336 pixels add to what a bf16 training step keeps after its forward, to its peak and to its time, with
# Scout's vision model before a small text model (tools/oracle/cuda_llama4vis.py; 5 cases and 2 checkpointed, 4 repeats each,
# about a minute on one H200 after the model is built). The CPU oracle (llama4vis.py) checked the saved set
# to the byte for a tiny config; this checks the CUDA kernels' saves (SDPA's flash or efficient kernel) and
# the tower's time per tile at Scout's size. Needs torch and transformers >= 5.0 on the device.
#   mkdir -p .oracle && cp tools/oracle/cuda_llama4vis.py tools/oracle/llama4vis_tiles.py tools/oracle/cuda_run_l4vis.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_l4vis.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/l4vis.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$log" 2>&1
timeout 240 python3 "$HERE/cuda_llama4vis.py" --out "$OUT/llama4vis.jsonl" --seq 8192 --repeat 4 2>&1 | grep -v -i warn >> "$log"
ls -la "$OUT" >> "$log"
