#!/usr/bin/env bash
# Prepared, not run (session 27, kimi_s27): issue 19, Kimi K2.5's vision tower (MoonViT) and projector on one
# GPU. What one 448 x 448 image, one and two 1080 x 1920 images add to what a bf16 training step keeps after its
# forward, to its peak and to its time, with Kimi K2.5's tower (Kimi_K25VisionConfig's defaults) before a small
# Kimi K2 text model (tools/oracle/cuda_kimivis.py; 4 cases and 2 checkpointed, 4 repeats each). The CPU oracle
# (kimivis.py) checked the saved set to the byte for a tiny config; this checks the CUDA kernels' saves (SDPA's
# flash or efficient kernel at head_dim 72) and the tower's time at Kimi K2.5's size. Needs torch and
# transformers >= 5.13 on the device.
# memsh before the run (hf_config of the kimivis_config.json the script writes, attn="sdpa", bf16, seq 8192,
# H200; 525,083,888 parameters): the images add to the saved activations 1,065,320,448 B (1 x 448^2: 1,024
# patches), 11,198,271,008 (1080 x 1920: 10,764 patches), 22,396,533,824 (2 of them); checkpointed
# 1,629,419,456 (2 of them); the measured after-forward delta adds the bf16 pixels (1,176 B a patch). Step
# time: +8.6 ms, +195 ms, +393 ms; checkpointed +495 ms (2 images).
#   mkdir -p .oracle && cp tools/oracle/cuda_kimivis.py tools/oracle/kimivis_resize.py tools/oracle/cuda_run_kimivis.sh .oracle/
#   device run, carry [".oracle"]:  OUT=$OUT bash .oracle/cuda_run_kimivis.sh
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HERE/cuda_out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
log="$OUT/kimivis.log"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv > "$log" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" >> "$log" 2>&1
timeout 240 python3 "$HERE/cuda_kimivis.py" --out "$OUT/kimivis.jsonl" --seq 8192 --repeat 4 2>&1 | grep -v -i warn >> "$log"
ls -la "$OUT" >> "$log"
