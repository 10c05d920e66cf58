package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// Gemma 4 unified (model types gemma4_unified and gemma4_unified_text),
// as transformers 5.25.0 builds it (models/gemma4_unified/
// modular_gemma4_unified.py): Gemma 4's text model (buildGemma4,
// gemma4.go) without per-layer embeddings and without the MoE block
// (Gemma4UnifiedTextConfig drops hidden_size_per_layer_input,
// vocab_size_per_layer_input, enable_moe_block and the experts' keys:
// transformers builds the same model whatever they say, and so does
// memsh), a sliding window of 1024 and use_bidirectional_attention
// "vision" by default; and, for gemma4_unified
// (Gemma4UnifiedForConditionalGeneration), no vision or audio tower: the
// merged pixel patches go through embed_vision (nn.Gemma4UnifiedVision)
// and the raw audio frames through embed_audio (nn.Gemma4UnifiedAudio,
// weights only).

// gemma4UnifiedVisionKeys name the vision embedder's checked inputs as
// vision_config has them, and the top-level vision_soft_tokens_per_image.
var gemma4UnifiedVisionKeys = map[nn.Field]string{
	nn.FieldPatch: "patch_size", nn.FieldMerge: "pooling_kernel_size", nn.FieldDim: "mm_embed_dim",
}

// gemma4UnifiedTowers reads vision_config (Gemma4UnifiedVisionConfig's
// defaults: patches of 16 merged 3 x 3, mm_embed_dim and
// output_proj_dims 3840, a 1,120-row position table) and audio_config
// (Gemma4UnifiedAudioConfig: audio_embed_dim 640) into the embedders
// Gemma4UnifiedModel builds for them (none for a null or missing one;
// none at all for the text model alone, causal).
func gemma4UnifiedTowers(c *hfConfig, causal bool) []core.Layer {
	if causal {
		return nil
	}
	text := c.sub("text_config")
	if c.err != nil {
		return nil
	}
	var towers []core.Layer
	if c.has("vision_config") {
		vc := c.sub("vision_config")
		if c.err != nil {
			return nil
		}
		v := &nn.Gemma4UnifiedVision{Patch: vc.sizeOr("patch_size", 16), Pool: vc.sizeOr("pooling_kernel_size", 3),
			EmbedDim: vc.sizeOr("mm_embed_dim", 3840), Positions: vc.sizeOr("mm_posemb_size", 1120),
			MaxSoftTokens: c.sizeOr("vision_soft_tokens_per_image", 280), TextDim: text.size("hidden_size")}
		if out := vc.sizeOr("output_proj_dims", 3840); vc.err == nil && out != v.EmbedDim {
			vc.fail("output_proj_dims", "(%d) must equal mm_embed_dim (%d): Gemma4UnifiedVisionEmbedder's multimodal_embedder reads pos_norm's "+
				"mm_embed_dim-wide output as output_proj_dims wide (transformers builds the model, its forward fails); set both", out, v.EmbedDim)
		}
		if c.err = firstErr(c, text, vc); c.err != nil {
			return nil
		}
		c.checkLayer(v, pathKeys(objectKeys{vc, gemma4UnifiedVisionKeys}, objectKeys{c, gemma4SoftTokenKeys}))
		if c.err != nil {
			return nil
		}
		towers = append(towers, v)
	}
	if c.has("audio_config") {
		ac := c.sub("audio_config")
		if c.err != nil {
			return nil
		}
		// hidden_size, output_proj_dims and audio_samples_per_token are
		// Gemma4UnifiedAudioConfig's properties over audio_embed_dim: each
		// sets it, and wins over the key itself.
		dim, from := ac.sizeOr("audio_embed_dim", 640), "audio_embed_dim"
		for _, k := range []string{"hidden_size", "output_proj_dims", "audio_samples_per_token"} {
			if !ac.has(k) {
				continue
			}
			if v := ac.size(k); from != "audio_embed_dim" && v != dim && ac.err == nil {
				ac.fail(k, "(%d) and %q (%d) both set audio_embed_dim (Gemma4UnifiedAudioConfig's properties); keep one", v, ac.at(from), dim)
			} else {
				dim, from = v, k
			}
		}
		if c.err = firstErr(c, text, ac); c.err != nil {
			return nil
		}
		a := &nn.Gemma4UnifiedAudio{Dim: dim, TextDim: text.size("hidden_size")}
		ac.checkLayer(a, map[nn.Field]string{nn.FieldDim: from})
		if ac.err != nil {
			c.err = ac.err
			return nil
		}
		towers = append(towers, a)
	}
	return towers
}
