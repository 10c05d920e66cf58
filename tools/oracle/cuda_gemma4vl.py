"""Gemma 4's vision tower on one CUDA GPU: what the images add to the storages autograd saves and to the peak, for
sim/vision_gemma4_oracle_test.go's CPU figures (tools/oracle/gemma4vl.py) on the GPU's kernels (SDPA given the padding
mask: the efficient kernel and its bias; eager).

The model is Gemma4ForConditionalGeneration with E4B's vision tower at full size (16 layers of 768, clipped linears;
or with --std 31B's: 27 layers of 1152, standardize) before gemma4-tiny.json's 4-layer text model (the text side is
not the subject: with and without images it does the same work), random weights, nothing downloaded, in bf16
(model.to(bfloat16)). For each case it runs one forward (labels = input_ids) and backward with COUNT images of
HEIGHT x WIDTH laid out as Gemma4ImageProcessor makes them (gemma4vl_inputs.py: 280 soft tokens, 2,520 patches an
image), then the same SEQ tokens as text, and writes one JSON line: the saved storages' bytes (parameters and
buffers excluded) with and without the images, max_memory_allocated of each (reset before), and the difference.

    python3 tools/oracle/cuda_gemma4vl.py --out gemma4vl.jsonl [--std] [--seq 1024] [--deadline-s 120]
    /work/venv-t/bin/python tools/oracle/cuda_gemma4vl.py --out /tmp/smoke.jsonl --device cpu --tiny   # smoke test

Needs transformers >= 5.5 (5.17.0 measured on the CPU) beside torch. One JSON line per case; a case that raises is
written with "error" and the run goes on.
"""
import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemma4vl_inputs  # noqa: E402

T0 = time.time()
HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")
CASES = [  # (count, height, width, attn)
    (1, 448, 448, "sdpa"), (4, 448, 448, "sdpa"), (1, 1024, 512, "sdpa"), (1, 448, 448, "eager"), (4, 448, 448, "eager"),
]


def config(std, tiny):
    raw = json.load(open(os.path.join(HF, "gemma4-vl-std-tiny.json" if std else "gemma4-vl-tiny.json")))
    if not tiny:
        real = json.load(open(os.path.join(HF, "gemma-4-31b.json" if std else "gemma-4-e4b.json")))
        raw["vision_config"] = real["vision_config"]
        raw["vision_soft_tokens_per_image"] = real["vision_soft_tokens_per_image"]
    return raw


def saved_and_peak(model, device, params, buffers, **kw):
    saved = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in buffers:
            saved[key] = t.untyped_storage().nbytes()
        return t

    model.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if device == "cuda" else 0
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(**kw)
    out.loss.backward()
    peak = torch.cuda.max_memory_allocated() - base if device == "cuda" else 0
    return sum(saved.values()), peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--std", action="store_true", help="31B's tower (27 x 1152, standardize) for E4B's")
    ap.add_argument("--tiny", action="store_true", help="the tiny tower (a smoke test)")
    ap.add_argument("--seq", type=int, default=1200)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--deadline-s", type=float, default=120)
    a = ap.parse_args()
    import transformers
    from transformers import AutoConfig, AutoModelForImageTextToText
    raw = config(a.std, a.tiny)
    with open(a.out, "a") as f:
        for count, height, width, attn in CASES:
            if time.time() - T0 > a.deadline_s:
                break
            if a.tiny:
                height, width = height // 7, width // 7
            rec = {"case": "gemma4_vision", "tower": "31b" if a.std else "e4b", "tiny": a.tiny, "images": [count, height, width],
                   "attn": attn, "seq": a.seq, "dtype": "bf16", "torch": torch.__version__, "transformers": transformers.__version__}
            try:
                torch.manual_seed(0)
                cfg = AutoConfig.for_model(**{k: v for k, v in raw.items() if k != "vision_soft_tokens_per_image"})
                for c in (cfg, cfg.vision_config, cfg.text_config):
                    c._attn_implementation = attn
                model = AutoModelForImageTextToText.from_config(cfg).to(device=a.device, dtype=torch.bfloat16).train()
                params = {p.untyped_storage().data_ptr() for p in model.parameters()}
                buffers = {b.untyped_storage().data_ptr() for b in model.buffers()}
                ids, extra, layout = gemma4vl_inputs.inputs(raw, count, height, width, a.seq)
                ids = ids.to(a.device)
                extra = {k: v.to(a.device) for k, v in extra.items()}
                text = ids.clone()
                text[text == raw["image_token_id"]] = 20
                s1, p1 = saved_and_peak(model, a.device, params, buffers, input_ids=ids, labels=ids, **extra)
                s0, p0 = saved_and_peak(model, a.device, params, buffers, input_ids=text, labels=text)
                rec.update({"resized": layout[:2], "patches": layout[2], "real_patches": layout[3], "soft_tokens": layout[4],
                            "saved_with": s1, "saved_without": s0, "images_add": s1 - s0,
                            "peak_with": p1, "peak_without": p0, "peak_add": p1 - p0})
                del model
            except Exception:  # noqa: BLE001
                rec["error"] = traceback.format_exc()[-2000:]
            f.write(json.dumps(rec) + "\n")
            f.flush()
            print(json.dumps({k: v for k, v in rec.items() if k != "error"}), "error" in rec, file=sys.stderr)
            if a.device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
