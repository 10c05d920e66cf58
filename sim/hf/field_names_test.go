package hf

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/hftest"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// Every config.json key (and hf_config keyword) a family names a layer
// input by is one some sim/nn check names, with a value hf_config's own
// reads let through: each row fails one such check and finds the key, at
// its path, in the check's words. A size's positivity is not such a
// check: hf_config reads every size as a positive integer first ("must
// be positive", its own words), so a Field only positivity checks name
// (a model width, a state size, a conv kernel...) has no key in the maps.
// A size larger than a tower simulates is (boundRows). builtins'
// TestFieldNames fails the same checks through the layer builtins, which
// reach them all.
func TestFieldKeysReached(t *testing.T) {
	maps := map[string]map[nn.Field]string{
		"mlaKeys": mlaKeys, "gatedDeltaNetKeys": gatedDeltaNetKeys, "mamba2Keys": mamba2Keys, "nemotronMamba2Keys": nemotronMamba2Keys,
		"mllamaVisionKeys": mllamaVisionKeys, "visionTowerKeys": visionTowerKeys, "qwen3VisionTowerKeys": qwen3VisionTowerKeys,
		"moeKeys": moeKeys("num_experts", "num_experts_per_tok"), "hfKeywords": hfKeywords,
		"gemma4VisionKeys": gemma4VisionKeys, "llama4VisionKeys": llama4VisionKeys, "kimiVisionKeys": kimiVisionKeys,
		"gemma4SoftTokenKeys": gemma4SoftTokenKeys, "gemma4AudioKeys": gemma4AudioKeys, "textWidthKeys": textWidthKeys,
		"gemma3VisionKeys": gemma3VisionKeys, "gemma3TokenKeys": gemma3TokenKeys, "pixtralVisionKeys": pixtralVisionKeys, "pixtralMergeKeys": pixtralMergeKeys,
		"internVLVisionKeys": internVLVisionKeys, "internVLMergeKeys": internVLMergeKeys, "gemma4UnifiedVisionKeys": gemma4UnifiedVisionKeys,
	}
	unreached := map[string]map[nn.Field]string{} // copies: a row deletes the entries it reaches
	for name, keys := range maps {
		unreached[name] = withKey(keys, "", "")
		delete(unreached[name], "")
	}
	for _, tc := range append([]keyRow{
		{"mlaKeys", []nn.Field{nn.FieldQLora}, "deepseek-v3.2.json", map[string]any{"q_lora_rank": nil}, Options{},
			`the sparse-attention indexer needs "q_lora_rank" (its wq_b reads the q latent)`},
		{"mlaKeys", []nn.Field{nn.FieldIndexHeadDim, nn.FieldRopeDim}, "glm-5.json", map[string]any{"index_head_dim": 32}, Options{},
			`"index_head_dim" 32 is less than "qk_rope_head_dim" 64`},
		{"gatedDeltaNetKeys", []nn.Field{nn.FieldKeyHeads, nn.FieldValueHeads}, "qwen3-next-tiny.json", map[string]any{"linear_num_key_heads": 3}, Options{},
			`"linear_num_key_heads" (3) must divide "linear_num_value_heads" (4)`},
		{"mamba2Keys", []nn.Field{nn.FieldGroups, nn.FieldHeads}, "mamba-codestral-7b.json", map[string]any{"n_groups": 3}, Options{},
			`"n_groups" (3) must divide "num_heads" (128)`},
		{"nemotronMamba2Keys", []nn.Field{nn.FieldGroups, nn.FieldHeads}, "nemotron-h-8b-base-8k.json", map[string]any{"n_groups": 3}, Options{},
			`"n_groups" (3) must divide "mamba_num_heads" (128)`},
		{"mllamaVisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "mllama-tiny.json", map[string]any{"vision_config.attention_heads": 3}, Options{},
			`"vision_config.attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"mllamaVisionKeys", []nn.Field{nn.FieldPatch, nn.FieldImage}, "mllama-tiny.json", map[string]any{"vision_config.patch_size": 64}, Options{},
			`"vision_config.patch_size" (64) is larger than "vision_config.image_size" (56)`},
		{"mllamaVisionKeys", []nn.Field{nn.FieldOutputDim, nn.FieldIntermediate}, "mllama-tiny.json", map[string]any{"vision_config.vision_output_dim": 64}, Options{},
			`"vision_config.vision_output_dim" must be "vision_config.hidden_size" x (1 + the number of "vision_config.intermediate_layers_indices")`},
		{"visionTowerKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "qwen2.5-vl-tiny.json", map[string]any{"vision_config.num_heads": 5}, Options{},
			`"vision_config.num_heads" (5) must divide "vision_config.hidden_size" (32)`},
		{"visionTowerKeys", []nn.Field{nn.FieldWindow, nn.FieldPatch, nn.FieldMerge}, "qwen2.5-vl-tiny.json", map[string]any{"vision_config.window_size": 8}, Options{},
			`"vision_config.window_size" (8 pixels) must be at least "vision_config.patch_size" x "vision_config.spatial_merge_size" (28)`},
		{"qwen3VisionTowerKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "qwen3-vl-tiny.json", map[string]any{"vision_config.num_heads": 3}, Options{},
			`"vision_config.num_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"qwen3VisionTowerKeys", []nn.Field{nn.FieldPositions}, "qwen3-vl-tiny.json", map[string]any{"vision_config.num_position_embeddings": 63}, Options{},
			`"vision_config.num_position_embeddings" (63) is not a square`},
		{"qwen3VisionTowerKeys", []nn.Field{nn.FieldDeepstack}, "qwen3-vl-tiny.json", map[string]any{"vision_config.deepstack_visual_indexes": []any{1, 1}}, Options{},
			`"vision_config.deepstack_visual_indexes" names block 1 twice`},
		{"moeKeys", []nn.Field{nn.FieldTopK, nn.FieldExperts}, "qwen3-30b-a3b.json", map[string]any{"num_experts_per_tok": 129}, Options{},
			`"num_experts_per_tok" (129) must be at most "num_experts" (128)`},
		{"gemma4VisionKeys", []nn.Field{nn.FieldKVHeads, nn.FieldHeads}, "gemma4-vl-tiny.json", map[string]any{"vision_config.num_key_value_heads": 3}, Options{},
			`"vision_config.num_key_value_heads" (3) must divide "vision_config.num_attention_heads" (2); hint: Gemma4VisionAttention repeats`},
		{"gemma4VisionKeys", []nn.Field{nn.FieldHeads, nn.FieldHeadDim}, "gemma4-vl-tiny.json", map[string]any{"vision_config.head_dim": 1 << 20}, Options{},
			`"vision_config.num_attention_heads" x "vision_config.head_dim" (2 x 1048576) is more than memsh simulates (at most 1048576); hint: memsh bounds`},
		{"gemma4AudioKeys", []nn.Field{nn.FieldSubsampling}, "gemma4-av-tiny.json", map[string]any{"audio_config.subsampling_conv_channels": []any{2, 4}}, Options{},
			`"audio_config.subsampling_conv_channels" (2, 4) must be at least 4 and positive; hint: input_proj_linear reads`},
		{"gemma4VisionKeys", []nn.Field{nn.FieldHeadDim}, "gemma4-vl-tiny.json", map[string]any{"vision_config.head_dim": 18}, Options{},
			`"vision_config.head_dim" (18) must be a multiple of 4`},
		{"gemma4VisionKeys", []nn.Field{nn.FieldMerge}, "gemma4-vl-tiny.json", map[string]any{"vision_config.pooling_kernel_size": 1}, Options{},
			`"vision_config.pooling_kernel_size" 1 is not modelled`},
		{"llama4VisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "llama4-vision-tiny.json", map[string]any{"vision_config.num_attention_heads": 3}, Options{},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"llama4VisionKeys", []nn.Field{nn.FieldPatch, nn.FieldImage}, "llama4-vision-tiny.json", map[string]any{"vision_config.patch_size": 12}, Options{},
			`"vision_config.patch_size" (12) must divide "vision_config.image_size" (56)`},
		{"llama4VisionKeys", []nn.Field{nn.FieldShuffle}, "llama4-vision-tiny.json", map[string]any{"vision_config.pixel_shuffle_ratio": 0.125}, Options{},
			`"vision_config.pixel_shuffle_ratio" (1/8) must divide the 4 patches of a tile's side`},
		{"llama4VisionKeys", []nn.Field{nn.FieldHidden}, "llama4-vision-tiny.json", map[string]any{"vision_config.intermediate_size": 64}, Options{},
			`"vision_config.intermediate_size" (64) must be "vision_config.hidden_size" x 4 (128)`},
		{"llama4VisionKeys", []nn.Field{nn.FieldProjIn, nn.FieldProjOut}, "llama4-vision-tiny.json", map[string]any{"vision_config.projector_input_dim": 32}, Options{},
			`"vision_config.projector_input_dim" (32) must be "vision_config.projector_output_dim" (48)`},
		{"llama4VisionKeys", []nn.Field{nn.FieldOutputDim}, "llama4-vision-tiny.json", map[string]any{"vision_config.vision_output_dim": 32}, Options{},
			`"vision_config.vision_output_dim" (32) must be "vision_config.projector_output_dim" (48)`},
		{"kimiVisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "kimi-k2.5-tiny.json", map[string]any{"vision_config.num_attention_heads": 3}, Options{},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32) into heads of a multiple of 4`},
		{"gemma3VisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "gemma3-vl-tiny.json", map[string]any{"vision_config.num_attention_heads": 3}, Options{},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"gemma3VisionKeys", []nn.Field{nn.FieldPatch, nn.FieldImage}, "gemma3-vl-tiny.json", map[string]any{"vision_config.patch_size": 5}, Options{},
			`"vision_config.patch_size" (5) must divide "vision_config.image_size" (64)`},
		{"gemma3TokenKeys", []nn.Field{nn.FieldImageTokens}, "gemma3-vl-tiny.json", map[string]any{"mm_tokens_per_image": 15}, Options{},
			`"mm_tokens_per_image" (15) must be the square of a divisor of the 16 patches of an image's side`},
		{"pixtralVisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "mistral3-tiny.json", map[string]any{"vision_config.num_attention_heads": 3}, Options{},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32) into heads of a multiple of 4`},
		{"internVLVisionKeys", []nn.Field{nn.FieldHeads, nn.FieldDim}, "internvl-tiny.json", map[string]any{"vision_config.num_attention_heads": 3}, Options{},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"internVLVisionKeys", []nn.Field{nn.FieldPatch, nn.FieldImage}, "internvl-tiny.json", map[string]any{"vision_config.patch_size": 10}, Options{},
			`"vision_config.patch_size" (10) must divide "vision_config.image_size" (56)`},
		{"internVLMergeKeys", []nn.Field{nn.FieldShuffle}, "internvl-tiny.json", map[string]any{"downsample_ratio": 0.125}, Options{},
			`"downsample_ratio" (1/8) must divide the 4 patches of a tile's side`},
		{"hfKeywords", []nn.Field{nn.FieldImpl}, "gemma4-tiny.json", map[string]any{"global_head_dim": 512}, Options{Attn: "flash"},
			`flash-attn 2 has no kernel for head_dim 512 (at most 256); hint: Gemma 4's full-attention layers have global_head_dim 512: use attn="sdpa"`},
	}, boundRows()...) {
		keys := maps[tc.keys]
		t.Run(fmt.Sprint(tc.keys, tc.fields), func(t *testing.T) {
			if tc.opts.Attn == "" {
				tc.opts.Attn = "sdpa"
			}
			_, err := FromConfigOptions(hftest.Edit(t, tc.file, tc.edit), tc.opts)
			got := ""
			if err != nil {
				got = err.Error()
				if h := hintOf(err); h != "" {
					got += "; hint: " + h
				}
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s %v:\n got %s\nwant %s", tc.file, tc.edit, got, tc.want)
			}
			for _, f := range tc.fields {
				k, ok := keys[f]
				if !ok {
					t.Fatalf("%s has no %q", tc.keys, f)
				}
				if !regexp.MustCompile(`(^|[ "(])(vision_config\.|text_config\.|audio_config\.)?` + regexp.QuoteMeta(k) + `\b`).MatchString(tc.want) {
					t.Errorf("the row's error does not name %s[%q] = %s", tc.keys, f, k)
				}
				delete(unreached[tc.keys], f)
			}
		})
	}
	for name, keys := range unreached {
		for f, k := range keys {
			t.Errorf("%s[%q] = %q: no row reaches it (a key only a positivity check names belongs in no map)", name, f, k)
		}
	}
}

// keyRow is one of TestFieldKeysReached's: a config.json edited so that
// one check fails, and the keys its error names.
type keyRow struct {
	keys   string     // the map
	fields []nn.Field // the entries the error names
	file   string     // a config.json in sim/testdata/hf
	edit   map[string]any
	opts   Options
	want   string
}

// boundRows fail the towers' bounds (nn's checkBounds): each row sets a
// key's size past the most memsh simulates (edit, where the value is no
// plain size: a list, or two keys that must agree), and the error names
// the key with the size and the bound. A bound of 2^24 or more hf_config's
// reads reach first ("memsh takes sizes up to 16777216"): such a size
// has no row, nor a key for it alone.
func boundRows() []keyRow {
	var rows []keyRow
	for _, b := range []struct {
		keys    string
		field   nn.Field
		file    string
		key     string // its path in the file
		n, most int64
		edit    map[string]any
	}{
		{"visionTowerKeys", nn.FieldDim, "qwen2.5-vl-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20, nil},
		{"visionTowerKeys", nn.FieldHidden, "qwen2.5-vl-tiny.json", "vision_config.intermediate_size", 1<<20 + 1, 1 << 20, nil},
		{"visionTowerKeys", nn.FieldPatch, "qwen2.5-vl-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, map[string]any{"vision_config.patch_size": 1<<10 + 1, "vision_config.window_size": 1 << 12}},
		{"visionTowerKeys", nn.FieldMerge, "qwen2.5-vl-tiny.json", "vision_config.spatial_merge_size", 65, 64, map[string]any{"vision_config.spatial_merge_size": 65, "vision_config.window_size": 1 << 12}},
		{"visionTowerKeys", nn.FieldTemporal, "qwen2.5-vl-tiny.json", "vision_config.temporal_patch_size", 65, 64, nil},
		{"visionTowerKeys", nn.FieldInChans, "qwen2.5-vl-tiny.json", "vision_config.in_chans", 65, 64, nil},
		{"qwen3VisionTowerKeys", nn.FieldDim, "qwen3-vl-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20, nil},
		{"qwen3VisionTowerKeys", nn.FieldHidden, "qwen3-vl-tiny.json", "vision_config.intermediate_size", 1<<20 + 1, 1 << 20, nil},
		{"qwen3VisionTowerKeys", nn.FieldPatch, "qwen3-vl-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, nil},
		{"qwen3VisionTowerKeys", nn.FieldMerge, "qwen3-vl-tiny.json", "vision_config.spatial_merge_size", 65, 64, nil},
		{"qwen3VisionTowerKeys", nn.FieldTemporal, "qwen3-vl-tiny.json", "vision_config.temporal_patch_size", 65, 64, nil},
		{"qwen3VisionTowerKeys", nn.FieldInChans, "qwen3-vl-tiny.json", "vision_config.in_channels", 65, 64, nil},
		{"mllamaVisionKeys", nn.FieldDim, "mllama-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20, nil},
		{"mllamaVisionKeys", nn.FieldHidden, "mllama-tiny.json", "vision_config.intermediate_size", 1<<20 + 1, 1 << 20, nil},
		{"mllamaVisionKeys", nn.FieldDepth, "mllama-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"mllamaVisionKeys", nn.FieldGlobalLayers, "mllama-tiny.json", "vision_config.num_global_layers", 1<<12 + 1, 1 << 12, nil},
		{"mllamaVisionKeys", nn.FieldTiles, "mllama-tiny.json", "vision_config.max_num_tiles", 1<<8 + 1, 1 << 8, nil},
		{"mllamaVisionKeys", nn.FieldInChans, "mllama-tiny.json", "vision_config.num_channels", 65, 64, nil},
		{"mllamaVisionKeys", nn.FieldImage, "mllama-tiny.json", "vision_config.image_size", 1<<14 + 1, 1 << 14, nil},
		{"mllamaVisionKeys", nn.FieldAspects, "mllama-tiny.json", "vision_config.supported_aspect_ratios", 1<<12 + 1, 1 << 12,
			map[string]any{"vision_config.supported_aspect_ratios": slices.Repeat([]any{[]any{1, 1}}, 1<<12+1)}},
		{"llama4VisionKeys", nn.FieldDim, "llama4-vision-tiny.json", "vision_config.hidden_size", 1<<20 + 1, 1 << 20, nil},
		{"llama4VisionKeys", nn.FieldHidden, "llama4-vision-tiny.json", "vision_config.intermediate_size", 1<<22 + 1, 1 << 22, nil},
		{"llama4VisionKeys", nn.FieldDepth, "llama4-vision-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"llama4VisionKeys", nn.FieldInChans, "llama4-vision-tiny.json", "vision_config.num_channels", 65, 64, nil},
		{"llama4VisionKeys", nn.FieldImage, "llama4-vision-tiny.json", "vision_config.image_size", 1<<14 + 1, 1 << 14, nil},
		{"llama4VisionKeys", nn.FieldProjIn, "llama4-vision-tiny.json", "vision_config.projector_input_dim", 1<<20 + 1, 1 << 20, nil},
		{"llama4VisionKeys", nn.FieldProjOut, "llama4-vision-tiny.json", "vision_config.projector_output_dim", 1<<20 + 1, 1 << 20, nil},
		{"llama4VisionKeys", nn.FieldOutputDim, "llama4-vision-tiny.json", "vision_config.vision_output_dim", 1<<20 + 1, 1 << 20, nil},
		{"textWidthKeys", nn.FieldTextDim, "llama4-vision-tiny.json", "text_config.hidden_size", 1<<20 + 64, 1 << 20, nil},
		{"gemma4VisionKeys", nn.FieldDim, "gemma4-vl-tiny.json", "vision_config.hidden_size", 1<<20 + 1, 1 << 20, nil},
		{"gemma4VisionKeys", nn.FieldDepth, "gemma4-vl-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"gemma4VisionKeys", nn.FieldHidden, "gemma4-vl-tiny.json", "vision_config.intermediate_size", 1<<20 + 1, 1 << 20, nil},
		{"gemma4VisionKeys", nn.FieldPatch, "gemma4-vl-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, nil},
		{"gemma4VisionKeys", nn.FieldMerge, "gemma4-vl-tiny.json", "vision_config.pooling_kernel_size", 65, 64, nil},
		{"gemma4SoftTokenKeys", nn.FieldSoftTokens, "gemma4-vl-tiny.json", "vision_soft_tokens_per_image", 1<<20 + 1, 1 << 20, nil},
		{"gemma4AudioKeys", nn.FieldDim, "gemma4-av-tiny.json", "audio_config.hidden_size", 1<<20 + 8, 1 << 20, nil},
		{"gemma4AudioKeys", nn.FieldDepth, "gemma4-av-tiny.json", "audio_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"gemma4AudioKeys", nn.FieldOutputDim, "gemma4-av-tiny.json", "audio_config.output_proj_dims", 1<<20 + 1, 1 << 20, nil},
		{"gemma4AudioKeys", nn.FieldConvKernel, "gemma4-av-tiny.json", "audio_config.conv_kernel_size", 1<<10 + 1, 1 << 10, nil},
		{"gemma4AudioKeys", nn.FieldSubsampling, "gemma4-av-tiny.json", "audio_config.subsampling_conv_channels", 1<<16 + 4, 1 << 16,
			map[string]any{"audio_config.subsampling_conv_channels": []any{1<<16 + 4, 4}}},
		{"gemma4UnifiedVisionKeys", nn.FieldPatch, "gemma4-unified-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, nil},
		{"gemma4UnifiedVisionKeys", nn.FieldMerge, "gemma4-unified-tiny.json", "vision_config.pooling_kernel_size", 65, 64, nil},
		{"gemma4UnifiedVisionKeys", nn.FieldDim, "gemma4-unified-tiny.json", "vision_config.mm_embed_dim", 1<<20 + 1, 1 << 20,
			map[string]any{"vision_config.mm_embed_dim": 1<<20 + 1, "vision_config.output_proj_dims": 1<<20 + 1}},
		{"gemma3VisionKeys", nn.FieldDim, "gemma3-vl-tiny.json", "vision_config.hidden_size", 1<<20 + 2, 1 << 20, nil},
		{"gemma3VisionKeys", nn.FieldHidden, "gemma3-vl-tiny.json", "vision_config.intermediate_size", 1<<22 + 1, 1 << 22, nil},
		{"gemma3VisionKeys", nn.FieldDepth, "gemma3-vl-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"gemma3VisionKeys", nn.FieldInChans, "gemma3-vl-tiny.json", "vision_config.num_channels", 65, 64, nil},
		{"gemma3VisionKeys", nn.FieldImage, "gemma3-vl-tiny.json", "vision_config.image_size", 1<<14 + 4, 1 << 14, nil},
		{"gemma3TokenKeys", nn.FieldImageTokens, "gemma3-vl-tiny.json", "mm_tokens_per_image", 1<<20 + 1, 1 << 20, nil},
		{"textWidthKeys", nn.FieldTextDim, "gemma3-vl-tiny.json", "text_config.hidden_size", 1<<20 + 64, 1 << 20, nil},
		{"kimiVisionKeys", nn.FieldDim, "kimi-k2.5-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20,
			map[string]any{"vision_config.hidden_size": 1 << 21, "projection_hidden_size": 1 << 21}},
		{"kimiVisionKeys", nn.FieldHidden, "kimi-k2.5-tiny.json", "vision_config.intermediate_size", 1<<22 + 1, 1 << 22, nil},
		{"kimiVisionKeys", nn.FieldDepth, "kimi-k2.5-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"kimiVisionKeys", nn.FieldPatch, "kimi-k2.5-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, nil},
		{"kimiVisionKeys", nn.FieldMerge, "kimi-k2.5-tiny.json", "vision_config.merge_kernel_size", 65, 64,
			map[string]any{"vision_config.merge_kernel_size": []any{65, 65}}},
		{"kimiVisionKeys", nn.FieldPosHeight, "kimi-k2.5-tiny.json", "vision_config.pos_emb_height", 1<<12 + 1, 1 << 12,
			map[string]any{"vision_config.pos_emb_height": 1<<12 + 1, "vision_config.pos_emb_width": 1<<12 + 1}},
		{"kimiVisionKeys", nn.FieldPosTime, "kimi-k2.5-tiny.json", "vision_config.pos_emb_time", 1<<12 + 1, 1 << 12, nil},
		{"textWidthKeys", nn.FieldTextDim, "kimi-k2.5-tiny.json", "text_config.hidden_size", 1<<20 + 64, 1 << 20, nil},
		{"pixtralVisionKeys", nn.FieldDim, "mistral3-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20, nil},
		{"pixtralVisionKeys", nn.FieldHidden, "mistral3-tiny.json", "vision_config.intermediate_size", 1<<22 + 1, 1 << 22, nil},
		{"pixtralVisionKeys", nn.FieldDepth, "mistral3-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"pixtralVisionKeys", nn.FieldInChans, "mistral3-tiny.json", "vision_config.num_channels", 65, 64, nil},
		{"pixtralVisionKeys", nn.FieldPatch, "mistral3-tiny.json", "vision_config.patch_size", 1<<10 + 1, 1 << 10, nil},
		{"pixtralVisionKeys", nn.FieldImage, "mistral3-tiny.json", "vision_config.image_size", 1<<16 + 1, 1 << 16, nil},
		{"pixtralMergeKeys", nn.FieldMerge, "mistral3-tiny.json", "spatial_merge_size", 65, 64, nil},
		{"internVLVisionKeys", nn.FieldDim, "internvl-tiny.json", "vision_config.hidden_size", 1 << 21, 1 << 20, nil},
		{"internVLVisionKeys", nn.FieldHidden, "internvl-tiny.json", "vision_config.intermediate_size", 1<<22 + 1, 1 << 22, nil},
		{"internVLVisionKeys", nn.FieldDepth, "internvl-tiny.json", "vision_config.num_hidden_layers", 1<<12 + 1, 1 << 12, nil},
		{"internVLVisionKeys", nn.FieldInChans, "internvl-tiny.json", "vision_config.num_channels", 65, 64, nil},
	} {
		edit := b.edit
		if edit == nil {
			edit = map[string]any{b.key: b.n}
		}
		rows = append(rows, keyRow{b.keys, []nn.Field{b.field}, b.file, edit, Options{},
			fmt.Sprintf("%q (%d) is more than memsh simulates (at most %d); hint: memsh bounds each size", b.key, b.n, b.most)})
	}
	return rows
}

// Mamba-1's inner size is int(expand * hidden_size) when the file has no
// intermediate_size: an expand that makes it 0 is named as the file has
// it (the mixer's own check would say "inner size", at a module path).
func TestMambaExpandNamed(t *testing.T) {
	_, err := FromConfigOptions(hftest.Edit(t, "mamba-tiny.json", map[string]any{"expand": 0.01}), Options{Attn: "sdpa"})
	const want = `"expand" times "hidden_size" (32) must be at least 1 (got 0.01)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %s", err, want)
	}
}

// hintOf is err's hint, "" for none.
func hintOf(err error) string {
	var ue *units.Error
	if errors.As(err, &ue) {
		return ue.Hint
	}
	return ""
}
