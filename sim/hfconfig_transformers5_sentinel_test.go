package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// sentinelTinyQwen3MoE is tools/oracle/moe_sentinel.py's model: one
// Qwen3-MoE layer, hidden 64, 8 experts of 32, top-2.
const sentinelTinyQwen3MoE = `{"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
 "vocab_size": 256, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
 "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [],
 "max_position_embeddings": 256, "tie_word_embeddings": false}`

// TestHFTransformers518Sentinels: transformers 5.18.0 runs grouped_mm's
// sentinel mask and its three masked_fill only when the experts are
// sharded, and one_hots the eager loop's routing into experts + 1
// classes. Measured in one training step of the tiny Qwen3-MoE above, fp32
// on the CPU, batch 2 x 64 (S = 256 routed copies; torch 2.15,
// tools/oracle/moe_sentinel.py under transformers 5.17.0 and 5.25.0):
//
//	5.17.0 grouped_mm saved 915236 masked_fill {masked_fill.Scalar: 5, masked_fill_.Scalar: 1}
//	5.17.0 eager      saved 1175044 one_hot [(128, 2, 8)]
//	5.25.0 grouped_mm saved 914980 masked_fill {}
//	5.25.0 eager      saved 1175044 one_hot [(128, 2, 9)]
//
// The 256 bytes are the bool [S, 1] mask every masked_fill's backward
// keeps; the six dispatches are three forward fills (one in place) and
// their three MaskedFillBackward0. The one_hot is made under no_grad and
// saves nothing. (Under expert parallelism 5.18 masks again; memsh lowers
// any impl under ep as dispatched grouped GEMMs, without these.)
func TestHFTransformers518Sentinels(t *testing.T) {
	type run struct {
		saved     int64
		fills     int64   // bytes the masked_fill ops in the experts write
		oneHot    []int64 // the eager loop's expert_mask shape
		maskBytes int64
	}
	lower := func(t *testing.T, version, experts string) run {
		t.Helper()
		m, err := hf.FromConfigOptions([]byte(sentinelTinyQwen3MoE), hf.Options{Attn: "sdpa", Transformers: version, Experts: experts})
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Model: m, Batch: 2, Seq: 64, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "fp32"),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var r run
		for _, op := range prog.Ops {
			if op.Kind == "masked_fill" && strings.Contains(op.Name, "experts") {
				for _, o := range op.Out {
					r.fills += prog.Values[o].Bytes
				}
			}
		}
		for _, v := range prog.Values {
			switch {
			case strings.HasSuffix(v.Name, "expert_mask"):
				r.oneHot = v.Shape
			case strings.HasSuffix(v.Name, "sentinel_mask"):
				r.maskBytes = v.Bytes
			}
		}
		r.saved = evalPlan(t, p).SavedActivations
		return r
	}
	// S routed copies; the fills write x_g [S, d] in place, the up
	// projection's output [S, 2h] (memsh's gate and up halves, two ops of
	// [S, h]: one more launch than the one measured) and the down
	// projection's [S, d], fp32.
	const S, d, h = 2 * 64 * 2, 64, 32
	const fills = 4 * S * (d + 2*h + d)
	for _, tc := range []struct {
		version, experts string
		fills            int64
		oneHot           []int64
	}{
		{"5.17.0", "grouped_mm", fills, nil},
		{"5.25.0", "grouped_mm", 0, nil},
		{"5.18.0", "grouped_mm", 0, nil},
		{"5.17.0", "eager", 0, []int64{8, 2, 128}},
		{"5.25.0", "eager", 0, []int64{9, 2, 128}},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.version, tc.experts), func(t *testing.T) {
			r := lower(t, tc.version, tc.experts)
			if r.fills != tc.fills {
				t.Errorf("the experts' masked_fill write %d B, want %d", r.fills, tc.fills)
			}
			if tc.fills > 0 && r.maskBytes != S {
				t.Errorf("sentinel mask %d B, want %d (bool [S, 1])", r.maskBytes, S)
			}
			if tc.oneHot != nil && !slices.Equal(r.oneHot, tc.oneHot) {
				t.Errorf("expert_mask %v, want %v", r.oneHot, tc.oneHot)
			}
		})
	}
	// What the fills' backward keeps: the mask, S bytes a layer (915,236
	// - 914,980 measured).
	old, cur := lower(t, "5.17.0", "grouped_mm"), lower(t, "5.25.0", "grouped_mm")
	if got := old.saved - cur.saved; got != S {
		t.Errorf("5.17 saves %d B more than 5.25, want %d (the sentinel mask; measured 256)", got, S)
	}
	// The eager loop's one_hot is made under no_grad: saved the same.
	if a, b := lower(t, "5.17.0", "eager"), lower(t, "5.25.0", "eager"); a.saved != b.saved {
		t.Errorf("eager loop saves %d B under 5.17, %d under 5.25; want the same (measured 1,175,044 both)", a.saved, b.saved)
	}
}
