package hf

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLlavaNext builds transformers' LlavaNextForConditionalGeneration
// (model_type llava_next: llava-hf/llava-v1.6-mistral-7b-hf, -vicuna-7b
// and -13b, llama3-llava-next-8b; models/llava_next/modeling_llava_next.py,
// 5.25.0): LLaVA's CLIP tower and projector (nn.LlavaVision; llava.go),
// every image cut into AnyRes tiles over image_grid_pinpoints (LlavaNextConfig's
// default [[336, 672], [672, 336], [672, 672], [1008, 336], [336,
// 1008]]), and model.image_newline, one parameter of the text width. The
// head is tied by the top level's tie_word_embeddings alone.
func buildLlavaNext(c *hfConfig, attn string, head hfHead) *core.Model {
	return llavaModel(c, attn, head, "llama", false, func(tc *hfConfig) core.Layer {
		a := &nn.AnyRes{Pinpoints: c.pinpoints(llavaNextPinpoints)}
		return llavaVision(c, tc, attn, llavaDefaultVision, a)
	})
}

// buildLlavaOnevision builds transformers'
// LlavaOnevisionForConditionalGeneration (model_type llava_onevision:
// llava-hf/llava-onevision-qwen2-0.5b-ov-hf, -7b, -72b;
// models/llava_onevision/modeling_llava_onevision.py, 5.25.0): a Qwen2
// text model by default, the SigLIP so400m tower (LlavaOnevisionConfig's
// default vision_config: 1152 wide, 26 layers, images of 384, patches of
// 14, no pooling head), LLaVA's projector on every patch of the last
// layer (vision_feature_layer -1, "full"), AnyRes over 36 pinpoints of
// 384 to 2304 pixels a side with anyres_max_9 (vision_aspect_ratio), and
// model.image_newline. A sample of several images runs each as its base
// tile alone (the processor's batch_num_images); train(videos=) runs
// every frame through the tower at image_size, its patches pooled 2 x 2,
// one image_newline a video (get_video_features). The head is tied when
// either tie_word_embeddings says so.
func buildLlavaOnevision(c *hfConfig, attn string, head hfHead) *core.Model {
	if !c.has("vision_feature_layer") {
		c.raw["vision_feature_layer"] = json.Number("-1")
	}
	if !c.has("vision_feature_select_strategy") {
		c.raw["vision_feature_select_strategy"] = "full"
	}
	return llavaModel(c, attn, head, "qwen2", true, func(tc *hfConfig) core.Layer {
		a := &nn.AnyRes{Pinpoints: c.pinpoints(onevisionPinpoints()), MaxTiles: c.anyresMax(), OneImage: true}
		v := llavaVision(c, tc, attn, onevisionDefaultVision, a)
		if v == nil {
			return nil
		}
		v.Videos = true
		return v
	})
}

// llavaNextPinpoints is LlavaNextConfig's default image_grid_pinpoints.
var llavaNextPinpoints = [][2]int64{{336, 672}, {672, 336}, {672, 672}, {1008, 336}, {336, 1008}}

// onevisionPinpoints is LlavaOnevisionConfig's default
// image_grid_pinpoints: every (height, width) of 1 to 6 tiles of 384.
func onevisionPinpoints() [][2]int64 {
	var out [][2]int64
	for h := int64(1); h <= 6; h++ {
		for w := int64(1); w <= 6; w++ {
			out = append(out, [2]int64{384 * h, 384 * w})
		}
	}
	return out
}

// onevisionDefaultVision is the vision_config LlavaOnevisionConfig makes
// when the file has none (sub_configs_defaults in
// configuration_llava_onevision.py, 5.25.0: SigLIP so400m at 384 pixels,
// its pooling head off).
var onevisionDefaultVision = map[string]any{
	"model_type": "siglip_vision_model", "hidden_size": json.Number("1152"), "intermediate_size": json.Number("4304"), "patch_size": json.Number("14"),
	"image_size": json.Number("384"), "num_hidden_layers": json.Number("26"), "num_attention_heads": json.Number("16"), "vision_use_head": false,
}

// pinpoints reads image_grid_pinpoints, a list of [height, width] pairs
// (def when absent); nn.AnyRes checks their sizes.
func (c *hfConfig) pinpoints(def [][2]int64) [][2]int64 {
	if !c.has("image_grid_pinpoints") {
		return def
	}
	list, _ := c.raw["image_grid_pinpoints"].([]any)
	var out [][2]int64
	for _, e := range list {
		pair, _ := e.([]any)
		var p [2]int64
		for i := 0; i < len(pair) && i < 2; i++ {
			n, _ := pair[i].(json.Number)
			p[i], _ = n.Int64()
		}
		if len(pair) != 2 || p[0] <= 0 || p[1] <= 0 {
			c.fail("image_grid_pinpoints", "has %s: each entry must be a [height, width] pair of positive integers", describeJSON(e))
			return nil
		}
		out = append(out, p)
	}
	if list == nil {
		c.fail("image_grid_pinpoints", "is %s: it must be a list of [height, width] pairs", describeJSON(c.raw["image_grid_pinpoints"]))
	}
	return out
}

// anyresMax reads vision_aspect_ratio, "anyres_max_N" (default
// anyres_max_9): N, the tiles' worth of patches past which the unpadded
// grid is interpolated down.
func (c *hfConfig) anyresMax() int64 {
	s := c.str("vision_aspect_ratio", "anyres_max_9")
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "anyres_max_"), 10, 64)
	if !strings.HasPrefix(s, "anyres_max_") || err != nil || n <= 0 {
		c.fail("vision_aspect_ratio", "must be \"anyres_max_N\" with N a positive integer (got %q)", s)
		return 0
	}
	return n
}
