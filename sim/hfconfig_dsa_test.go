package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// DeepSeek-V3.2 (testdata/hf/deepseek-v3.2.json: deepseek-ai/DeepSeek-V3.2's
// config.json as published, DeepSeek-V3.2-Exp's has the same sizes): DeepSeek-V3
// plus a lightning indexer in each attention layer, wq_b 1536 x 64*128,
// wk 7168 x 128, k_norm 2*128 (a LayerNorm with a bias), weights_proj 7168
// x 64: 13,959,424 a layer.
//
//	DeepseekV32ForCausalLM, transformers 5.17.0 on the meta device
//	  (tools/oracle/dsa_indexer.py's "params" line): 671,877,929,216 =
//	  DeepSeek-V3's 671,026,404,352 + 61 indexers.
//	mtp=True: DeepSeek-V3's 682,636,472,320 + 62 indexers (the checkpoint's
//	  model.layers.61 has its own, as vLLM's DeepSeek-V3.2 MTP loads it):
//	  683,501,956,608. The checkpoint adds its copies of the embedding and
//	  head (1,853,358,080) and 59 correction biases (15,104):
//	  685,355,329,792, the model card's "685B params" (huggingface.co/
//	  deepseek-ai/DeepSeek-V3.2-Exp and DeepSeek-V3.2).
func TestDeepSeekV32Params(t *testing.T) {
	for _, tc := range []struct {
		mtp  bool
		want int64
	}{{false, 671_877_929_216}, {true, 683_501_956_608}} {
		m, err := hf.FromConfigOptions(readHF(t, "deepseek-v3.2.json"), hf.Options{Attn: "sdpa", MTP: tc.mtp, Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("mtp=%t: %d parameters, want %d (%+d)", tc.mtp, got, tc.want, got-tc.want)
		}
	}
}

// What hf_config refuses for deepseek_v32, each with the reason: a
// transformers release without models/deepseek_v32 (absent from the
// 5.10.0 wheel, present in 5.11.0), flash attention (no flash path in
// transformers), eager (MLA's eager path is not modelled), context
// parallelism, an mlp_layer_types other than first_k_dense_replace's.
func TestDeepSeekV32Refusals(t *testing.T) {
	cfg := readHF(t, "deepseek-v3.2.json")
	for _, v := range []string{"5.11.0", ""} { // "": the default, 5.25.0
		if _, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "sdpa", Transformers: v}); err != nil {
			t.Errorf("deepseek_v32 under transformers %q: %v", v, err)
		}
	}
	for _, tc := range []struct {
		name string
		cfg  []byte
		opts hf.Options
		want string
	}{
		{"4.57.1", cfg, hf.Options{Attn: "sdpa", Transformers: "4.57.1"}, `model_type "deepseek_v32" needs transformers 5.11 or later`},
		{"5.10", cfg, hf.Options{Attn: "sdpa", Transformers: "5.10.0"}, "needs transformers 5.11 or later"},
		{"flash", cfg, hf.Options{Attn: "flash", Transformers: "5.17.0"}, `no flash-attention path for model_type "deepseek_v32"`},
		{"eager", cfg, hf.Options{Attn: "eager", Transformers: "5.17.0"}, "eager attention is not modelled"},
		{"mlp_layer_types", shrinkConfig(t, "deepseek-v3.2.json", map[string]any{"num_hidden_layers": 2, "first_k_dense_replace": 1,
			"mlp_layer_types": []string{"sparse", "sparse"}}), hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, "layer 0 is sparse"},
	} {
		_, err := hf.FromConfigOptions(tc.cfg, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	var ue *units.Error
	_, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", Transformers: "5.17.0"})
	if !errors.As(err, &ue) || !strings.Contains(ue.Hint, `"sdpa"`) || strings.Contains(ue.Hint, "eager") {
		t.Errorf("flash's hint: %v (%q), want sdpa alone", err, hintOf(ue))
	}
	p := tinyPlan(t, smallDSA(t, "deepseek-v3.2.json", 1))
	p.Parallel = core.Parallelism{CP: 2}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not modelled for DeepSeek Sparse Attention") {
		t.Errorf("cp=2: %v, want the indexer's refusal", err)
	}
}

// smallDSA is a DeepSeek-V3.2 (or GLM-5: file) of
// tools/oracle/dsa_indexer.py's SMALL sizes.
func smallDSA(t *testing.T, file string, layers int64) *core.Model {
	t.Helper()
	cfg := shrinkConfig(t, file, map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
		"num_hidden_layers": layers, "first_k_dense_replace": 1, "n_routed_experts": 8, "n_group": 1, "topk_group": 1, "num_experts_per_tok": 2,
		"num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
		"v_head_dim": 32, "vocab_size": 1024, "index_n_heads": 8, "index_head_dim": 32, "index_topk": 16})
	m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The indexer runs under torch.no_grad(): tools/oracle/dsa_indexer.py
// (transformers 5.17.0, torch 2.15, CPU) finds nothing saved inside it and
// no .grad on any of its parameters after backward. Its transient peak
// (the most bytes made inside one indexer forward alive at once) is the
// fp32 scores twice (the matmul's and scale's outputs) plus the
// forward's locals, and with batch > 1 torch.matmul's copy of k^T per
// query row; measured:
//
//	python dsa_indexer.py ../../sim/testdata/hf/deepseek-v3.2.json LAYERS BATCH SEQ DTYPE
//
// memsh's live bytes at its indexer ops, over those before the first,
// match each to the byte.
func TestDSAIndexerMatchesTransformers(t *testing.T) {
	for _, tc := range []struct {
		file               string
		layers, batch, seq int64
		prec               string
		peak               int64 // indexer_peak
	}{
		{"deepseek-v3.2.json", 1, 1, 256, "bf16", 4_562_944},
		{"deepseek-v3.2.json", 1, 1, 512, "bf16", 17_514_496},
		{"deepseek-v3.2.json", 1, 2, 192, "bf16", 12_791_808},
		{"deepseek-v3.2.json", 2, 2, 128, "fp32", 5_980_160},
		{"deepseek-v3.2.json", 1, 1, 384, "fp32", 10_543_104},
		// GLM-5's indexer (interleaved rotation) at the same sizes
		{"glm-5.json", 1, 1, 256, "bf16", 4_562_944},
		{"glm-5.json", 2, 2, 128, "fp32", 5_980_160},
	} {
		m := smallDSA(t, tc.file, tc.layers)
		p := tinyPlan(t, m)
		p.Batch, p.Seq = tc.batch, tc.seq
		var err error
		if p.Precision, err = core.LookupPrecision(tc.prec); err != nil {
			t.Fatal(err)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		// Its parameters require grad, as PyTorch counts them, and get no
		// gradient (replay's gradlessParams: no grad, no optimizer state).
		for _, pa := range prog.Params {
			if strings.Contains(pa.Name, ".indexer.") && !pa.Trainable {
				t.Errorf("%s is not trainable: PyTorch's indexer parameters require grad (and get no gradient under its no_grad)", pa.Name)
			}
		}
		for _, op := range prog.Ops {
			if strings.Contains(op.Module, ".indexer") && len(op.Saved) > 0 {
				t.Errorf("%s saves %d tensors under no_grad", op.Name, len(op.Saved))
			}
		}
		rep, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := forwardPeakIn(rep, "layers.0.self_attn.indexer"); got != tc.peak {
			t.Errorf("%+v: the indexer's transient peak is %d bytes, transformers' %d", tc, got, tc.peak)
		}
		if rep.TrainableParams != rep.Params {
			t.Errorf("%+v: %d trainable parameters, want all %d", tc, rep.TrainableParams, rep.Params)
		}
		if want := p.Precision.Params.Bytes(rep.Params - indexerParams(prog)); rep.States.Grads != want {
			t.Errorf("%+v: %d bytes of gradients, want %d (all but the indexers')", tc, rep.States.Grads, want)
		}
	}
}

// forwardPeakIn is the most bytes allocated during the forward's ops of
// module, above what was allocated before its first op (-1: it ran none).
func forwardPeakIn(rep *replay.Report, module string) int64 {
	before, peak := int64(-1), int64(0)
	for i, pt := range rep.Timeline {
		if pt.Phase == replay.PhaseForward && strings.Contains(pt.Op, module) {
			if before < 0 {
				before = rep.Timeline[i-1].Allocated
			}
			peak = max(peak, pt.Allocated)
		}
	}
	if before < 0 {
		return -1
	}
	return peak - before
}

func indexerParams(prog *core.Program) int64 {
	var n int64
	for _, pa := range prog.Params {
		if strings.Contains(pa.Name, ".indexer.") {
			n += pa.Numel
		}
	}
	return n
}

// GLM-5 (testdata/hf/glm-5.json: GlmMoeDsaConfig's defaults, which are
// GLM-5's sizes): DeepSeek-V3.2's layout at hidden 6144, 78 layers, 64
// heads (qk 192 + 64, v 256), indexers of 32 heads. transformers 5.17.0
// on the meta device (tools/oracle/dsa_indexer.py's "params" line):
// 743,911,199,232, the model card's 744 B; mtp=True adds the MTP layer
// with its own indexer, 753,864,119,552. With GLM-5.2's index sharing
// (index_topk_freq 4, index_skip_topk_offset 3: 21 layers keep an
// indexer) transformers counts 743,377,000,704; indexer_types and
// index_topk_pattern saying the same give the same.
func TestGlmMoeDsaParams(t *testing.T) {
	sharedTypes, pattern := make([]string, 78), ""
	for i := range sharedTypes {
		sharedTypes[i], pattern = "full", pattern+"F"
		if max(i-3+1, 0)%4 != 0 {
			sharedTypes[i], pattern = "shared", pattern[:i]+"S"
		}
	}
	for _, tc := range []struct {
		name string
		set  map[string]any
		mtp  bool
		want int64
	}{
		{"glm-5", nil, false, 743_911_199_232},
		{"glm-5 mtp", nil, true, 753_864_119_552},
		{"freq 4 offset 3", map[string]any{"index_topk_freq": 4, "index_skip_topk_offset": 3}, false, 743_377_000_704},
		{"indexer_types", map[string]any{"indexer_types": sharedTypes}, false, 743_377_000_704},
		{"index_topk_pattern", map[string]any{"index_topk_pattern": pattern}, false, 743_377_000_704},
	} {
		m, err := hf.FromConfigOptions(shrinkConfig(t, "glm-5.json", tc.set), hf.Options{Attn: "sdpa", MTP: tc.mtp, Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		set  map[string]any
		opts hf.Options
		want string
	}{
		{"5.1", nil, hf.Options{Attn: "sdpa", Transformers: "5.1.0"}, `model_type "glm_moe_dsa" needs transformers 5.2 or later`},
		{"flash", nil, hf.Options{Attn: "flash", Transformers: "5.17.0"}, "no flash-attention path"},
		{"layer 0 shared", map[string]any{"index_topk_pattern": "S" + pattern[1:]}, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, "layer 0 is shared"},
		{"offset 0", map[string]any{"index_topk_freq": 2, "index_skip_topk_offset": 0}, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, "layer 0 would reuse"},
		{"short", map[string]any{"indexer_types": []string{"full", "shared"}}, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, "names 2 layers, the model has 78"},
		{"bad name", map[string]any{"index_topk_pattern": "F" + strings.Repeat("X", 77)}, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, `layer 1 is "X": each must be`},
		{"bad type", map[string]any{"indexer_types": append([]any{"full", 3}, make([]any, 76)...)}, hf.Options{Attn: "sdpa", Transformers: "5.17.0"}, `layer 1 is "3": each must be`},
	} {
		_, err := hf.FromConfigOptions(shrinkConfig(t, "glm-5.json", tc.set), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A GLM-5 layer that shares the previous full layer's top-k runs no
// indexer (no indexer ops, no weights) but builds its own mask and
// bias: SDPA saves one in every layer.
func TestGlmMoeDsaSharedLayers(t *testing.T) {
	cfg := shrinkConfig(t, "glm-5.json", map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
		"num_hidden_layers": 3, "first_k_dense_replace": 1, "n_routed_experts": 8, "num_experts_per_tok": 2,
		"num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
		"v_head_dim": 32, "vocab_size": 1024, "index_n_heads": 8, "index_head_dim": 32, "index_topk": 16, "indexer_types": []string{"full", "shared", "full"}})
	m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Seq = 128
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	indexerOps, biasSaved := map[string]int{}, map[string]bool{}
	for _, op := range prog.Ops {
		layer := strings.Join(strings.SplitN(op.Name, ".", 4)[:3], ".")
		if strings.Contains(op.Name, ".indexer.") {
			indexerOps[layer]++
		}
		for _, v := range op.Saved {
			if strings.HasSuffix(prog.Values[v].Name, "attn_bias") {
				biasSaved[layer] = true
			}
		}
	}
	for _, layer := range []string{"model.layers.0", "model.layers.1", "model.layers.2"} {
		if got, want := indexerOps[layer] > 0, layer != "model.layers.1"; got != want {
			t.Errorf("%s runs indexer ops: %t, want %t", layer, got, want)
		}
		if !biasSaved[layer] {
			t.Errorf("%s: SDPA saves no sparse-mask bias", layer)
		}
	}
	for _, pa := range prog.Params {
		if strings.HasPrefix(pa.Name, "model.layers.1.self_attn.indexer") {
			t.Errorf("the shared layer has indexer weight %s", pa.Name)
		}
	}
	evalPlan(t, p)
}
