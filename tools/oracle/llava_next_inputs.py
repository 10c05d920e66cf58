# llava_next_inputs.py: the tiles and image tokens LlavaNextProcessor and
# LlavaOnevisionProcessor give an image (transformers 5.25.0), and one
# sample's inputs laid out with them; shared by llava_next.py and
# flops.py.
import functools
import types

import torch
from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches
from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor
from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor

def image_tokens(cfg, height, width, count):
    """The tiles through the tower and the image tokens of one of count
    HEIGHT x WIDTH images in a sample, as the processor counts them."""
    vc = cfg.vision_config
    side = vc.image_size // vc.patch_size
    onevision = cfg.model_type == "llava_onevision"
    pinpoints = cfg.image_grid_pinpoints
    proc = types.SimpleNamespace(image_processor=types.SimpleNamespace(image_grid_pinpoints=pinpoints), patch_size=vc.patch_size,
                                 num_additional_image_tokens=0 if onevision else 1, num_image_tokens=side * side,
                                 vision_aspect_ratio=getattr(cfg, "vision_aspect_ratio", None))
    cls = LlavaOnevisionProcessor if onevision else LlavaNextProcessor
    proc._get_unpadded_features = functools.partial(cls._get_unpadded_features, proc)
    if onevision and count > 1:
        tiles, per = 1, side * side + 1  # replace_image_token: num_image_tokens + 1 for the newline
    else:
        per = cls._get_number_of_features(proc, height, width, vc.image_size, vc.image_size)
        tiles = image_size_to_num_patches((height, width), pinpoints, vc.image_size)
    if cfg.vision_feature_select_strategy == "default":
        per -= 1
    return tiles, per



def inputs(cfg, count, height, width, seq):
    """input_ids of seq tokens with count height x width images' placeholders
    first, and the model's image inputs: random fp32 tiles of image_size
    (as many an image as image_size_to_num_patches counts), image_sizes,
    and for OneVision batch_num_images."""
    vc = cfg.vision_config
    tiles, per = image_tokens(cfg, height, width, count)
    tok = cfg.image_token_id
    ids = torch.randint(tok + 2, cfg.text_config.vocab_size, (1, seq))
    assert count * per <= seq, "seq too short for the images"
    ids[0, : count * per] = tok
    kw = dict(pixel_values=torch.randn(count, tiles, vc.num_channels, vc.image_size, vc.image_size),
              image_sizes=torch.tensor([[height, width]] * count))
    if cfg.model_type == "llava_onevision":
        kw["batch_num_images"] = torch.tensor([count])
    return ids, kw, tiles, per
