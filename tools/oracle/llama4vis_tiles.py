"""The tiles Llama4ImageProcessor makes of an image (transformers' image_processing_llama4.py,
find_supported_resolutions and get_best_fit, read from the installed source: the module itself imports
torchvision), for llama4vis.py and flops.py."""
import ast
import math
import types
from collections import defaultdict
from functools import lru_cache

import torch
import transformers

_ns = {"torch": torch, "math": math, "defaultdict": defaultdict, "lru_cache": lru_cache, "SizeDict": object}
with open(transformers.models.llama4.__path__[0] + "/image_processing_llama4.py") as _f:
    for _node in ast.parse(_f.read()).body:
        if isinstance(_node, ast.FunctionDef) and _node.name in ("get_factors", "find_supported_resolutions", "get_best_fit"):
            exec(compile(ast.Module([_node], []), "image_processing_llama4.py", "exec"), _ns)


def canvas(height, width, tile, max_patches=16):
    """The canvas's tiles a side (rows, columns) for an image of height x width pixels."""
    res = torch.tensor(_ns["find_supported_resolutions"].__wrapped__(max_patches, types.SimpleNamespace(height=tile, width=tile)))
    th, tw = (int(x) for x in _ns["get_best_fit"]((height, width), res))
    return th // tile, tw // tile


def tiles(height, width, tile, max_patches=16):
    """The tiles of one image: the canvas's, and the global tile when there are several."""
    rh, rw = canvas(height, width, tile, max_patches)
    return rh * rw + (1 if rh * rw > 1 else 0)
