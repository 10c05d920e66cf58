package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestCheckpointHoldsForwardOnceValues: under full checkpointing
// (use_reentrant=False) a step holds each layer's input, which the
// checkpoint saves, and what the model's forward made once before its
// layers and handed to each of them as keyword arguments: the rotary cos
// and sin and, under eager attention, the 4-D float mask (Gemma 3: a pair
// and a mask for each layer type its layers have). The checkpoint's
// partial holds them until the backward; memsh lowers them outside every
// checkpoint region (core.OutsideRegions), one storage each whatever the
// depth. Measured on the CPU, transformers 5.25.0, torch 2.15.0, batch 2
// of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py CONFIG.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache [mask] ckpt held [keepfp32]
//
// CONFIG llama-gqa-tiny.json, gemma3-tiny.json, olmo3-tiny.json,
// ernie4_5-tiny.json, ernie4_5_moe-tiny.json, hunyuan_v1_moe-tiny.json,
// minimax_m2-tiny.json, dots1-tiny.json, mistral4-tiny.json,
// solar_open-tiny.json and exaone_moe-tiny.json (with keepfp32: the
// routers as from_pretrained loads them; every layer an MoE layer but
// dots1's, mistral4's and exaone_moe's first; Mistral 4's rope pair 4
// wide, Solar Open's 24; K-EXAONE's two sliding layers and their window
// mask at any depth, its global layer unrotated;
// MiniMax's rotary pair 16 of its 32 head dims wide), arcee-tiny.json,
// apertus-tiny.json, seed_oss-tiny.json, deepseek-v4-tiny.json (with
// keepfp32; layer 0 sliding, 1 compressed sparse, 2 heavily compressed)
// or qwen3-8b.json with the row's keys set. saved is what autograd packed, held the storages handed
// to the layers that live after the forward and were not packed (weakrefs
// from a forward pre-hook). held includes position_ids, (1, 32) int64,
// 256 bytes, which every layer is handed and no op of its reads
// (core.Repeat.PositionIDs: one storage at any depth).
// Gemma 3's count has besides one 0-dim tensor of the model's dtype at
// any depth (hf_block_saved.py's v lists a () storage of 4 bytes in fp32,
// 2 in bf16): the embedding's embed_scale buffer, which its product saves
// (Gemma3TextScaledWordEmbedding: input * embed_scale.to(weight.dtype),
// the cast a no-op); memsh holds it among the buffers, not the
// activations (buffer; nn.Scale.Buffer, asserted). Gemma 3 at 3 layers is
// measured on the file with num_hidden_layers 3 (the harness sets the
// count after the config is built, whose layer_types keeps the file's two
// entries: IndexError at the third layer); OLMo 3 at 3 layers likewise,
// on olmo3-tiny.json with num_hidden_layers 3 and layer_types sliding,
// full, sliding (the row's). OLMo 3 holds a pair a layer type (each
// fp32, whatever the dtype) and a mask for its sliding layers (under
// sdpa a bool one, the full layers' causal mask none: is_causal), under
// eager a float mask a type. OLMo 3's sdpa rows are measured with mask
// (an attention_mask of ones, as a collator passes) and without
// (train(attention_mask=False)): the bool mask is [batch, 1, seq, seq]
// with one, a [1, 1, seq, seq] storage expanded over the batch without
// (masking_utils.sdpa_mask; held 5,376 and 9,472, 1,024 bytes less; the
// additive bias SDPA saves is whole either way, saved unchanged). Eager's
// float mask is torch.where over that mask, whole either way (held
// 12,544 at 1 layer, fp32, with mask and without). ERNIE 4.5 (dense and MoE alike) holds rotary_emb's
// pair in fp32 whatever the dtype (each layer's own fp32 pair, made from
// it, is recomputed under the layer's checkpoint). DeepSeek-V4 holds both
// of its pairs (main and compress) and the eager sliding-window mask at
// any depth, and keeps each layer's input streams, 4 x 64 wide.
// StarCoder2's (starcoder2-tiny.json) sdpa rows are measured with mask and without: its every layer
// slides, so SDPA gets the window's bool mask (without an
// attention_mask, held 5,376 and 3,328 at any depth).
// EXAONE 4.0's (exaone4-tiny.json: layers sliding, full, sliding) and
// Cohere 2's (cohere2-tiny.json, the same layers) too;
// its sliding layers get the window's mask, its full ones (NoPE) under
// eager the causal float mask besides, one rotary pair for all.
// LFM2 (lfm2-tiny.json; lfm2_moe-tiny.json with keepfp32, its layer 1
// dense, 2 and 3 MoE) is measured with layer_types full_attention,
// conv, conv (the file's order in a copy), so that every depth has an
// attention layer: Lfm2Model makes the rotary pair and hands it to every
// layer, conv layers too, which ignore it; a model of conv layers alone
// (1 layer of the file's order) holds it under checkpointing (held 4,352
// / 2,304) where memsh, which makes the pair for the attention layers
// that read it, has none (-4,096 / -2,048 bytes; no released LFM2 lacks
// attention layers).
// LFM3 (lfm3-tiny.json with layer_types sliding_attention,
// full_attention, conv, in a copy) holds, as OLMo 3, an fp32 pair a
// layer type its layers have (Lfm3RotaryEmbedding makes one for each
// attention type layer_types names, whatever the dtype), the sliding
// layers' bool mask under sdpa and under eager a float mask a type.
// CWM (cwm-tiny.json: layers sliding, full, sliding) holds one rotary
// pair in the model's dtype, the sliding layers' bool mask under sdpa
// (the full layers' causal mask none: is_causal) and under eager a float
// mask for each type its layers have.
// Mellum (mellum-tiny.json: layers sliding, full, sliding; a dense MLP,
// then experts) holds, as OLMo 3, a rotary pair for each layer type its
// layers have, here in the model's dtype, the sliding layers' bool mask
// under sdpa and under eager a float mask a type.
// NanoChat (nanochat-tiny.json) holds Llama's: one rotary pair, under
// eager the causal float mask; its layers' inputs are what the checkpoints
// save, the weightless norm before the layers and the soft-capped logits
// outside them.
// Kolibri-1 (kolibri1-tiny.json: layers sliding, full (NoPE), sliding)
// holds, as CWM, one rotary pair in the model's dtype, which only the
// sliding layers read, the sliding layers' bool mask under sdpa and under
// eager a float mask for each type its layers have.
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/{nanochat,kolibri1}-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache mask ckpt held
//
// Dots 3 Note (dots3_note-tiny.json, keepfp32, no attention_mask: layers
// sliding, indexed, sliding) holds a rotary pair a layer kind, the
// sliding layers' in the model's dtype, the indexed layers' fp32
// (Dots3NoteTextModel makes theirs from inputs_embeds.float()), the
// sliding layers' window mask and, from 2 layers, the causal mask the
// forward always makes for the indexed layers (allow_is_causal_skip=False:
// DeepSeek Sparse Attention's), each one bool [1, 1, 32, 32] storage
// expanded over the batch:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/dots3_note-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 ckpt held
//
// FalconMamba (falcon_mamba-tiny.json, eager: its only path) holds
// nothing besides its layers' inputs, fp32 in bf16 too (residual_in_fp32);
// measured without an attention_mask: with one, every mixer multiplies
// its input by the int64 mask (apply_mask_to_padding_states), which the
// step then holds once (512 bytes at 2 x 32 tokens; saved once without
// checkpointing), a tensor memsh's Mamba mixers do not model.
func TestCheckpointHoldsForwardOnceValues(t *testing.T) {
	olmo3 := map[string]any{"layer_types": []any{"sliding_attention", "full_attention", "sliding_attention"}}
	lfm2 := map[string]any{"layer_types": []any{"full_attention", "conv", "conv"}}
	lfm3 := map[string]any{"layer_types": []any{"sliding_attention", "full_attention", "conv"}}
	qwen3 := map[string]any{"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256}
	for _, tc := range []struct {
		file            string
		set             map[string]any
		attn, precision string
		saved, held     []int64 // at 1, 2, 3 layers
		buffer          int64   // a buffer the harness counts as saved (Gemma 3's embed_scale)
		mask            bool    // the batch carries an attention_mask (train(attention_mask=))
	}{
		{"llama-gqa-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"llama-gqa-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"llama-gqa-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"llama-gqa-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"qwen3-8b.json", qwen3, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"qwen3-8b.json", qwen3, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"qwen3-8b.json", qwen3, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"qwen3-8b.json", qwen3, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"gemma3-tiny.json", nil, "sdpa", "fp32", []int64{132616, 149000, 165384}, []int64{4352, 8448, 8448}, 4, true},
		{"gemma3-tiny.json", nil, "sdpa", "bf16", []int64{116230, 124422, 132614}, []int64{2304, 4352, 4352}, 2, true},
		{"gemma3-tiny.json", nil, "eager", "fp32", []int64{132616, 149000, 165384}, []int64{12544, 24832, 24832}, 4, true},
		{"gemma3-tiny.json", nil, "eager", "bf16", []int64{116230, 124422, 132614}, []int64{6400, 12544, 12544}, 2, true},
		{"olmo3-tiny.json", olmo3, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 10496, 10496}, 0, true},
		{"olmo3-tiny.json", olmo3, "sdpa", "bf16", []int64{115972, 124164, 132356}, []int64{6400, 10496, 10496}, 0, true},
		{"olmo3-tiny.json", olmo3, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 24832, 24832}, 0, true},
		{"olmo3-tiny.json", olmo3, "eager", "bf16", []int64{115972, 124164, 132356}, []int64{8448, 16640, 16640}, 0, true},
		{"ernie4_5-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"ernie4_5-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 4352, 4352}, 0, true},
		{"ernie4_5-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"ernie4_5-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{8448, 8448, 8448}, 0, true},
		{"ernie4_5_moe-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"ernie4_5_moe-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 4352, 4352}, 0, true},
		{"ernie4_5_moe-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"ernie4_5_moe-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{8448, 8448, 8448}, 0, true},
		{"seed_oss-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"seed_oss-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"seed_oss-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"seed_oss-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"deepseek-v4-tiny.json", nil, "eager", "fp32", []int64{283140, 348676, 414212}, []int64{10496, 10496, 10496}, 0, true},
		{"deepseek-v4-tiny.json", nil, "eager", "bf16", []int64{274948, 307716, 340484}, []int64{5376, 5376, 5376}, 0, true},
		{"starcoder2-tiny.json", nil, "sdpa", "fp32", []int64{116228, 132612, 148996}, []int64{6400, 6400, 6400}, 0, true},
		{"starcoder2-tiny.json", nil, "sdpa", "bf16", []int64{91396, 99588, 107780}, []int64{4352, 4352, 4352}, 0, true},
		{"starcoder2-tiny.json", nil, "eager", "fp32", []int64{116228, 132612, 148996}, []int64{12544, 12544, 12544}, 0, true},
		{"starcoder2-tiny.json", nil, "eager", "bf16", []int64{91396, 99588, 107780}, []int64{6400, 6400, 6400}, 0, true},
		{"exaone4-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 6400, 6400}, 0, true},
		{"exaone4-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 4352, 4352}, 0, true},
		{"exaone4-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 20736, 20736}, 0, true},
		{"exaone4-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 10496, 10496}, 0, true},
		{"cohere2-tiny.json", nil, "sdpa", "fp32", []int64{148740, 165124, 181508}, []int64{6400, 6400, 6400}, 0, true},
		{"cohere2-tiny.json", nil, "sdpa", "bf16", []int64{132612, 140804, 148996}, []int64{4352, 4352, 4352}, 0, true},
		{"cohere2-tiny.json", nil, "eager", "fp32", []int64{148740, 165124, 181508}, []int64{12544, 20736, 20736}, 0, true},
		{"cohere2-tiny.json", nil, "eager", "bf16", []int64{132612, 140804, 148996}, []int64{6400, 10496, 10496}, 0, true},
		{"lfm2-tiny.json", lfm2, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"lfm2-tiny.json", lfm2, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"lfm2-tiny.json", lfm2, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"lfm2-tiny.json", lfm2, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"hunyuan_v1_dense-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"hunyuan_v1_dense-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"hunyuan_v1_dense-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"hunyuan_v1_dense-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"hunyuan_v1_moe-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"hunyuan_v1_moe-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"hunyuan_v1_moe-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"hunyuan_v1_moe-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"minimax_m2-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"minimax_m2-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"minimax_m2-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"minimax_m2-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"dots1-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"dots1-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"dots1-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"dots1-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"mistral4-tiny.json", nil, "sdpa", "fp32", []int64{92420, 108804, 125188}, []int64{1280, 1280, 1280}, 0, false},
		{"mistral4-tiny.json", nil, "sdpa", "bf16", []int64{67844, 76036, 84228}, []int64{768, 768, 768}, 0, false},
		{"solar_open-tiny.json", nil, "sdpa", "fp32", []int64{92420, 108804, 125188}, []int64{6400, 6400, 6400}, 0, false},
		{"solar_open-tiny.json", nil, "sdpa", "bf16", []int64{67844, 76036, 84228}, []int64{3328, 3328, 3328}, 0, false},
		{"solar_open-tiny.json", nil, "eager", "fp32", []int64{92420, 108804, 125188}, []int64{14592, 14592, 14592}, 0, false},
		{"solar_open-tiny.json", nil, "eager", "bf16", []int64{67844, 76036, 84228}, []int64{7424, 7424, 7424}, 0, false},
		{"exaone_moe-tiny.json", nil, "sdpa", "fp32", []int64{92420, 108804, 125188}, []int64{5376, 5376, 5376}, 0, false},
		{"exaone_moe-tiny.json", nil, "sdpa", "bf16", []int64{67844, 76036, 84228}, []int64{3328, 3328, 3328}, 0, false},
		{"exaone_moe-tiny.json", nil, "eager", "fp32", []int64{92420, 108804, 125188}, []int64{12544, 12544, 12544}, 0, false},
		{"exaone_moe-tiny.json", nil, "eager", "bf16", []int64{67844, 76036, 84228}, []int64{6400, 6400, 6400}, 0, false},
		{"arcee-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"arcee-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"arcee-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"arcee-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"apertus-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"apertus-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"apertus-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"apertus-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"lfm2_moe-tiny.json", lfm2, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{4352, 4352, 4352}, 0, true},
		{"lfm2_moe-tiny.json", lfm2, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{2304, 2304, 2304}, 0, true},
		{"lfm2_moe-tiny.json", lfm2, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 12544, 12544}, 0, true},
		{"lfm2_moe-tiny.json", lfm2, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 6400, 6400}, 0, true},
		{"olmo3-tiny.json", olmo3, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{5376, 9472, 9472}, 0, false},
		{"olmo3-tiny.json", olmo3, "sdpa", "bf16", []int64{115972, 124164, 132356}, []int64{5376, 9472, 9472}, 0, false},
		{"olmo3-tiny.json", olmo3, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 24832, 24832}, 0, false},
		{"starcoder2-tiny.json", nil, "sdpa", "fp32", []int64{116228, 132612, 148996}, []int64{5376, 5376, 5376}, 0, false},
		{"starcoder2-tiny.json", nil, "sdpa", "bf16", []int64{91396, 99588, 107780}, []int64{3328, 3328, 3328}, 0, false},
		{"lfm3-tiny.json", lfm3, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 10496, 10496}, 0, true},
		{"lfm3-tiny.json", lfm3, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 10496, 10496}, 0, true},
		{"lfm3-tiny.json", lfm3, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 24832, 24832}, 0, true},
		{"lfm3-tiny.json", lfm3, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{8448, 16640, 16640}, 0, true},
		{"cwm-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 6400, 6400}, 0, true},
		{"cwm-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 4352, 4352}, 0, true},
		{"cwm-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 20736, 20736}, 0, true},
		{"cwm-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 10496, 10496}, 0, true},
		{"mellum-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 10496, 10496}, 0, true},
		{"mellum-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 6400, 6400}, 0, true},
		{"mellum-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 24832, 24832}, 0, true},
		{"mellum-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 12544, 12544}, 0, true},
		{"nanochat-tiny.json", nil, "sdpa", "fp32", []int64{198148, 214532, 230916}, []int64{4352, 4352, 4352}, 0, true},
		{"nanochat-tiny.json", nil, "sdpa", "bf16", []int64{148996, 157188, 165380}, []int64{2304, 2304, 2304}, 0, true},
		{"nanochat-tiny.json", nil, "eager", "fp32", []int64{198148, 214532, 230916}, []int64{12544, 12544, 12544}, 0, true},
		{"nanochat-tiny.json", nil, "eager", "bf16", []int64{148996, 157188, 165380}, []int64{6400, 6400, 6400}, 0, true},
		{"kolibri1-tiny.json", nil, "sdpa", "fp32", []int64{132356, 148740, 165124}, []int64{6400, 6400, 6400}, 0, true},
		{"kolibri1-tiny.json", nil, "sdpa", "bf16", []int64{107780, 115972, 124164}, []int64{4352, 4352, 4352}, 0, true},
		{"kolibri1-tiny.json", nil, "eager", "fp32", []int64{132356, 148740, 165124}, []int64{12544, 20736, 20736}, 0, true},
		{"kolibri1-tiny.json", nil, "eager", "bf16", []int64{107780, 115972, 124164}, []int64{6400, 10496, 10496}, 0, true},
		{"dots3_note-tiny.json", nil, "sdpa", "fp32", []int64{92420, 108804, 125188}, []int64{2816, 4864, 4864}, 0, false},
		{"dots3_note-tiny.json", nil, "sdpa", "bf16", []int64{67844, 76036, 84228}, []int64{2048, 4096, 4096}, 0, false},
		{"falcon_mamba-tiny.json", nil, "eager", "fp32", []int64{59652, 67844, 76036}, []int64{0, 0, 0}, 0, false},
		{"falcon_mamba-tiny.json", nil, "eager", "bf16", []int64{51460, 59652, 67844}, []int64{0, 0, 0}, 0, false},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			p := hfOraclePlan(t, ropeConfig(t, tc.file, layers, tc.set), hf.Options{Attn: tc.attn, Transformers: "5.25.0"}, tc.precision)
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			p.NoAttentionMask = !tc.mask
			want := saved + tc.held[i] - tc.buffer
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s %s mask %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.attn, tc.precision, tc.mask, layers, got, want, got-want)
			}
			if tc.buffer > 0 {
				if got := embedScaleBytes(t, p); got != tc.buffer {
					t.Errorf("%s %s: embed_scale buffer %d bytes, transformers %d", tc.file, tc.precision, got, tc.buffer)
				}
			}
		}
	}
}

// TestNoAttentionMaskAtScale: OLMo 3 7B (24 sliding layers of 4096 in 32)
// under full checkpointing at batch 8 of 8,192 tokens holds the sliding
// layers' one boolean SDPA mask from its forward into its backward: 512
// MiB, [8, 1, 8192, 8192], where the batch carries an attention_mask;
// 64 MiB, one [1, 1, 8192, 8192] storage expanded over the batch, where
// it carries none (train(attention_mask=False); the figures at 2 x 32
// tokens are TestCheckpointHoldsForwardOnceValues' against transformers).
func TestNoAttentionMaskAtScale(t *testing.T) {
	held := func(noMask bool) int64 {
		m, err := hf.FromConfig(readHF(t, "olmo-3-1025-7b.json"), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Batch, p.Seq, p.NoAttentionMask = 8, 8192, noMask
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		return evalPlan(t, p).SavedActivations
	}
	const whole, expanded = 8 * 8192 * 8192, 8192 * 8192
	if got := held(false) - held(true); got != whole-expanded {
		t.Errorf("an attention_mask holds %d bytes more than none, want %d (512 MiB less 64 MiB)", got, whole-expanded)
	}
}

// hfOraclePlan is the step hf_block_saved.py measures for a config: 2
// samples of 32 tokens on the CPU runtime (torch 2.15.0) in precision.
func hfOraclePlan(t *testing.T, config []byte, opts hf.Options, precision string) *core.Plan {
	t.Helper()
	m, err := hf.FromConfigOptions(config, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
	if p.Precision, err = core.LookupPrecision(precision); err != nil {
		t.Fatal(err)
	}
	return p
}

// embedScaleBytes are the bytes of the embed_scale buffers p's model holds.
func embedScaleBytes(t *testing.T, p *core.Plan) int64 {
	t.Helper()
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, b := range prog.Buffers {
		if strings.HasSuffix(b.Name, "embed_scale") {
			n += b.Dtype.Bytes(core.Numel(b.Shape))
		}
	}
	return n
}

// TestEmbedScaleBufferReleases: the Gemma families' embedding scale is a
// 0-dim buffer of the embedding, in the parameters' dtype (2 B in bf16),
// where the release holds one: Gemma 3's and Gemma 4's in every release
// (Gemma3TextScaledWordEmbedding's register_buffer in 4.57.1; Gemma 4's
// E2B and E4B, and Gemma 3n, scale their per-layer embeddings by a second
// one), Gemma's and
// Gemma 2's from 5.4.0 (the 5.3.0 wheel multiplies by a host tensor made
// in the forward; hf.gemmaScaleBufferSince).
func TestEmbedScaleBufferReleases(t *testing.T) {
	for _, tc := range []struct {
		file, version string
		bytes         int64
	}{
		{"gemma-tiny.json", "5.3.0", 0},
		{"gemma-tiny.json", "5.4.0", 2},
		{"gemma2-tiny.json", "5.3.0", 0},
		{"gemma2-tiny.json", "5.25.0", 2},
		{"gemma3-tiny.json", "4.57.1", 2},
		{"gemma3-tiny.json", "5.25.0", 2},
		{"gemma4-tiny.json", "5.17.0", 2},
		{"gemma4-e-tiny.json", "5.17.0", 4}, // the per-layer embeddings' scale besides (nn.Gemma4Embed)
		{"llama-gqa-tiny.json", "5.25.0", 0},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		if got := embedScaleBytes(t, tinyPlan(t, m)); got != tc.bytes {
			t.Errorf("%s %s: embed_scale buffer %d bytes, want %d", tc.file, tc.version, got, tc.bytes)
		}
	}
}

// TestPositionIDsHeldOnlyUnderCheckpointing: the [1, seq] int64
// position_ids every decoder layer is handed (core.Model.PositionIDs) is
// held into the backward by the checkpointed layers alone, 8 bytes a
// token whatever the batch and depth (Llama-3-8B's 32 layers, batch 2 of
// 4,096 tokens: 32 KiB); without checkpointing no layer saves it.
func TestPositionIDsHeldOnlyUnderCheckpointing(t *testing.T) {
	for _, tc := range []struct {
		ckpt string
		held int64
	}{
		{"full", 8 * 4096},
		{"none", 0},
	} {
		saved := func(positionIDs bool) int64 {
			m, err := hf.FromConfig(readHF(t, "llama-3-8b.json"), "sdpa")
			if err != nil {
				t.Fatal(err)
			}
			m.PositionIDs = positionIDs
			p := tinyPlan(t, m)
			p.Batch, p.Seq = 2, 4096
			if p.Checkpoint, err = core.ParseCheckpoint(tc.ckpt); err != nil {
				t.Fatal(err)
			}
			return evalPlan(t, p).SavedActivations
		}
		if got := saved(true) - saved(false); got != tc.held {
			t.Errorf("checkpoint %s: position_ids hold %d bytes, want %d", tc.ckpt, got, tc.held)
		}
	}
}
