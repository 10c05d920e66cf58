"""A tiny Mistral 3's image inputs as PixtralProcessor makes them (transformers 5.25.0), for mistral3vl.py and
flops.py: each image resized by the processor's own get_resize_output_image_size and _num_image_tokens (run from
image_processing_pixtral.py's source: the module imports torchvision, absent here) at longest edge
vision_config.image_size and patch size patch_size x spatial_merge_size (PixtralProcessor._process_images); the
pixel values random in [0, 1), fp32, [count, 3, height, width]; in input_ids each image's [IMG] tokens, one a merged
patch, with a break token after each row of them (the last [IMG_END]), as replace_image_token lays them out."""
import ast
import math
import os

import torch
import transformers


def processor_functions(*names):
    """The named functions of image_processing_pixtral.py, run from its source; get_image_size reads an image given
    as its (height, width)."""
    path = os.path.join(os.path.dirname(transformers.__file__), "models/pixtral/image_processing_pixtral.py")
    tree = ast.parse(open(path).read())
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    scope = {"math": math, "ImageInput": object, "ChannelDimension": object, "get_image_size": lambda image, fmt=None: image}
    exec(compile(ast.Module(body=fns, type_ignores=[]), path, "exec"), scope)
    return scope


resize = processor_functions("_num_image_tokens", "get_resize_output_image_size")["get_resize_output_image_size"]


def inputs(raw, count, height, width, seq):
    """input_ids [1, seq] and the model's image keywords; also the layout: (resized height, width, patches a side
    down, across, [IMG] tokens an image)."""
    vc = raw["vision_config"]
    # LLaVA's configs have no spatial_merge_size: its processor's default is 1 (processing_pixtral.py)
    patch, merge = vc["patch_size"], raw.get("spatial_merge_size", 1 if raw["model_type"] == "llava" else 2)
    longest = vc["image_size"]
    rh, rw = resize((height, width), size=(longest, longest), patch_size=(patch * merge, patch * merge))
    gh, gw = rh // patch, rw // patch
    rows, cols = gh // merge, gw // merge
    ids = [20 + i % 200 for i in range(seq)]
    pos = 1
    for _ in range(count):
        for r in range(rows):
            for j in range(cols):
                ids[pos] = raw.get("image_token_index", 10)
                pos += 1
            ids[pos] = 12 if r < rows - 1 else 13  # [IMG_BREAK], the last [IMG_END]
            pos += 1
        pos += 1
    assert pos <= seq, "seq too short for the images"
    extra = {"pixel_values": torch.rand(count, 3, rh, rw), "image_sizes": torch.tensor([[rh, rw]] * count)}
    return torch.tensor([ids]), extra, (rh, rw, gh, gw, rows * cols)
