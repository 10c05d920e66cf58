# kimivis_resize.py: Kimi_K25ImageProcessor's navit_resize (transformers
# 5.17.0, models/kimi_k25/image_processing_kimi_k25.py), copied: that
# module imports torchvision, which /work/venv-t lacks. kimivis.py and
# flops.py lay out Kimi K2.5's images with it; nn.KimiGrid is its Go twin.
import math


def navit_resize(height, width, patch_size, merge_kernel_size, max_patches, max_size_per_side):
    num_patches_h = max(1.0, height // patch_size)
    num_patches_w = max(1.0, width // patch_size)
    current_patch_count = num_patches_h * num_patches_w
    scale_for_total_patches = math.sqrt(max_patches / current_patch_count)
    scale_for_height_patches = (max_size_per_side * patch_size) / height
    scale_for_width_patches = (max_size_per_side * patch_size) / width
    scale = min(1.0, scale_for_total_patches, scale_for_height_patches, scale_for_width_patches)
    new_height, new_width = max(1, int(height * scale)), max(1, int(width * scale))
    new_height = min(new_height, max_size_per_side * patch_size)
    new_width = min(new_width, max_size_per_side * patch_size)
    factor = merge_kernel_size * patch_size
    pad_height = (factor - new_height % factor) % factor + new_height
    pad_width = (factor - new_width % factor) % factor + new_width
    return (new_height, new_width), (pad_height, pad_width)


def grid(height, width, patch, merge):
    """The patches a side of an image at the processor's defaults (16384 patches, 512 a side)."""
    _, (ph, pw) = navit_resize(height, width, patch, merge, 16384, 512)
    return ph // patch, pw // patch
