package sim

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// Gemma 4's text model, parameter counts as transformers 5.17.0 counts
// them: AutoModelForCausalLM.from_config(config) on the meta device,
// sum(p.numel()) (tools/oracle/gemma4_saved.py --count CONFIG).
//
//   - gemma-4-31b-text.json: Gemma 4 31B's text_config (hidden 5376, 60
//     layers, 32 heads, 16 kv heads of 256 on the sliding layers, 4 of 512
//     on the full ones with k = v, intermediate 21504, window 1024) as
//     public loaders' tests quote the hub's google/gemma-4-31B-it config
//     (the hub is not reachable from here): 30,697,345,280, the model
//     card's "31B: 30.7B params" (its vision encoder, ~550M, apart).
//   - gemma-4-26b-a4b-text.json: the 26B A4B's (hidden 2816, 30 layers,
//     16 heads, 8 kv heads of 256, 2 of 512 with k = v, a dense MLP of
//     2112 beside 128 experts of 704, 8 a token): 25,233,141,760, the
//     model card's "25.2B total parameters, 3.8B active" (quoted by
//     vast.ai/model/gemma-4-26b-a4b-it): the experts are 22.84B, a
//     sixteenth of them (8 of 128) and the rest 3.82B.
//   - gemma-4-e2b-text.json: E2B's (hidden 1536, 35 layers, four sliding
//     to one full, 8 heads, one kv head, per-layer embeddings of 256, the
//     last 20 layers reusing the keys and values of layers 13 and 14 with
//     MLPs twice as wide) as public loaders' tests quote it:
//     4,628,569,344; less the per-layer table (262,144 x 35 x 256) 2.28 B,
//     the card's "2.3B effective"; with the vision and audio encoders
//     (~0.15 B and ~0.3 B) about the card's "5.1B total".
//   - gemma-4-e4b-text.json: E4B's (hidden 2560, 42 layers, five sliding
//     to one full, 2 kv heads, the last 18 layers sharing, intermediate
//     10240, no double-wide MLPs): 7,463,013,376; less its table 4.65 B (the
//     card says 4.5B effective), with the encoders about the card's 8B.
//     The card's figures are rounded and its "effective" not defined to
//     the parameter: the count is transformers'.
//   - the tiny configs (gemma4-e-tiny.json: per-layer embeddings, the
//     last 3 of 6 layers sharing, double-wide), and the tiny one as text_config of a gemma4
//     config.json without towers (Gemma4ForConditionalGeneration: the same
//     count under model.language_model).
func TestGemma4Params(t *testing.T) {
	for _, tc := range []struct {
		file, arch string
		want       int64
	}{
		{"gemma4-tiny.json", "", 707_072},
		{"gemma4-moe-tiny.json", "", 858_640},
		{"gemma-4-31b-text.json", "", 30_697_345_280},
		{"gemma-4-26b-a4b-text.json", "", 25_233_141_760},
		{"gemma4-e-tiny.json", "", 1_335_568},
		{"gemma-4-e2b-text.json", "", 4_628_569_344},
		{"gemma-4-e4b-text.json", "", 7_463_013_376},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Arch: tc.arch, Transformers: "5.17.0"})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.file, got, tc.want, got-tc.want)
		}
	}
}

// What one sliding and one full-attention layer of Gemma 4 keep for
// backward, in bf16, one sequence of 64 tokens: the saved storages of the
// 4-layer model less the 2-layer one's (layer_types S, F, S, F), measured
// by tools/oracle/gemma4_saved.py on the CPU (torch 2.15.0, transformers
// 5.17.0, saved_tensors_hooks, storages deduplicated, parameters
// excluded) less the layer_scalar buffers the in-place product saves
// (2 bytes a layer, the buffer itself: no memory):
//
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-tiny.json sdpa 64 2 4
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-moe-tiny.json eager 64 2 4
//
// torch._grouped_mm's backward keeps the experts' offsets (int32
// [experts], 16 bytes a layer here), which memsh's grouped_mm lowering
// counts (nn/moe_hf.go, every transformers 5 MoE family).
//
// The 2-layer model's whole count is the oracle's less the layer_scalar
// buffers and the embedding's embed_scale buffer (2 B). The rotary cos and sin q * cos saves, one pair
// a layer type (2 x 64 tokens x (32 + 64) x 2 B), are counted
// (nn.Gemma4Attention.RopeTables).
func TestGemma4Saves(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, attn string
		measured   [2]int64 // 2 and 4 layers
	}{
		{"gemma4-tiny.json", "sdpa", [2]int64{1_601_298, 2_897_430}},
		{"gemma4-tiny.json", "eager", [2]int64{1_812_242, 3_319_318}},
		{"gemma4-moe-tiny.json", "sdpa", [2]int64{2_245_682, 4_186_198}},
		{"gemma4-moe-tiny.json", "eager", [2]int64{2_456_626, 4_608_086}},
	} {
		var saved [2]int64
		for i, n := range []int{2, 4} {
			types := []any{"sliding_attention", "full_attention", "sliding_attention", "full_attention"}[:n]
			data := shrinkConfig(t, tc.file, map[string]any{"num_hidden_layers": n, "layer_types": types})
			m, err := hf.FromConfigOptions(data, hf.Options{Attn: tc.attn, Transformers: "5.17.0"})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Runtime = cpu
			saved[i] = evalPlan(t, p).SavedActivations
		}
		whole := tc.measured[0] - 2*2 - 2
		if saved[0] != whole {
			t.Errorf("%s %s: the 2-layer model saves %d bytes, want %d (%+d)", tc.file, tc.attn, saved[0], whole, saved[0]-whole)
		}
		want := tc.measured[1] - tc.measured[0] - 2*2
		if got := saved[1] - saved[0]; got != want {
			t.Errorf("%s %s: two layers save %d bytes, want %d (%+d, %+.2f %%)", tc.file, tc.attn, got, want, got-want, 100*float64(got-want)/float64(want))
		}
	}
}

// gemma4Wrap is a text config.json as the text_config of a gemma4
// config.json (Gemma4Config), with extra top-level keys.
func gemma4Wrap(t *testing.T, file string, extra map[string]any) []byte {
	t.Helper()
	var tc map[string]any
	if err := json.Unmarshal(readHF(t, file), &tc); err != nil {
		t.Fatal(err)
	}
	delete(tc, "architectures")
	c := map[string]any{"model_type": "gemma4", "architectures": []any{"Gemma4ForConditionalGeneration"}, "text_config": tc}
	for k, v := range extra {
		c[k] = v
	}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Names and shapes as transformers names them (named_parameters() of the
// tiny configs under 5.17.0): a full layer with k = v has no v_proj, the
// MoE layer's router and experts sit in the decoder layer.
func TestGemma4Names(t *testing.T) {
	for _, tc := range []struct {
		data   []byte
		arch   string
		params int64 // TestGemma4Params' count of its config
		want   map[string][]int64
	}{
		{readHF(t, "gemma4-moe-tiny.json"), "", 858_640, map[string][]int64{
			"model.layers.0.self_attn.v_proj.weight":             {64, 128},
			"model.layers.1.self_attn.q_proj.weight":             {256, 128},
			"model.layers.1.self_attn.k_proj.weight":             {64, 128},
			"model.layers.1.self_attn.k_norm.weight":             {64},
			"model.layers.1.router.proj.weight":                  {4, 128},
			"model.layers.1.router.scale":                        {128},
			"model.layers.1.router.per_expert_scale":             {4},
			"model.layers.1.experts.gate_up_proj":                {4, 128, 128},
			"model.layers.1.experts.down_proj":                   {4, 128, 64},
			"model.layers.1.post_feedforward_layernorm_1.weight": {128},
			"model.layers.1.pre_feedforward_layernorm_2.weight":  {128},
			"model.layers.1.post_feedforward_layernorm_2.weight": {128},
			"model.layers.1.mlp.gate_proj.weight":                {96, 128},
			"model.norm.weight":                                  {128},
		}},
		{gemma4Wrap(t, "gemma4-tiny.json", nil), "", 707_072, map[string][]int64{
			"model.language_model.embed_tokens.weight":              {512, 128},
			"model.language_model.layers.3.self_attn.o_proj.weight": {128, 256},
		}},
		{gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"vision_config": map[string]any{"hidden_size": 1152}}), "Gemma4ForCausalLM", 707_072, map[string][]int64{
			"model.layers.3.self_attn.o_proj.weight": {128, 256},
		}},
	} {
		m, err := hf.FromConfigOptions(tc.data, hf.Options{Attn: "sdpa", Arch: tc.arch})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.params {
			t.Errorf("%d parameters, want %d", got, tc.params)
		}
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, p := range prog.Params {
			if p.Name == "model.layers.1.self_attn.v_proj.weight" || p.Name == "model.language_model.layers.1.self_attn.v_proj.weight" {
				t.Errorf("%s: a k = v layer has no v_proj", p.Name)
			}
			if shape, ok := tc.want[p.Name]; ok {
				seen++
				if !equalShape(p.Shape, shape) {
					t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, shape)
				}
			}
		}
		if seen != len(tc.want) {
			t.Errorf("found %d of the %d named parameters", seen, len(tc.want))
		}
	}
}

// What hf_config refuses for Gemma 4, each naming the key and the way on.
func TestGemma4Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		opts hf.Options
		want string
		hint string
	}{
		{"all layers shared", shrinkConfig(t, "gemma4-tiny.json", map[string]any{"num_kv_shared_layers": 4}), hf.Options{},
			`"num_kv_shared_layers" (4) must leave a layer before the shared ones`, ""},
		{"no layer of a type before the shared ones", shrinkConfig(t, "gemma4-tiny.json", map[string]any{"num_kv_shared_layers": 3}), hf.Options{},
			`"num_kv_shared_layers" (3) leaves no earlier layer of the type of layer 1`, ""},
		{"vision pooling 1", gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"vision_config": map[string]any{"pooling_kernel_size": 1}}), hf.Options{},
			`"vision_config.pooling_kernel_size" 1 is not modelled`, "pool 3 x 3"},
		{"vision heads", gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"vision_config": map[string]any{"num_attention_heads": 16}}), hf.Options{},
			`"vision_config.num_key_value_heads" (12) must divide "vision_config.num_attention_heads" (16)`, "repeats each key/value head"},
		{"vision under flash", gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"vision_config": map[string]any{}}), hf.Options{Attn: "flash"},
			"flash-attn is not modelled for Gemma 4's vision tower", `attn="sdpa"`},
		{"audio channels", gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"audio_config": map[string]any{"subsampling_conv_channels": []any{128}}}), hf.Options{},
			`"audio_config.subsampling_conv_channels" must list the two subsampling convolutions' channels (got 1 values)`, ""},
		{"nested key", gemma4Wrap(t, "gemma4-tiny.json", map[string]any{"text_config": map[string]any{"hidden_size": 128}}), hf.Options{},
			`"text_config.num_hidden_layers"`, ""},
		{"transformers 5.4", readHF(t, "gemma4-tiny.json"), hf.Options{Transformers: "5.4.0"},
			`model_type "gemma4_text" needs transformers 5.5 or later`, `transformers="5.5.0"`},
	} {
		if tc.opts.Attn == "" {
			tc.opts.Attn = "sdpa"
		}
		_, err := hf.FromConfigOptions(tc.data, tc.opts)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg, tc.want) || !strings.Contains(ue.Hint, tc.hint) {
			t.Errorf("%s: %v (hint %q), want %q (hint with %q)", tc.name, err, hintOf(ue), tc.want, tc.hint)
		}
	}
	// The released models' full layers are 512 wide: flash-attn 2 refuses
	// them; the tiny model's are 64 wide and run.
	if _, err := hf.FromConfigOptions(readHF(t, "gemma4-tiny.json"), hf.Options{Attn: "flash"}); err != nil {
		t.Errorf("tiny under flash: %v", err)
	}
	_, err := hf.FromConfigOptions(readHF(t, "gemma-4-31b-text.json"), hf.Options{Attn: "flash"})
	if err == nil || !strings.Contains(err.Error(), "flash-attn 2 has no kernel for head_dim 512") {
		t.Errorf("31B under flash: %v", err)
	}
}

// Gemma 4's per-layer embeddings and shared keys and values (E2B, E4B),
// the whole tiny model (gemma4-e-tiny.json: 6 layers S, S, F, S, S, F,
// per-layer inputs of 16, layers 3 to 5 reusing the keys and values of
// layers 1 and 2, their MLPs twice as wide), one sequence of 64 tokens in
// bf16, measured as TestGemma4Saves measures (transformers 5.17.0, torch
// 2.15.0, CPU):
//
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-e-tiny.json sdpa 64 6
//
// less the same named gap: the buffers the
// products keep (the six layer_scalars and the two embed_scales, 2 B
// each). The per-layer inputs
// are one storage all layers' products keep; the shared layers keep no
// keys or values of their own.
func TestGemma4PerLayerSaves(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attn     string
		measured int64
	}{
		{"sdpa", 4_834_908},
		{"eager", 5_418_588},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "gemma4-e-tiny.json"), hf.Options{Attn: tc.attn, Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime = cpu
		want := tc.measured - (6+2)*2
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("%s: %d bytes saved, want %d (%+d)", tc.attn, got, want, got-want)
		}
	}
	// Under transformers' gradient checkpointing (use_reentrant=False,
	// --ckpt) against checkpoint="full": the hook sees the layers' inputs
	// and what the embeddings, the final norm and the loss keep, less the
	// embed_scale buffers (one a table). The keys and
	// values the shared layers reuse are no layer's saved tensor there, but
	// the dict that holds them is an argument the checkpointed layers keep
	// for their recompute: they stay alive from the forward into the
	// backward (a weakref to them lives after the forward;
	// tools/oracle/gemma4_saved.py --ckpt), as memsh keeps them: k and v of
	// a sliding and a full layer, 64 x (32 + 64) x 2 x 2 B. So are the
	// rotary tables, every checkpointed layer's position_embeddings
	// argument (a weakref to them lives after a checkpointed forward of
	// llama-gqa-tiny under transformers 5.25.0): one pair a layer type, 64
	// x (32 + 64) x 2 x 2 B too; and so is position_ids, [1, 64] int64, 512
	// B, the keyword argument every layer is handed (core.Repeat.
	// PositionIDs; hf_block_saved.py's held, TestCheckpointHoldsForwardOnceValues).
	for _, tc := range []struct {
		file             string
		measured, tables int64
		kept             int64
	}{
		{"gemma4-e-tiny.json", 443_472, 2, 2 * 64 * (32 + 64) * 2 * 2},
		{"gemma4-tiny.json", 346_126, 1, 64 * (32 + 64) * 2 * 2},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime = cpu
		if p.Checkpoint, err = core.ParseCheckpoint("full"); err != nil {
			t.Fatal(err)
		}
		const positionIDs = 64 * 8
		want := tc.measured - 2*tc.tables + tc.kept + positionIDs
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("%s checkpointed: %d bytes saved, want %d (%+d)", tc.file, got, want, got-want)
		}
	}
	// Names: the shared layers have no k_proj; the per-layer modules.
	m, err := hf.FromConfigOptions(readHF(t, "gemma4-e-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{
		"model.embed_tokens_per_layer.weight":             {512, 96},
		"model.per_layer_model_projection.weight":         {96, 128},
		"model.per_layer_projection_norm.weight":          {16},
		"model.layers.2.self_attn.k_proj.weight":          {64, 128},
		"model.layers.3.self_attn.q_proj.weight":          {128, 128},
		"model.layers.3.mlp.up_proj.weight":               {512, 128},
		"model.layers.0.mlp.up_proj.weight":               {256, 128},
		"model.layers.5.per_layer_input_gate.weight":      {16, 128},
		"model.layers.5.per_layer_projection.weight":      {128, 16},
		"model.layers.5.post_per_layer_input_norm.weight": {128},
	}
	seen := 0
	for _, p := range prog.Params {
		if p.Name == "model.layers.3.self_attn.k_proj.weight" || p.Name == "model.layers.5.self_attn.k_norm.weight" {
			t.Errorf("%s: a shared layer has no keys of its own", p.Name)
		}
		if shape, ok := want[p.Name]; ok {
			seen++
			if !equalShape(p.Shape, shape) {
				t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, shape)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d named parameters", seen, len(want))
	}
}
