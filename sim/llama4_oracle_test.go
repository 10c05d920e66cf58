package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What autograd saves in one training step of a tiny Llama 4 text model
// (sim/testdata/hf/llama4-tiny.json: 4 layers of 64, 4 heads of 16, 2 kv
// heads, a dense layer then an MoE layer of 4 experts twice, layer 3 NoPE,
// chunks of 16 tokens), fp32 and bf16, batch 2, as
// tools/oracle/llama4_saved.py measures it on the CPU (transformers
// 5.17.0, torch 2.15.0):
//
//	/work/venv-t/bin/python tools/oracle/llama4_saved.py sim/testdata/hf/llama4-tiny.json ATTN SEQ 2 [-bf16]
//
// From 16 tokens the chunked layers get a mask: SDPA keeps it as an
// additive bias [batch, 1, seq, seq] (convert_boolean_attn_mask) and k and
// v expanded to every head; below it SDPA runs is_causal with the kv heads
// as they are. memsh matches every row to the byte but for two tensors it
// does not model, named here: the complex rotary table freqs_cis the
// rotary embedding makes once per forward ([1, seq, head_dim/2]
// complex64, 8 bytes an element, kept by every RoPE layer's product, one
// storage) and each NoPE layer's fp32 temperature scales ([1, seq, 1, 1]).
func TestLlama4SavesAsTransformers(t *testing.T) {
	const headDim, nope = 16, 1
	for _, tc := range []struct {
		attn, prec string
		seq        int64
		want       int64
	}{
		{"sdpa", "fp32", 8, 428_772},
		{"sdpa", "fp32", 16, 888_260},
		{"sdpa", "fp32", 32, 1_788_804},
		{"sdpa", "fp32", 48, 2_701_636},
		{"eager", "fp32", 8, 452_324},
		{"eager", "fp32", 16, 921_028},
		{"eager", "fp32", 32, 1_907_588},
		{"eager", "fp32", 48, 2_959_684},
		{"sdpa", "bf16", 8, 248_292}, // -bf16: the model cast to bfloat16
		{"sdpa", "bf16", 32, 1_030_020},
		{"eager", "bf16", 8, 259_556},
		{"eager", "bf16", 32, 1_087_364},
	} {
		t.Run(fmt.Sprintf("%s/%s/%d", tc.attn, tc.prec, tc.seq), func(t *testing.T) {
			m, err := hf.FromConfigOptions(readHF(t, "llama4-tiny.json"), hf.Options{Attn: tc.attn})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Seq, p.Batch = tc.seq, 2
			p.Precision = mustPrecision(t, tc.prec)
			p.Runtime = mustRuntime(t, "cpu")
			unmodelled := tc.seq*headDim/2*8 + nope*tc.seq*4
			if got := evalPlan(t, p).SavedActivations + unmodelled; got != tc.want {
				t.Errorf("saved %d B (+%d B of rotary table and scales), transformers %d (%+d)", got-unmodelled, unmodelled, tc.want, got-tc.want)
			}
		})
	}
}
