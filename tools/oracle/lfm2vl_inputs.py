# lfm2vl_inputs.py: COUNT images of HEIGHT x WIDTH pixels among SEQ tokens
# as Lfm2VlProcessor lays them out (transformers 5.25.0), for lfm2vl.py.
# The layout (whether an image is split, its rows x cols tiles of
# tile_size pixels, the size smart_resize gives the single image or the
# thumbnail) runs Lfm2VlImageProcessor's own functions from
# image_processing_lfm2_vl.py's source (the module imports torchvision,
# absent here: round_by_factor, find_closest_aspect_ratio and the
# methods _target_ratios, _get_grid_layout, smart_resize,
# _is_image_too_large, _get_split_layout), the token counts
# Lfm2VlProcessor's _compute_tokens_per_tile and
# _compute_tokens_for_image. Each image is its tiles then the thumbnail
# (use_thumbnail, a grid of more than one tile), or one resized image;
# pixel_values [tiles, max_num_patches, 3 x patch²] fp32 (random, zero
# past each tile's patches: do_pad), pixel_attention_mask int32 (one a
# real patch), spatial_shapes int64 [tiles, 2], as _preprocess makes
# them. In input_ids an image is <|image_start|>, per tile
# <|img_row_r_col_c|> and its image tokens, <|img_thumbnail|> and the
# thumbnail's, <|image_end|> (_build_image_tokens with
# use_image_special_tokens); one image unsplit is <|image_start|>, its
# tokens, <|image_end|>. The text tokens are arbitrary ids.
import ast
import math
import os

import torch
import transformers

from transformers.models.lfm2_vl.processing_lfm2_vl import Lfm2VlProcessor

from idefics3_inputs import lay

DEFAULTS = dict(downsample_factor=2, do_image_splitting=True, min_tiles=2, max_tiles=10, use_thumbnail=True,
                min_image_tokens=64, max_image_tokens=256, encoder_patch_size=16, tile_size=512, max_pixels_tolerance=2.0,
                use_image_special_tokens=True)


def _processor_source():
    # LAYOUT_TRANSFORMERS: the transformers package whose layout functions
    # to run (5.25.0's, when an older wheel, which inlines them, is on the
    # path: lfm2vl.py's PYTHONPATH runs)
    root = os.environ.get("LAYOUT_TRANSFORMERS", os.path.dirname(transformers.__file__))
    path = os.path.join(root, "models/lfm2_vl/image_processing_lfm2_vl.py")
    tree = ast.parse(open(path).read())
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("round_by_factor", "find_closest_aspect_ratio")]
    methods = ("_target_ratios", "_get_grid_layout", "smart_resize", "_is_image_too_large", "_get_split_layout")
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lfm2VlImageProcessor"):
        body = [f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name in methods]
        for f in body:
            f.decorator_list = []  # lru_cache
        keep.append(ast.ClassDef(name="Layout", bases=[], keywords=[], body=body, decorator_list=[], type_params=[]))
    for f in ast.walk(ast.Module(body=keep, type_ignores=[])):
        if isinstance(f, ast.FunctionDef):  # the annotations name torchvision's types
            for a in f.args.args + f.args.kwonlyargs:
                a.annotation = None
            f.returns = None
    scope = {"math": math}
    exec(compile(ast.fix_missing_locations(ast.Module(body=keep, type_ignores=[])), path, "exec"), scope)
    return scope["Layout"]()


_layout = _processor_source()


def layout(height, width, opts):
    """(split, rows, cols, new_height, new_width) of one image, as
    Lfm2VlImageProcessor._preprocess lays it out."""
    o = dict(DEFAULTS, **opts)
    lo, hi = (o["min_tiles"], o["max_tiles"]) if o["do_image_splitting"] else (1, 1)
    return _layout._get_split_layout(height, width, downsample_factor=o["downsample_factor"], min_tiles=lo, max_tiles=hi,
                                     min_image_tokens=o["min_image_tokens"], max_image_tokens=o["max_image_tokens"],
                                     encoder_patch_size=o["encoder_patch_size"], tile_size=o["tile_size"],
                                     max_pixels_tolerance=o["max_pixels_tolerance"])


def image(height, width, opts):
    """The spatial shapes (patches high, wide) of one image's tiles and
    thumbnail in order, and its tokens with the special tokens (as ids:
    start 1, end 2, thumbnail 3, row r col c 10 + 8r + c, image tok)."""
    o = dict(DEFAULTS, **opts)
    split, rows, cols, nh, nw = layout(height, width, opts)
    p, f, tile = o["encoder_patch_size"], o["downsample_factor"], o["tile_size"]
    per_tile = Lfm2VlProcessor._compute_tokens_per_tile(None, tile, p, f)
    for_image = Lfm2VlProcessor._compute_tokens_for_image(None, [nh, nw], p, f)
    if split:
        # crop_image_to_patches: the grid the layout found, each tile
        # tile_size a side; the thumbnail when the grid is more than one
        _, _, _, _, _ = _layout._get_grid_layout(height, width, min_tiles=o["min_tiles"], max_tiles=o["max_tiles"], tile_size=tile)
        shapes = [(tile // p, tile // p)] * (rows * cols)
        thumb = o["use_thumbnail"] and rows * cols != 1
        if thumb:
            shapes.append((nh // p, nw // p))
    else:
        shapes = [(nh // p, nw // p)]
    return shapes, rows, cols, per_tile, for_image


def tokens(rows, cols, per_tile, for_image, thumb, tok, tags=True):
    """_build_image_tokens as ids (tags: use_image_special_tokens)."""
    one = [1] if tags else []
    if rows > 1 or cols > 1:
        for r in range(rows):
            for c in range(cols):
                one += ([10 + 8 * r + c] if tags else []) + [tok] * per_tile
        if thumb:
            one += ([3] if tags else []) + [tok] * for_image
    else:
        one += [tok] * for_image
    return one + ([2] if tags else [])


def inputs(raw, count, height, width, seq, opts):
    """input_ids, pixel_values, pixel_attention_mask, spatial_shapes and
    (shapes of one image, tokens an image)."""
    o = dict(DEFAULTS, **opts)
    shapes, rows, cols, per_tile, for_image = image(height, width, opts)
    thumb = o["use_thumbnail"] and (rows > 1 or cols > 1)
    one = tokens(rows, cols, per_tile, for_image, thumb, raw["image_token_id"], o["use_image_special_tokens"])
    ids = lay(one, count, seq)
    p, f = o["encoder_patch_size"], o["downsample_factor"]
    longest = max(o["max_image_tokens"] * f * f, (o["tile_size"] // p) ** 2 if o["do_image_splitting"] else 0)
    n = count * len(shapes)
    pixels = torch.zeros(n, longest, 3 * p * p)
    mask = torch.zeros(n, longest, dtype=torch.int32)
    for i, (h, w) in enumerate(shapes * count):
        pixels[i, :h * w] = torch.rand(h * w, 3 * p * p)
        mask[i, :h * w] = 1
    spatial = torch.tensor(shapes * count, dtype=torch.int64)
    return torch.tensor([ids]), pixels, mask, spatial, (shapes, len(one))
