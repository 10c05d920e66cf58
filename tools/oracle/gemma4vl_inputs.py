"""A tiny Gemma 4's image inputs as Gemma4ImageProcessor makes them (transformers 5.17.0), for gemma4vl.py and
flops.py: each image resized by the processor's own get_aspect_ratio_preserving_size (run from its source:
image_processing_gemma4.py imports torchvision, absent here) for max_soft_tokens = the config's
vision_soft_tokens_per_image, cut into patches, its (x, y) positions, padded to max_soft_tokens * k^2 patches with
positions -1; the soft tokens laid out in input_ids between boi and eoi, mm_token_type_ids 1 on them."""
import ast
import math
import os

import torch
import transformers


def processor_function(name):
    path = os.path.join(os.path.dirname(transformers.__file__), "models/gemma4/image_processing_gemma4.py")
    tree = ast.parse(open(path).read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    scope = {"math": math}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), path, "exec"), scope)
    return scope[name]


get_aspect_ratio_preserving_size = processor_function("get_aspect_ratio_preserving_size")


def inputs(raw, count, height, width, seq):
    """input_ids [1, seq] and the model's image keywords; the pixel values random in [0, 1) (fp32), zero on padding.
    Also returns the layout: (resized height, width, max patches, real patches, soft tokens an image)."""
    vc = raw["vision_config"]
    patch, k = vc["patch_size"], vc["pooling_kernel_size"]
    soft = raw.get("vision_soft_tokens_per_image", 280)
    max_patches = soft * k * k
    th, tw = get_aspect_ratio_preserving_size(height, width, patch, max_patches, k)
    ph, pw = th // patch, tw // patch
    real = ph * pw
    tokens = real // (k * k)
    pixels = torch.zeros(count, max_patches, 3 * patch * patch)
    pixels[:, :real] = torch.rand(count, real, 3 * patch * patch)
    gx, gy = torch.meshgrid(torch.arange(pw), torch.arange(ph), indexing="xy")
    grid = torch.stack([gx, gy], dim=-1).reshape(real, 2)
    positions = torch.full((count, max_patches, 2), -1, dtype=torch.long)
    positions[:, :real] = grid
    ids = [10 + i % 200 for i in range(seq)]
    types = [0] * seq
    pos = 1
    for _ in range(count):
        ids[pos] = raw["boi_token_id"]
        for j in range(tokens):
            ids[pos + 1 + j] = raw["image_token_id"]
            types[pos + 1 + j] = 1
        ids[pos + 1 + tokens] = raw["eoi_token_id"]
        pos += tokens + 3
    assert pos <= seq, "seq too short for the images"
    extra = {"pixel_values": pixels, "image_position_ids": positions, "mm_token_type_ids": torch.tensor([types])}
    return torch.tensor([ids]), extra, (th, tw, max_patches, real, tokens)
