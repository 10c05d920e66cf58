"""Kimi K2.5's vision tower (MoonViT) and projector on one CUDA GPU: what images add to the memory a training
step keeps and to its time (issue 19, kimi_s27), for sim/kimi_vision_oracle_test.go's CPU figures and memsh's
CUDA runtime.

Prepared, not run here (no GPU in the session that wrote it). The model is Kimi_K25ForConditionalGeneration
with Kimi_K25VisionConfig's defaults (Kimi K2.5's tower: 27 layers of 1,152, patches of 14, merge 2 x 2) and
the projector, before a small Kimi K2 text model (2 layers of 1,024, latent attention, 4 experts, vocabulary
32,000, so the tower dominates), built on the GPU in bf16 (from_config(dtype=torch.bfloat16)), sdpa, random
weights, nothing downloaded. Per case (images per sample, height, width) it runs forward + backward (no
optimizer) REPEAT times on one sample of SEQ tokens, the images' tokens among them (each image's grid from
Kimi_K25ImageProcessor's navit_resize: kimivis_resize.py), bf16 pixel patches, and records after the last:
allocated before the forward, after the forward (what the step keeps for backward, the pixels and the
logits), max_memory_allocated over the step (reset at its start), and the synchronised wall time of each
repeat. The case without images runs the same tokens as text; the difference is what the images add. Two
cases run again under gradient checkpointing (use_reentrant=False: the tower's encoder layers are
GradientCheckpointingLayers too), "checkpoint": true in their lines. The config is written whole to
OUT/kimivis_config.json so that hf_config reads the very model that ran.

    python3 tools/oracle/cuda_kimivis.py --out OUT/kimivis.jsonl [--seq 8192] [--repeat 4]
    python3 tools/oracle/cuda_kimivis.py --out /tmp/k.jsonl --device cpu --tiny     # a smoke test

One JSON line per case; a case that raises is written with "error" and the run goes on.
"""
import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kimivis_resize  # noqa: E402

VISION = {"patch_size": 14, "pos_emb_height": 64, "pos_emb_width": 64, "pos_emb_time": 4, "num_attention_heads": 16,
          "num_hidden_layers": 27, "hidden_size": 1152, "intermediate_size": 4304, "hidden_act": "gelu_pytorch_tanh",
          "merge_kernel_size": [2, 2]}
TEXT = {"model_type": "kimi_k2", "hidden_size": 1024, "intermediate_size": 2048, "moe_intermediate_size": 512,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4, "n_shared_experts": 1,
        "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "num_attention_heads": 8, "num_key_value_heads": 8,
        "q_lora_rank": 256, "kv_lora_rank": 128, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32, "v_head_dim": 64,
        "vocab_size": 32000, "tie_word_embeddings": False}
CASES = [None, (1, 448, 448), (1, 1080, 1920), (2, 1080, 1920)]
CKPT_CASES = [None, (2, 1080, 1920)]  # again under gradient checkpointing (use_reentrant=False)


def config(tiny):
    vision, text = dict(VISION), dict(TEXT)
    if tiny:
        vision.update(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                      pos_emb_height=8, pos_emb_width=8)
        text.update(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_attention_heads=4,
                    num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8,
                    v_head_dim=16, vocab_size=1024)
    return {"architectures": ["Kimi_K25ForConditionalGeneration"], "model_type": "kimi_k25",
            "image_token_id": 1000, "video_token_id": 1001, "projection_hidden_size": vision["hidden_size"],
            "tie_word_embeddings": False, "text_config": text, "vision_config": vision}


def run_case(model, raw, im, seq, repeat, dev):
    vc = raw["vision_config"]
    patch, merge = vc["patch_size"], vc["merge_kernel_size"][0]
    ids = [10 + i % 200 for i in range(seq)]
    kw, patches, tokens = {}, 0, 0
    if im is not None:
        count, h, w = im
        gh, gw = kimivis_resize.grid(h, w, patch, merge)
        patches, tokens = count * gh * gw, count * gh * gw // (merge * merge)
        pos = 1
        for _ in range(count):
            for j in range(gh * gw // (merge * merge)):
                ids[pos + j] = raw["image_token_id"]
            pos += gh * gw // (merge * merge) + 2
        assert pos <= seq, "seq too short for the images"
        kw["pixel_values"] = torch.randn(patches, 3, patch, patch, device=dev, dtype=torch.bfloat16)
        kw["image_grid_thw"] = torch.tensor([[1, gh, gw]] * count, device=dev)
    input_ids = torch.tensor([ids], device=dev)
    rec = {"images": im, "patches": patches, "image_tokens": tokens, "seq": seq, "times_s": []}
    for _ in range(repeat):
        model.zero_grad(set_to_none=True)
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            rec["allocated_start"] = torch.cuda.memory_allocated()
        t = time.time()
        out = model(input_ids=input_ids, labels=input_ids, **kw)
        if dev == "cuda":
            torch.cuda.synchronize()
            rec["allocated_after_forward"] = torch.cuda.memory_allocated()
        out.loss.backward()
        del out
        if dev == "cuda":
            torch.cuda.synchronize()
            rec["max_allocated"] = torch.cuda.max_memory_allocated()
            rec["max_reserved"] = torch.cuda.max_memory_reserved()
        rec["times_s"].append(time.time() - t)
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    a = ap.parse_args()
    import transformers
    from transformers import AutoConfig, AutoModelForImageTextToText
    raw = config(a.tiny)
    seq = 96 if a.tiny else a.seq
    cases = [None, (1, 56, 56), (2, 84, 112)] if a.tiny else CASES
    ckpt_cases = [None, (2, 84, 112)] if a.tiny else CKPT_CASES
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), "kimivis_config.json"), "w") as f:
        json.dump(raw, f, indent=2)
    cfg = AutoConfig.for_model(**raw)
    for c in (cfg, cfg.vision_config, cfg.text_config):
        c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(a.device):
        model = AutoModelForImageTextToText.from_config(cfg, dtype=torch.bfloat16).train()
    head = {"torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
            "params": sum(p.numel() for p in model.parameters())}
    with open(a.out, "w") as f:
        for ckpt, run in ((False, cases), (True, ckpt_cases)):
            if ckpt:  # every decoder layer and Kimi_K25VisionEncoderLayer (GradientCheckpointingLayer)
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            for im in run:
                try:
                    rec = run_case(model, raw, im, seq, a.repeat, a.device)
                except Exception:  # noqa: BLE001 - recorded, the run goes on
                    rec = {"images": im, "error": traceback.format_exc(limit=3)}
                rec["checkpoint"] = ckpt
                f.write(json.dumps({**head, **rec}) + "\n")
                f.flush()
                print(json.dumps(rec), file=sys.stderr)


if __name__ == "__main__":
    main()
