# qwenvl_inputs.py: the inputs of COUNT images of HEIGHT x WIDTH pixels
# among SEQ tokens as the Qwen-VL processors (Qwen2-VL, Qwen2.5-VL,
# Qwen3-VL, Qwen3.5) lay them out, for qwen2vl.py and qwen3vl.py: each
# image resized as smart_resize does (a multiple of patch * merge pixels a
# side), its tokens between vision_start and vision_end, mm_token_type_ids
# 1 on them; the pixel patches random, in the processor's layout, fp32.
import torch


def image_inputs(raw, count, height, width, seq):
    """input_ids, mm_token_type_ids, pixel_values, image_grid_thw, and
    the grid (gh, gw) and tokens of one image."""
    vc = raw["vision_config"]
    patch, merge, temporal = vc["patch_size"], vc["spatial_merge_size"], vc["temporal_patch_size"]
    chans = vc.get("in_channels", 3)
    factor = patch * merge
    gh, gw = max(round(height / factor), 1) * merge, max(round(width / factor), 1) * merge
    tokens = gh * gw // (merge * merge)
    ids = [10 + i % 200 for i in range(seq)]
    types = [0] * seq
    pos = 1
    for _ in range(count):
        ids[pos] = raw["vision_start_token_id"]
        for j in range(tokens):
            ids[pos + 1 + j] = raw["image_token_id"]
            types[pos + 1 + j] = 1
        ids[pos + 1 + tokens] = raw["vision_end_token_id"]
        pos += tokens + 3
    assert pos <= seq, "seq too short for the images"
    pixels = torch.randn(count * gh * gw, chans * temporal * patch * patch)
    grid = torch.tensor([[1, gh, gw]] * count)
    return torch.tensor([ids]), torch.tensor([types], dtype=torch.int32), pixels, grid, (gh, gw, tokens)
