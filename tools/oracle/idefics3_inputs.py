# idefics3_inputs.py: COUNT images of HEIGHT x WIDTH pixels among SEQ
# tokens as Idefics3Processor and SmolVLMProcessor lay them out
# (transformers 5.25.0), for idefics3.py. Each image is resized so its
# longest edge is size["longest_edge"] (the processors' default, 4 x
# vision_config.image_size), then to multiples of image_size
# (resize_for_vision_encoder) and cut into rows x cols tiles of image_size
# pixels plus the whole image resized to one tile (split_images): the
# image processor's functions and its resize_for_vision_encoder run from
# image_processing_idefics3.py's source (the module imports torchvision,
# absent here), the split's ceil(height / image_size) x ceil(width /
# image_size) as split_images computes it. In input_ids each tile is
# <fake_token_around_image>, <row_i_col_j> and image_seq_len <image>
# tokens, a newline after each row, then the global image:
# <fake_token_around_image>, <global-img>, image_seq_len <image>,
# <fake_token_around_image> (replace_image_token); the newline ending the
# last row and the one before the global image are one token ("\n\n",
# one entry of the Llama 3 and SmolLM2 vocabularies). The text tokens are
# arbitrary ids; the pixel values random, fp32, [1, tiles, 3, image_size,
# image_size], with pixel_attention_mask all ones (int64), as do_pad
# makes them for tiles of one size.
import ast
import math
import os

import torch
import transformers


def _processor_source():
    path = os.path.join(os.path.dirname(transformers.__file__), "models/idefics3/image_processing_idefics3.py")
    tree = ast.parse(open(path).read())
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_resize_output_size")]
    keep += [n for n in tree.body if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "MAX_IMAGE_SIZE" for t in n.targets)]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Idefics3ImageProcessor"):
        keep += [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "resize_for_vision_encoder"]
    for f in keep:
        if isinstance(f, ast.FunctionDef):  # the annotations name torchvision's types
            for a in f.args.args + f.args.kwonlyargs:
                a.annotation = None
            f.returns = None
    scope = {"math": math, "SizeDict": lambda **kw: kw}
    exec(compile(ast.Module(body=keep, type_ignores=[]), path, "exec"), scope)
    return scope


_src = _processor_source()


class _Image:
    def __init__(self, h, w):
        self.h, self.w = h, w

    def size(self):
        return (1, 3, self.h, self.w)


class _Resizer:
    def resize(self, image, size, resample=None):
        return size


def grid(height, width, tile, longest_edge):
    """rows and cols of the tiles an image of height x width pixels is cut
    into (0, 0: one tile, not split)."""
    h, w = _src["_resize_output_size_rescale_to_max_len"](height, width, max_len=longest_edge)
    h, w = _src["_resize_output_size_scale_below_upper_bound"](h, w, max_len=_src["MAX_IMAGE_SIZE"])
    size = _src["resize_for_vision_encoder"](_Resizer(), _Image(h, w), tile)
    h, w = size["height"], size["width"]
    if h > tile or w > tile:
        return math.ceil(h / tile), math.ceil(w / tile)
    return 0, 0


def inputs(raw, count, height, width, seq, longest_edge=None, split=True):
    """input_ids, pixel_values, pixel_attention_mask, and (rows, cols,
    tiles, image tokens a tile, tokens an image); split=False is
    do_image_splitting=False: every image squared to one tile, rows and
    cols 0 (Idefics3ImageProcessor._preprocess)."""
    vc = raw["vision_config"]
    tile, patch, scale = vc["image_size"], vc["patch_size"], raw.get("scale_factor", 2)
    per_tile = (tile // patch) ** 2 // scale**2
    rows, cols = grid(height, width, tile, longest_edge or 4 * tile) if split else (0, 0)
    tiles = rows * cols + 1
    fake, glob, nl, tok = 11, 12, 13, raw["image_token_id"]
    one = []
    for r in range(rows):
        for c in range(cols):
            one += [fake, 14 + r * 6 + c] + [tok] * per_tile
        if r < rows - 1:
            one.append(nl)
    one += ([nl] if rows else []) + [fake, glob] + [tok] * per_tile + [fake]
    input_ids, pixels, mask = place(one, count, count * tiles, seq, vc)
    return input_ids, pixels, mask, (rows, cols, tiles, per_tile, len(one))


def lay(one, count, seq):
    """input_ids (a list) of seq arbitrary text ids with count copies of
    one (a visual input's tokens) laid one token apart."""
    ids = [100 + i % 150 for i in range(seq)]
    pos = 1
    for _ in range(count):
        ids[pos:pos + len(one)] = one
        pos += len(one) + 1
    assert pos <= seq, f"seq too short for the visual tokens ({pos})"
    return ids


def place(one, count, tiles, seq, vc):
    """input_ids of seq arbitrary text ids with count copies of one (a
    visual input's tokens) laid one token apart, random fp32 pixel values of
    tiles tiles, and the pixel mask do_pad makes for tiles of one size (all
    ones, int64)."""
    ids = lay(one, count, seq)
    tile = vc["image_size"]
    pixels = torch.rand(1, tiles, vc.get("num_channels", 3), tile, tile)
    mask = torch.ones(1, tiles, tile, tile, dtype=torch.int64)
    return torch.tensor([ids[:seq]]), pixels, mask
