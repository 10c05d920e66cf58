"""Llama 4's vision model on one CUDA GPU: what images add to the memory a training step keeps and to its time
(issue 19, l4vis_s27), for sim/llama4_vision_oracle_test.go's CPU figures and memsh's CUDA runtime.

Prepared, not run here (no GPU in the session that wrote it). The model is Llama4ForConditionalGeneration with
Scout's vision_config (34 layers of 1,408, tiles of 336 pixels, the adapter and projector) before a small
Llama 4 text model (2 layers of 1,024, 4 experts, vocabulary 32,000, so the vision model dominates), built on
the GPU in bf16 (from_config(dtype=torch.bfloat16), as from_pretrained(dtype=...) loads it), sdpa, random
weights, nothing downloaded. Per case (images per sample, height, width) it runs forward + backward (no
optimizer) REPEAT times on one sample of SEQ tokens, the images' <|patch|> tokens among them as
Llama4Processor lays them out (tiles as Llama4ImageProcessor makes them: llama4vis_tiles.py), bf16 pixels,
and records after the last: allocated before the forward, allocated after the forward (what the step keeps
for backward, the pixels and the logits), max_memory_allocated over the step (reset at its start), and the
synchronised wall time of each repeat. The case without images runs the same tokens as text; the difference
is what the images add. Two cases run again under gradient checkpointing (use_reentrant=False: the vision
layers are GradientCheckpointingLayers too), "checkpoint": true in their lines. The config is written whole to OUT/llama4vis_config.json so that hf_config reads the
very model that ran.

    python3 tools/oracle/cuda_llama4vis.py --out OUT/llama4vis.jsonl [--seq 8192] [--repeat 4]
    python3 tools/oracle/cuda_llama4vis.py --out /tmp/l4.jsonl --device cpu --tiny     # a smoke test

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
import llama4vis_tiles  # noqa: E402

SCOUT_VISION = {"model_type": "llama4_vision_model", "hidden_size": 1408, "num_hidden_layers": 34,
                "num_attention_heads": 16, "intermediate_size": 5632, "image_size": 336, "patch_size": 14,
                "num_channels": 3, "pixel_shuffle_ratio": 0.5, "projector_input_dim": 4096,
                "projector_output_dim": 4096, "vision_output_dim": 4096, "projector_dropout": 0.0,
                "attention_dropout": 0.0, "hidden_act": "gelu", "rope_theta": 10000, "norm_eps": 1e-05,
                "vision_feature_layer": -1, "vision_feature_select_strategy": "default",
                "multi_modal_projector_bias": False}
TEXT = {"model_type": "llama4_text", "hidden_size": 1024, "intermediate_size": 1024, "intermediate_size_mlp": 2048,
        "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128,
        "num_local_experts": 4, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "vocab_size": 32000,
        "attention_chunk_size": 8192, "use_qk_norm": True, "tie_word_embeddings": False}
CASES = [None, (1, 336, 336), (1, 672, 672), (1, 1080, 1920), (3, 1080, 1920)]
CKPT_CASES = [None, (3, 1080, 1920)]  # again under gradient checkpointing (use_reentrant=False)


def config(tiny):
    vision, text = dict(SCOUT_VISION), dict(TEXT)
    if tiny:
        vision.update(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                      image_size=56, projector_input_dim=48, projector_output_dim=48, vision_output_dim=48)
        text.update(hidden_size=64, intermediate_size=48, intermediate_size_mlp=96, num_attention_heads=4,
                    head_dim=16, vocab_size=128, attention_chunk_size=16)
    return {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "boi_token_index": 120,
            "eoi_token_index": 121, "image_token_index": 100, "tie_word_embeddings": False,
            "text_config": text, "vision_config": vision}


def run_case(model, raw, im, seq, repeat, dev):
    vc = raw["vision_config"]
    tile = vc["image_size"]
    per_tile = (tile // vc["patch_size"]) ** 2 // int(round(1 / vc["pixel_shuffle_ratio"] ** 2))
    ids = [10 + i % 80 for i in range(seq)]
    kw, tiles = {}, 0
    if im is not None:
        count, h, w = im
        per_image = llama4vis_tiles.tiles(h, w, tile)
        tiles = count * per_image
        pos = 1
        for _ in range(count):
            for j in range(per_image * per_tile):
                ids[pos + j] = raw["image_token_index"]
            pos += per_image * per_tile + 2
        assert pos <= seq, "seq too short for the images"
        kw["pixel_values"] = torch.randn(tiles, vc["num_channels"], tile, tile, device=dev, dtype=torch.bfloat16)
    input_ids = torch.tensor([ids], device=dev)
    rec = {"images": im, "tiles": tiles, "image_tokens": tiles * per_tile, "seq": seq, "times_s": []}
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
    seq = 64 if a.tiny else a.seq
    cases = [None, (1, 56, 56), (2, 112, 56)] if a.tiny else CASES
    ckpt_cases = [None, (2, 112, 56)] if a.tiny else CKPT_CASES
    with open(os.path.join(os.path.dirname(os.path.abspath(a.out)), "llama4vis_config.json"), "w") as f:
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
            if ckpt:  # every Llama4TextDecoderLayer and Llama4VisionEncoderLayer (GradientCheckpointingLayer)
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
