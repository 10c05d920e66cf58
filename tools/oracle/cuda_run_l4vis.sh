#!/usr/bin/env bash
# Prepared, not run (session 27, l4vis_s27): issue 19, Llama 4's vision model on one GPU. What one to 48 tiles
# of 336 pixels add to what a bf16 training step keeps after its forward, to its peak and to its time, with
# Scout's vision model before a small text model (tools/oracle/cuda_llama4vis.py; 5 cases and 2 checkpointed, 4 repeats each,
# about a minute on one H200 after the model is built). The CPU oracle (llama4vis.py) checked the saved set
# to the byte for a tiny config; this checks the CUDA kernels' saves (SDPA's flash or efficient kernel) and
# the tower's time per tile at Scout's size. Needs torch and transformers >= 5.0 on the device.
# memsh before the run (hf_config of the llama4vis_config.json the script writes, bf16, seq 8192, H200): the
# images add to the saved activations 895,763,120 B (1 x 336^2, 1 tile), 4,478,782,832 (672^2, 5 tiles),
# 14,332,087,040 (1080 x 1920, 16 tiles), 42,996,244,736 (3 of them, 48); checkpointed 65,529,360 (1 tile) and
# 3,145,024,256 (48); the measured after-forward delta adds the bf16 pixels (677,376 B a tile). Step time:
# +7.9 ms a tile, +10 ms checkpointed (forward, backward, recompute).
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
