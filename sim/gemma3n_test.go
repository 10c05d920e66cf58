package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Gemma 3n's text model, parameter counts as transformers 5.25.0 counts
// them on the meta device (Gemma3nForCausalLM from the config, sum of
// numel; torch 2.15.0):
//
//		python tools/oracle/gemma3n_params.py sim/testdata/hf/{gemma3n-tiny,gemma-3n-e2b-text,gemma-3n-e4b-text}.json
//		PYTHONPATH=TIMM python tools/oracle/gemma3n_params.py sim/testdata/hf/gemma-3n-e{2,4}b-text.json --full
//
//	  - gemma-3n-e2b-text.json: google/gemma-3n-E2B-it's text_config as
//	    public loaders quote it (hidden 2048, 30 layers, every fifth full,
//	    8 heads and 2 kv heads of 256, intermediate 8192, the last 10 layers
//	    reusing keys and values, 4 AltUp streams, LAuReL rank 64, per-layer
//	    embeddings of 256 over 262,144 ids, vocabulary 262,400, tied; the
//	    hub is not reachable from here): 4,435,182,688. Of these the
//	    per-layer table is 2,013,265,920 and the token embedding
//	    537,395,200; the checkpoint holds besides the k_proj, v_proj and
//	    k_norm of the 10 sharing layers (20,974,080), which transformers
//	    5.6 and later drop on load. Less both tables, plus those,
//	    1,905,495,648: the model card's "effective" 2B, the 1.91B of the
//	    E2B slice of MatFormer (mistral.rs's docs/GEMMA3N.md: "Config for
//	    official E2B Model (1.91B params, 30 layers)"). The checkpoint's
//	    class, Gemma3nForConditionalGeneration, adds the MobileNet-V5 vision
//	    tower (294,126,912, timm 1.0.31's mobilenetv5_300m_enc), the audio
//	    encoder (681,348,640) and their embedders (4,460,544 and 3,345,408):
//	    5,418,464,192 (gemma3n_params.py --full), 5,439,438,272 with the
//	    dropped kv weights, the hub's "5.44B"; not modelled (the class is
//	    refused).
//	  - gemma-3n-e4b-text.json: E4B's (35 layers, intermediate 16384, 15
//	    sharing): 6,835,235,568; table 2,348,810,240, embedding the same,
//	    dropped 31,461,120: 3,980,491,248 effective (the card's 4B;
//	    mistral.rs's "Main model (3.98B params, 35 layers)"); with the same
//	    towers 7,818,517,072, 7,849,978,192 with the dropped kv weights, the
//	    hub's "7.85B".
//	  - gemma3n-tiny.json (64 wide, 4 layers S F S F, intermediate 128 96
//	    128 96, the last 2 sharing, per-layer inputs of 16 over 128 ids,
//	    vocabulary 256, LAuReL rank 8): 196,080; as the text_config of a
//	    gemma3n config.json loaded as Gemma3nForCausalLM, the same.
func TestGemma3nParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		arch string
		want int64
	}{
		{"gemma3n-tiny.json", readHF(t, "gemma3n-tiny.json"), "", 196_080},
		{"gemma3n-tiny.json as gemma3n", gemma3nWrap(t, "gemma3n-tiny.json"), "Gemma3nForCausalLM", 196_080},
		{"gemma-3n-e2b-text.json", readHF(t, "gemma-3n-e2b-text.json"), "", 4_435_182_688},
		{"gemma-3n-e4b-text.json", readHF(t, "gemma-3n-e4b-text.json"), "", 6_835_235_568},
	} {
		m, err := hf.FromConfigOptions(tc.data, hf.Options{Attn: "sdpa", Arch: tc.arch})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
	}
}

// What Gemma 3n keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast), gemma3n-tiny.json cut to 1 to 4
// layers (S; S F; S F S with the last reusing layer 0's keys and values;
// S F S F with the last two reusing layers 0's and 1's: gemma3nTiny), 2
// samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py CUT.json {1,2,3,4} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// CUT.json is gemma3nTiny's file (num_hidden_layers, num_kv_shared_layers
// 0, 0, 1, 2, and the per-layer lists cut). The first two layers' MLPs
// run the Gaussian top-k (sparsity 0.95), the last two not. memsh does
// not count the 0-dim buffers products save (embed_scale twice,
// per_layer_projection_scale, per_layer_input_scale, and each layer's
// router_input_scale: the buffers themselves, no memory; 4 bytes each in
// fp32, 2 in bf16); it counts the 0-dim std multiplier each sparse MLP
// makes.
func TestGemma3nSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [4]int64 // hf_block_saved.py at 1 to 4 layers
	}{
		{"fp32", "sdpa", [4]int64{1_332_060, 2_133_668, 2_937_064, 3_666_732}},
		{"fp32", "eager", [4]int64{1_355_612, 2_205_348, 3_032_296, 3_826_476}},
		{"bf16", "sdpa", [4]int64{873_072, 1_430_420, 1_975_286, 2_483_288}},
		{"bf16", "eager", [4]int64{917_104, 1_530_772, 2_119_670, 2_692_184}},
	} {
		scalar := int64(4)
		if tc.precision == "bf16" {
			scalar = 2
		}
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			p := hfOraclePlan(t, gemma3nTiny(t, layers, gemma3nShared[i]), hf.Options{Attn: tc.attn}, tc.precision)
			want := saved - scalar*(4+layers)
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, layers, got, want, got-want)
			}
		}
	}
}

// Before transformers 5.21 the per-layer lookup reads the token ids as
// they are (5.21 sets those past vocab_size_per_layer_input to 0 with
// torch.where: a new int64 tensor the lookup keeps, 512 bytes at 2 x 32
// tokens). Measured on gemma3n-tiny.json cut to 1 layer with
// vocab_size_per_layer_input 256 (5.20 fails on an id past the table),
// fp32, SDPA:
//
//	python tools/oracle/hf_block_saved.py CUT.json 1 2 32 float32 sdpa nocache                       # 1,332,060
//	PYTHONPATH=TF520 python tools/oracle/hf_block_saved.py CUT.json 1 2 32 float32 sdpa nocache      # 1,331,552
//
// TF520 the 5.20.0 wheel (pip install --no-deps --target). 5.20 keeps
// besides the 0-dim eps of torch.maximum in the streams' magnitude (4
// bytes, not counted; 5.23 clamps instead).
func TestGemma3nPerLayerIDsByRelease(t *testing.T) {
	var c map[string]any
	if err := json.Unmarshal(gemma3nTiny(t, 1, 0), &c); err != nil {
		t.Fatal(err)
	}
	c["vocab_size_per_layer_input"] = 256
	cfg, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		release       string
		saved, missed int64
	}{{"5.25.0", 1_332_060, 4 * 5}, {"5.20.0", 1_331_552, 4 * 6}} {
		p := hfOraclePlan(t, cfg, hf.Options{Attn: "sdpa", Transformers: tc.release}, "fp32")
		if got, want := evalPlan(t, p).SavedActivations, tc.saved-tc.missed; got != want {
			t.Errorf("transformers %s: memsh keeps %d bytes, transformers %d (%+d)", tc.release, got, want, got-want)
		}
	}
}

// Under full checkpointing (use_reentrant=False, an attention_mask of
// ones) the step keeps each layer's input streams and, as
// TestCheckpointHoldsForwardOnceValues explains, what the forward made
// once and handed the layers (rotary cos and sin of each type, the
// sliding layers' mask, position_ids: core.Model.PositionIDs), and
// the keys and values the sharing layers read: shared_kv_states, a
// KVSharingDict the checkpointed layers' keyword arguments hold
// (hf_block_saved.py counts a mapping's tensors among held):
//
//	python tools/oracle/hf_block_saved.py CUT.json {1,2,4} 2 32 {float32,bfloat16} {sdpa,eager} nocache mask ckpt held
//
// At 4 layers layers 0 and 1 leave their keys and values (8,192 bytes
// each in fp32) for layers 2 and 3. Not modelled: a type whose last
// layer leaves them with no later layer of that type to read them (5.25
// stores them anyway, kv_sharing_modes); the dict then holds them and
// memsh does not (3 layers S F S with 1 sharing: 16,384 bytes fewer in
// fp32). No released configuration leaves a type unread.
func TestGemma3nCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved, held     [3]int64 // at 1, 2 and 4 layers
	}{
		{"fp32", "sdpa", [3]int64{543_252, 621_588, 778_260}, [3]int64{6_400, 10_496, 43_264}},
		{"fp32", "eager", [3]int64{543_252, 621_588, 778_260}, [3]int64{12_544, 24_832, 57_600}},
		{"bf16", "sdpa", [3]int64{326_476, 369_996, 457_036}, [3]int64{4_352, 6_400, 22_784}},
		{"bf16", "eager", [3]int64{326_476, 369_996, 457_036}, [3]int64{6_400, 12_544, 28_928}},
	} {
		scalar := int64(4)
		if tc.precision == "bf16" {
			scalar = 2
		}
		for i, layers := range []int64{1, 2, 4} {
			p := hfOraclePlan(t, gemma3nTiny(t, layers, gemma3nShared[layers-1]), hf.Options{Attn: tc.attn}, tc.precision)
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			want := tc.saved[i] + tc.held[i] - 4*scalar
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, layers, got, want, got-want)
			}
		}
	}
}

// gemma3nShared is num_kv_shared_layers of gemma3nTiny at 1 to 4 layers.
var gemma3nShared = [4]int64{0, 0, 1, 2}

// gemma3nTiny is gemma3n-tiny.json cut to its first n layers (layer_types,
// intermediate_size and activation_sparsity_pattern with them), the last
// shared of them reusing keys and values.
func gemma3nTiny(t *testing.T, n, shared int64) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(readHF(t, "gemma3n-tiny.json"), &c); err != nil {
		t.Fatal(err)
	}
	c["num_hidden_layers"], c["num_kv_shared_layers"] = n, shared
	for _, k := range []string{"layer_types", "intermediate_size", "activation_sparsity_pattern"} {
		c[k] = c[k].([]any)[:n]
	}
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// gemma3nWrap is a gemma3n_text config.json as the text_config of a
// gemma3n one (Gemma3nConfig) without its towers' configs.
func gemma3nWrap(t *testing.T, file string) []byte {
	t.Helper()
	var tc map[string]any
	if err := json.Unmarshal(readHF(t, file), &tc); err != nil {
		t.Fatal(err)
	}
	delete(tc, "architectures")
	data, err := json.Marshal(map[string]any{"model_type": "gemma3n", "architectures": []any{"Gemma3nForConditionalGeneration"}, "text_config": tc})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Names and shapes as transformers 5.25.0 names them (named_parameters()
// of gemma3n-tiny.json): layer 0 computes its keys and values, layer 3
// reuses layer 1's (no k_proj, v_proj, k_norm).
func TestGemma3nParamNames(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "gemma3n-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]int64{}
	for _, p := range prog.Params {
		if p.TiedTo >= 0 {
			continue // lm_head.weight, tied: named_parameters() lists embed_tokens.weight once
		}
		n := strings.TrimPrefix(p.Name, "model.")
		if !strings.HasPrefix(n, "layers.") || strings.HasPrefix(n, "layers.0.") || strings.HasPrefix(n, "layers.3.") {
			got[n] = p.Shape
		}
	}
	want := map[string][]int64{
		"embed_tokens.weight":                        {256, 64},
		"layers.0.self_attn.q_proj.weight":           {64, 64},
		"layers.0.self_attn.q_norm.weight":           {16},
		"layers.0.self_attn.k_proj.weight":           {32, 64},
		"layers.0.self_attn.v_proj.weight":           {32, 64},
		"layers.0.self_attn.k_norm.weight":           {16},
		"layers.0.self_attn.o_proj.weight":           {64, 64},
		"layers.0.mlp.gate_proj.weight":              {128, 64},
		"layers.0.mlp.up_proj.weight":                {128, 64},
		"layers.0.mlp.down_proj.weight":              {64, 128},
		"layers.0.input_layernorm.weight":            {64},
		"layers.0.post_attention_layernorm.weight":   {64},
		"layers.0.pre_feedforward_layernorm.weight":  {64},
		"layers.0.post_feedforward_layernorm.weight": {64},
		"layers.0.altup.correct_output_scale":        {64},
		"layers.0.altup.correction_coefs.weight":     {4, 4},
		"layers.0.altup.prediction_coefs.weight":     {16, 4},
		"layers.0.altup.modality_router.weight":      {4, 64},
		"layers.0.altup.router_norm.weight":          {64},
		"layers.0.laurel.linear_left.weight":         {8, 64},
		"layers.0.laurel.linear_right.weight":        {64, 8},
		"layers.0.laurel.post_laurel_norm.weight":    {64},
		"layers.0.per_layer_input_gate.weight":       {16, 64},
		"layers.0.per_layer_projection.weight":       {64, 16},
		"layers.0.post_per_layer_input_norm.weight":  {64},
		"layers.3.self_attn.q_proj.weight":           {64, 64},
		"layers.3.self_attn.q_norm.weight":           {16},
		"layers.3.self_attn.o_proj.weight":           {64, 64},
		"layers.3.mlp.gate_proj.weight":              {96, 64},
		"layers.3.mlp.up_proj.weight":                {96, 64},
		"layers.3.mlp.down_proj.weight":              {64, 96},
		"layers.3.input_layernorm.weight":            {64},
		"layers.3.post_attention_layernorm.weight":   {64},
		"layers.3.pre_feedforward_layernorm.weight":  {64},
		"layers.3.post_feedforward_layernorm.weight": {64},
		"layers.3.altup.correct_output_scale":        {64},
		"layers.3.altup.correction_coefs.weight":     {4, 4},
		"layers.3.altup.prediction_coefs.weight":     {16, 4},
		"layers.3.altup.modality_router.weight":      {4, 64},
		"layers.3.altup.router_norm.weight":          {64},
		"layers.3.laurel.linear_left.weight":         {8, 64},
		"layers.3.laurel.linear_right.weight":        {64, 8},
		"layers.3.laurel.post_laurel_norm.weight":    {64},
		"layers.3.per_layer_input_gate.weight":       {16, 64},
		"layers.3.per_layer_projection.weight":       {64, 16},
		"layers.3.post_per_layer_input_norm.weight":  {64},
		"norm.weight":                        {64},
		"embed_tokens_per_layer.weight":      {128, 64},
		"per_layer_model_projection.weight":  {64, 64},
		"per_layer_projection_norm.weight":   {16},
		"altup_projections.0.weight":         {64, 64},
		"altup_projections.1.weight":         {64, 64},
		"altup_projections.2.weight":         {64, 64},
		"altup_unembed_projections.0.weight": {64, 64},
		"altup_unembed_projections.1.weight": {64, 64},
		"altup_unembed_projections.2.weight": {64, 64},
	}
	for n, s := range want {
		if g, ok := got[n]; !ok || !equalShape(g, s) {
			t.Errorf("%s: memsh has %v, transformers %v", n, g, s)
		}
	}
	for n, s := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s %v: not a parameter of transformers' model", n, s)
		}
	}
}

// The configs memsh refuses, each naming the key or the class: the
// towers, releases before 5.6, malformed per-layer lists.
func TestGemma3nConfigErrors(t *testing.T) {
	// intermediate_size may be one value for every layer (transformers
	// 5.25.0 counts 183,792 with 96, gemma3n_params.py); one
	// activation_sparsity_pattern for all fails there ("TypeError: object
	// of type 'float' has no len()"), as memsh refuses it below
	one, err := hf.FromConfig([]byte(strings.Replace(string(readHF(t, "gemma3n-tiny.json")), `[128, 96, 128, 96]`, `96`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := one.Params(), int64(196_080-2*3*64*32); got != want {
		t.Errorf("intermediate_size 96 for every layer: %d parameters, want %d (two MLPs of 128 fewer)", got, want)
	}
	tiny := string(readHF(t, "gemma3n-tiny.json"))
	for _, tc := range []struct {
		name, cfg, arch, transformers, want string
	}{
		{"towers", string(gemma3nWrap(t, "gemma3n-tiny.json")), "", "", "model class Gemma3nForConditionalGeneration holds them"},
		{"base with towers", string(gemma3nWrap(t, "gemma3n-tiny.json")), "Gemma3nModel", "", "vision tower"},
		{"5.5", tiny, "", "5.5.0", `needs transformers 5.6 or later`},
		{"inter list", strings.Replace(tiny, `[128, 96, 128, 96]`, `[128, 96]`, 1), "", "", `"intermediate_size" must be one value, or one per layer (4; got a list of 2)`},
		{"sparsity", strings.Replace(tiny, `[0.95, 0.95, 0.0, 0.0]`, `[0.95, 1.5, 0.0, 0.0]`, 1), "", "", `"activation_sparsity_pattern" entry 1 must be a fraction in [0, 1)`},
		{"inter entry", strings.Replace(tiny, `[128, 96, 128, 96]`, `[128, "a", 128, 96]`, 1), "", "", `"intermediate_size" entry 1 must be a positive integer (got the string "a")`},
		{"inter one", strings.Replace(tiny, `[128, 96, 128, 96]`, `"big"`, 1), "", "", `"intermediate_size" must be a positive integer (got the string "big")`},
		{"sparsity one", strings.Replace(tiny, `[0.95, 0.95, 0.0, 0.0]`, `0.5`, 1), "", "", `"activation_sparsity_pattern" must list one sparsity per layer (4; got 0.5)`},
		{"streams", strings.Replace(tiny, `"altup_num_inputs": 4`, `"altup_num_inputs": 1`, 1), "", "", `"altup_num_inputs" must be at least 2`},
		{"active", strings.Replace(tiny, `"altup_active_idx": 0`, `"altup_active_idx": 4`, 1), "", "", `"altup_active_idx" must name one of`},
		{"sharing", strings.Replace(tiny, `"num_kv_shared_layers": 2`, `"num_kv_shared_layers": 3`, 1), "", "", `"num_kv_shared_layers" (3) leaves no earlier layer`},
	} {
		_, err := hf.FromConfigOptions([]byte(tc.cfg), hf.Options{Attn: "sdpa", Arch: tc.arch, Transformers: tc.transformers})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.want)
		}
	}
}

// PEFT's LoRA (rank 4) on gemma3n-tiny.json: get_peft_model's trainable
// and total parameters (peft 0.21.2, transformers 5.25.0). "all-linear"
// reaches every nn.Linear but lm_head: AltUp's altup_projections,
// altup_unembed_projections, modality_router (run twice a layer, one
// adapter), prediction_coefs and correction_coefs (whose adapter never
// runs in training: the clamped weight is applied with F.linear), LAuReL's
// and the per-layer blocks' projections; the attention and MLP
// projections alone give the second row.
func TestGemma3nLoRAParams(t *testing.T) {
	for _, tc := range []struct {
		targets          []string
		trainable, total int64
	}{
		{[]string{"all-linear"}, 24_064, 220_144},
		{[]string{"q", "k", "v", "o", "gate", "up", "down"}, 14_080, 210_160},
	} {
		m, err := hf.FromConfig(readHF(t, "gemma3n-tiny.json"), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: tc.targets}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var trainable, total int64
		for _, q := range prog.Params {
			if q.TiedTo >= 0 {
				continue
			}
			total += q.Numel
			if q.Trainable {
				trainable += q.Numel
			}
		}
		if trainable != tc.trainable || total != tc.total {
			t.Errorf("%v: %d trainable of %d, PEFT %d of %d", tc.targets, trainable, total, tc.trainable, tc.total)
		}
	}
}
