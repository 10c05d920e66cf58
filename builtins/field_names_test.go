package builtins

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/internal/hftest"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fieldCase is one of sim/nn's checks shared by a layer builtin and
// hf_config (nn.FieldError), failed through both front ends: the builtin
// must name its keywords, hf_config the config.json keys by their path.
// Where hf_config refuses the input first with a check of its own, hfWant
// is that error (what its user reads); notKeys are config keys the
// builtin's error must not name. A layer only hf_config builds has no
// expr.
type fieldCase struct {
	name       string
	expr, want string // the builtin call and its error (message and hint)
	file       string // a config.json in sim/testdata/hf
	edit       map[string]any
	opts       hf.Options
	hfWant     string
	notKeys    []string
}

func TestFieldNames(t *testing.T) {
	const mla = `mla(64, 4, 32, q_lora_rank = 16, impl = "sdpa", `
	mlaKeys := []string{"hidden_size", "num_attention_heads", "index_n_heads", "attn="}
	gdnKeys := []string{"hidden_size", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "linear_attn"}
	mambaKeys := []string{"hidden_size", "mamba_d_state", "state_size", "d_state", "mamba_d_conv", "intermediate_size", "attn="}
	mamba2Keys := []string{"hidden_size", "num_heads", "n_groups", "state_size", "chunk_size", "mamba_num_heads"}
	visionKeys := []string{"hidden_size", "num_heads", "intermediate_size", "patch_size", "spatial_merge_size", "window_size", "fullatt_block_indexes", "out_hidden_size", "attn="}
	moeKeys := []string{"num_experts_per_tok", "num_local_experts", "num_experts", "n_routed_experts", "top_k_experts"}
	qwen35 := hf.Options{Attn: "sdpa", Arch: "Qwen3_5ForCausalLM"}
	for _, tc := range []fieldCase{
		{name: "indexer heads", expr: mla + `index_heads = 0)`, want: "mla: index_heads must be positive (got 0)",
			file: "deepseek-v3.2.json", edit: map[string]any{"index_n_heads": 0}, hfWant: `"index_n_heads" must be positive (got 0)`, notKeys: mlaKeys},
		{name: "indexer top-k", expr: mla + `index_heads = 4, index_topk = -1)`, want: "mla: index_topk must be positive (got -1)",
			file: "deepseek-v3.2.json", edit: map[string]any{"index_topk": 0}, hfWant: `"index_topk" must be positive (got 0)`, notKeys: mlaKeys},
		{name: "indexer needs the q latent", expr: `mla(64, 4, 32, impl = "sdpa", index_heads = 4)`,
			want: "mla: the sparse-attention indexer needs q_lora_rank (its wq_b reads the q latent); hint: set q_lora_rank, as DeepSeek-V3.2 and GLM-5 do",
			file: "deepseek-v3.2.json", edit: map[string]any{"q_lora_rank": nil},
			hfWant: `the sparse-attention indexer needs "q_lora_rank" (its wq_b reads the q latent); hint: set "q_lora_rank", as DeepSeek-V3.2 and GLM-5 do`, notKeys: mlaKeys},
		{name: "indexer head dim", expr: mla + `index_heads = 4, index_head_dim = 32)`,
			want: "mla: index_head_dim 32 is less than qk_rope_head_dim 64 (the indexer rotates the first qk_rope_head_dim of each head)",
			file: "glm-5.json", edit: map[string]any{"index_head_dim": 32},
			hfWant: `"index_head_dim" 32 is less than "qk_rope_head_dim" 64 (the indexer rotates the first "qk_rope_head_dim" of each head)`, notKeys: mlaKeys},
		{name: "indexer kernel", expr: `mla(64, 4, 32, q_lora_rank = 16, index_heads = 4)`,
			want: `mla: flash attention is not modelled for DeepSeek Sparse Attention; hint: use impl="sdpa": transformers has no flash path`,
			file: "deepseek-v3.2.json", opts: hf.Options{Attn: "flash"}, hfWant: `transformers has no flash-attention path for model_type "deepseek_v32"`, notKeys: mlaKeys},
		{name: "gemma4 flash", expr: `gemma4_attention(64, 4, 2, 512, impl = "flash")`,
			want: `gemma4_attention: flash-attn 2 has no kernel for head_dim 512 (at most 256); hint: Gemma 4's full-attention layers have global_head_dim 512: use impl="sdpa"`,
			file: "gemma4-tiny.json", edit: map[string]any{"global_head_dim": 512}, opts: hf.Options{Attn: "flash"},
			hfWant: `flash-attn 2 has no kernel for head_dim 512 (at most 256); hint: Gemma 4's full-attention layers have global_head_dim 512: use attn="sdpa"`, notKeys: []string{"attn="}},
		{name: "mla eager", expr: `mla(64, 4, 32, impl = "eager")`,
			want: `mla: eager attention is not modelled for multi-head latent attention; hint: use impl="sdpa" or "flash"`,
			file: "deepseek-v3.json", opts: hf.Options{Attn: "eager"}, hfWant: `hint: use attn="sdpa" or "flash"`, notKeys: mlaKeys},
		{name: "mla kernel", expr: `mla(64, 4, 32, impl = "flash3")`, want: `mla: unknown impl "flash3" (known: flash, sdpa)`,
			file: "deepseek-v3.json", opts: hf.Options{Attn: "flash3"}, hfWant: `attn must be "eager", "sdpa" or "flash" (got "flash3")`, notKeys: mlaKeys},
		{name: "gdn key heads", expr: `gated_deltanet(64, key_heads = 0)`, want: "gated_deltanet: key_heads must be positive (got 0)",
			file: "qwen3-next-tiny.json", edit: map[string]any{"linear_num_key_heads": 0}, hfWant: `"linear_num_key_heads" must be positive (got 0)`, notKeys: gdnKeys},
		{name: "gdn value head dim", expr: `gated_deltanet(64, value_head_dim = -2)`, want: "gated_deltanet: value_head_dim must be positive (got -2)",
			file: "qwen3-next-tiny.json", edit: map[string]any{"linear_value_head_dim": -2}, hfWant: `"linear_value_head_dim" must be positive (got -2)`, notKeys: gdnKeys},
		{name: "gdn heads divide", expr: `gated_deltanet(64, key_heads = 3, value_heads = 4)`,
			want: "gated_deltanet: key_heads (3) must divide value_heads (4); hint: q and k are repeated to the value heads",
			file: "qwen3-next-tiny.json", edit: map[string]any{"linear_num_key_heads": 3},
			hfWant: `"linear_num_key_heads" (3) must divide "linear_num_value_heads" (4); hint: q and k are repeated to the value heads`, notKeys: gdnKeys},
		{name: "gdn heads divide, text_config", expr: `gated_deltanet(64, key_heads = 3, value_heads = 32)`,
			want: "gated_deltanet: key_heads (3) must divide value_heads (32)",
			file: "qwen3.5-4b.json", edit: map[string]any{"text_config.linear_num_key_heads": 3}, opts: qwen35,
			hfWant: `"text_config.linear_num_key_heads" (3) must divide "text_config.linear_num_value_heads" (32)`, notKeys: gdnKeys},
		{name: "gdn kernel", expr: `gated_deltanet(64, kernel = "triton")`,
			want: `gated_deltanet: unknown gated delta rule kernel "triton"; hint: kernel is "fla" (flash-linear-attention with causal-conv1d) or "torch"`,
			file: "qwen3-next-tiny.json", opts: hf.Options{Attn: "sdpa", LinearAttn: "triton"}, hfWant: `linear_attn must be "fla" or "torch" (got "triton")`, notKeys: gdnKeys},
		{name: "mamba state", expr: `mamba(64, state = 0)`, want: "mamba: state must be positive (got 0)",
			file: "ai21-jamba-1.5-mini.json", edit: map[string]any{"mamba_d_state": 0}, hfWant: `"mamba_d_state" must be positive (got 0)`, notKeys: mambaKeys},
		{name: "mamba conv", expr: `mamba(64, conv_kernel = 0)`, want: "mamba: conv_kernel must be positive (got 0)",
			file: "mamba-tiny.json", edit: map[string]any{"conv_kernel": 0}, hfWant: `"conv_kernel" must be positive (got 0)`, notKeys: mambaKeys},
		{name: "mamba impl", expr: `mamba(64, impl = "cuda")`, want: `mamba: unknown impl "cuda" (known: jamba, fused, slow)`, notKeys: mambaKeys},
		{name: "mamba2 groups", expr: `mamba2(64, 3, groups = 2)`, want: "mamba2: groups (2) must divide heads (3)",
			file: "mamba-codestral-7b.json", edit: map[string]any{"n_groups": 3}, hfWant: `"n_groups" (3) must divide "num_heads" (128)`, notKeys: mamba2Keys},
		{name: "mamba2 groups, nemotron", expr: `mamba2(64, 4, groups = 3)`, want: "mamba2: groups (3) must divide heads (4)",
			file: "nemotron-h-8b-base-8k.json", edit: map[string]any{"n_groups": 3}, hfWant: `"n_groups" (3) must divide "mamba_num_heads" (128)`, notKeys: mamba2Keys},
		{name: "mamba2 state", expr: `mamba2(64, 4, state = 0)`, want: "mamba2: state must be positive (got 0)",
			file: "mamba-codestral-7b.json", edit: map[string]any{"state_size": 0}, hfWant: `"state_size" must be positive (got 0)`, notKeys: mamba2Keys},
		{name: "vision heads", expr: `vision_tower(64, 2, 5, 128, 64)`, want: "vision_tower: heads (5) must divide dim (64)",
			file: "qwen2.5-vl-tiny.json", edit: map[string]any{"vision_config.num_heads": 5},
			hfWant: `"vision_config.num_heads" (5) must divide "vision_config.hidden_size" (32)`, notKeys: visionKeys},
		{name: "vision window", expr: `vision_tower(64, 2, 4, 128, 64, window = 8)`, want: "vision_tower: window (8 pixels) must be at least patch x merge (28)",
			file: "qwen2.5-vl-tiny.json", edit: map[string]any{"vision_config.window_size": 8},
			hfWant: `"vision_config.window_size" (8 pixels) must be at least "vision_config.patch_size" x "vision_config.spatial_merge_size" (28)`, notKeys: visionKeys},
		{name: "vision full blocks", expr: `vision_tower(64, 2, 4, 128, 64, full_blocks = [5])`, want: "vision_tower: full_blocks names block 5, not in 0..1",
			file: "qwen2.5-vl-tiny.json", edit: map[string]any{"vision_config.fullatt_block_indexes": []any{5}},
			hfWant: `"vision_config.fullatt_block_indexes" must list layer indices in 0..3 (got 5)`, notKeys: visionKeys},
		{name: "vision merge bound", expr: `vision_tower(64, 2, 4, 128, 64, merge = 65)`,
			want: "vision_tower: merge (65) is more than memsh simulates (at most 64); hint: memsh bounds each size",
			file: "qwen2.5-vl-tiny.json", edit: map[string]any{"vision_config.spatial_merge_size": 65, "vision_config.window_size": 4096},
			hfWant: `"vision_config.spatial_merge_size" (65) is more than memsh simulates (at most 64)`, notKeys: visionKeys},
		{name: "vision eager", expr: `vision_tower(64, 2, 4, 128, 64, impl = "eager")`,
			want:    `vision_tower: the vision tower's eager attention is not modelled; hint: transformers runs it once per window with its own score matrix; use impl="sdpa" or "flash"`,
			notKeys: visionKeys},
		// MoE's top-k: each family names its experts and top-k by keys of
		// its own (top_k_experts: Gemma 4; n_routed_experts: DeepSeek).
		{name: "moe top-k", expr: `moe(64, 128, experts = 4, top_k = 8)`,
			want: "moe: top_k (8) must be at most experts (4); hint: top_k is how many of the experts each token is routed to",
			file: "mixtral-8x7b-v0.1.json", edit: map[string]any{"num_experts_per_tok": 9},
			hfWant:  `"num_experts_per_tok" (9) must be at most "num_local_experts" (8); hint: "num_experts_per_tok" is how many of the "num_local_experts" each token is routed to`,
			notKeys: moeKeys},
		{name: "moe top-k, gemma4", expr: `gemma4_moe(64, 128, 4, 8)`, want: "gemma4_moe: top_k (8) must be at most experts (4)",
			file: "gemma4-moe-tiny.json", edit: map[string]any{"top_k_experts": 5},
			hfWant: `"top_k_experts" (5) must be at most "num_experts" (4)`, notKeys: moeKeys},
		{name: "moe top-k, deepseek", file: "deepseek-v3.json", edit: map[string]any{"num_experts_per_tok": 300},
			hfWant: `"num_experts_per_tok" (300) must be at most "n_routed_experts" (256)`},
		{name: "moe top-k, kimi", file: "kimi-k2.5.json", edit: map[string]any{"text_config.num_experts_per_tok": 385},
			hfWant: `"text_config.num_experts_per_tok" (385) must be at most "text_config.n_routed_experts" (384)`},
		{name: "moe top-k, qwen3-moe", file: "qwen3-30b-a3b.json", edit: map[string]any{"num_experts_per_tok": 129},
			hfWant: `"num_experts_per_tok" (129) must be at most "num_experts" (128)`},
		{name: "moe top-k, qwen2-moe", file: "qwen1.5-moe-a2.7b.json", edit: map[string]any{"num_experts_per_tok": 61},
			hfWant: `"num_experts_per_tok" (61) must be at most "num_experts" (60)`},
		{name: "moe top-k, gpt-oss", file: "gpt-oss-20b.json", edit: map[string]any{"num_experts_per_tok": 33},
			hfWant: `"num_experts_per_tok" (33) must be at most "num_local_experts" (32)`},
		{name: "moe top-k, jamba", file: "ai21-jamba-1.5-mini.json", edit: map[string]any{"num_experts_per_tok": 17},
			hfWant: `"num_experts_per_tok" (17) must be at most "num_experts" (16)`},
		{name: "moe top-k, llama4", file: "llama4-tiny.json", edit: map[string]any{"num_experts_per_tok": 5},
			hfWant: `"num_experts_per_tok" (5) must be at most "num_local_experts" (4)`},
		{name: "moe top-k, qwen3-next", file: "qwen3-next-tiny.json", edit: map[string]any{"num_experts_per_tok": 5},
			hfWant: `"num_experts_per_tok" (5) must be at most "num_experts" (4)`},
		{name: "moe top-k, qwen3-vl-moe", file: "qwen3-vl-moe-tiny.json", edit: map[string]any{"text_config.num_experts_per_tok": 5},
			hfWant: `"text_config.num_experts_per_tok" (5) must be at most "text_config.num_experts" (4)`},
		{name: "moe top-k, glm-4.5", file: "glm-4.5-air.json", edit: map[string]any{"num_experts_per_tok": 129},
			hfWant: `"num_experts_per_tok" (129) must be at most "n_routed_experts" (128)`},
		// nn checks hf_config reached unnamed (a module path and the
		// layer's own words): JambaAttention's head_dim is hidden_size //
		// num_attention_heads, 0 when the heads outnumber the width;
		// Mllama's projector width is the text model's hidden_size, read
		// (and refused) first.
		{name: "jamba heads", file: "ai21-jamba-1.5-mini.json", edit: map[string]any{"hidden_size": 16},
			hfWant: `"num_attention_heads" (32) is more than "hidden_size" (16)`},
		{name: "mllama text width", file: "mllama-tiny.json", edit: map[string]any{"text_config.hidden_size": 0},
			hfWant: `"text_config.hidden_size" must be positive (got 0)`},
		// Llama 3.2 Vision's vision model: hf_config's alone.
		{name: "mllama vision heads", file: "mllama-tiny.json", edit: map[string]any{"vision_config.attention_heads": 3},
			hfWant: `"vision_config.attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{name: "mllama patch", file: "mllama-tiny.json", edit: map[string]any{"vision_config.patch_size": 64},
			hfWant: `"vision_config.patch_size" (64) is larger than "vision_config.image_size" (56)`},
		{name: "mllama global layers", file: "mllama-tiny.json", edit: map[string]any{"vision_config.num_global_layers": -1},
			hfWant: `"vision_config.num_global_layers" must be at least 0 (got -1)`},
		{name: "mllama output width", file: "mllama-tiny.json", edit: map[string]any{"vision_config.vision_output_dim": 64},
			hfWant: `"vision_config.vision_output_dim" is 64, but the last hidden state and 2 intermediate layers of 32 concatenate to 96; ` +
				`hint: "vision_config.vision_output_dim" must be "vision_config.hidden_size" x (1 + the number of "vision_config.intermediate_layers_indices")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.expr == "" {
				tc.checkHF(t)
				return
			}
			got := fieldErrorText(t, builtinError(tc.expr))
			if !strings.Contains(got, tc.want) {
				t.Errorf("%s:\n got %s\nwant %s", tc.expr, got, tc.want)
			}
			for _, k := range tc.notKeys {
				if regexp.MustCompile(`\b` + regexp.QuoteMeta(k)).MatchString(got) {
					t.Errorf("%s names %q, which the call does not: %s", tc.expr, k, got)
				}
			}
			if tc.file != "" {
				tc.checkHF(t)
			}
		})
	}
}

// checkHF builds the edited config.json and checks hf_config's error.
func (tc fieldCase) checkHF(t *testing.T) {
	t.Helper()
	if tc.opts.Attn == "" {
		tc.opts.Attn = "sdpa"
	}
	_, err := hf.FromConfigOptions(hftest.Edit(t, tc.file, tc.edit), tc.opts)
	if got := fieldErrorText(t, err); !strings.Contains(got, tc.hfWant) {
		t.Errorf("%s %v:\n got %s\nwant %s", tc.file, tc.edit, got, tc.hfWant)
	}
}

// builtinError evaluates expr and returns its error.
func builtinError(expr string) error {
	thread := &starlark.Thread{Name: "test"}
	(&host.State{}).Attach(thread)
	_, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", expr, Predeclared())
	return err
}

// fieldErrorText is err's message and, after "; hint: ", its hint.
func fieldErrorText(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	var ue *units.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	s := ue.Error()
	if ue.Hint != "" {
		s += "; hint: " + ue.Hint
	}
	return s
}
