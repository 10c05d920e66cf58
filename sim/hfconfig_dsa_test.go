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
	if _, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "sdpa", Transformers: "5.11.0"}); err != nil {
		t.Errorf("deepseek_v32 under 5.11.0: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  []byte
		opts hf.Options
		want string
	}{
		{"default transformers", cfg, hf.Options{Attn: "sdpa"}, `model_type "deepseek_v32" needs transformers 5.11 or later`},
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
	p := tinyPlan(t, smallDSA(t, 1))
	p.Parallel = core.Parallelism{CP: 2}
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not modelled for DeepSeek Sparse Attention") {
		t.Errorf("cp=2: %v, want the indexer's refusal", err)
	}
}

// smallDSA is a DeepSeek-V3.2 of tools/oracle/dsa_indexer.py's SMALL sizes.
func smallDSA(t *testing.T, layers int64) *core.Model {
	t.Helper()
	cfg := shrinkConfig(t, "deepseek-v3.2.json", map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64,
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
		layers, batch, seq int64
		prec               string
		peak               int64 // indexer_peak
	}{
		{1, 1, 256, "bf16", 4_562_944},
		{1, 1, 512, "bf16", 17_514_496},
		{1, 2, 192, "bf16", 12_791_808},
		{2, 2, 128, "fp32", 5_980_160},
		{1, 1, 384, "fp32", 10_543_104},
	} {
		m := smallDSA(t, tc.layers)
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
		for _, pa := range prog.Params {
			if strings.Contains(pa.Name, ".indexer.") && pa.Trainable {
				t.Errorf("%s is trainable: the indexer runs under no_grad and gets no gradient", pa.Name)
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
		before, peak := int64(-1), int64(0)
		for i, pt := range rep.Timeline {
			if pt.Phase == replay.PhaseForward && strings.Contains(pt.Op, "layers.0.self_attn.indexer") {
				if before < 0 {
					before = rep.Timeline[i-1].Allocated
				}
				peak = max(peak, pt.Allocated)
			}
		}
		if before < 0 || peak-before != tc.peak {
			t.Errorf("%+v: the indexer's transient peak is %d bytes, transformers' %d", tc, peak-before, tc.peak)
		}
		if want := rep.Params - indexerParams(prog); rep.TrainableParams != want {
			t.Errorf("%+v: %d trainable parameters, want %d (all but the indexers')", tc, rep.TrainableParams, want)
		}
	}
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
