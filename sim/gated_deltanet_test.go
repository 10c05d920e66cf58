package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// gdnStack is n Gated DeltaNet layers (no norms, no residuals) on an
// embedding, the loss summing the last hidden state.
func gdnStack(g *nn.GatedDeltaNet, n int64) *core.Model {
	return &core.Model{Name: "gdn", Loss: "none", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 128, Dim: g.Dim},
		&core.Repeat{Name: "layers", N: n, Layer: g},
	}}
}

// What one Gated DeltaNet layer saves in bf16, one sequence, the storages
// of a 2-layer stack minus a 1-layer one: the layer's own saves plus its
// input, which the input projections save (seq x hidden x 2 bytes).
//
// The torch kernel (GDNTorch) as transformers 5.17.0 runs it without fla
// and causal-conv1d, measured on the CPU (torch 2.15.0) with
// saved_tensors_hooks, storages deduplicated, parameters and the input
// excluded: tools/oracle/gdn_saved.py builds Qwen3NextGatedDeltaNet
// ("next") and Qwen3_5GatedDeltaNet ("q35") in bf16 and prints
// saved_bytes. Sequences not a multiple of the 64-token chunk are padded
// inside torch_chunk_gated_delta_rule (200 -> 256, 100 -> 128).
//
// The fla kernel (GDNFla) needs a GPU: counted by hand from
// ChunkGatedDeltaRuleFunction.forward's save_for_backward (fla-core
// 0.6.0) and causal_conv1d's, with transformers 5's torch gated norm, for
// hidden 256, 2 key and 4 value heads of 32, 128 tokens: the conv input
// 65,536; beta 1,024, softplus's input and output 4,096, exp(A_log) and
// its negation 32; the l2-normed q and k 65,536, their rstd 4,096, v
// 32,768, g's cumsum 2,048, A (128 x 4 x 64 bf16) 65,536; the norm's fp32
// input, gate and silu 196,608, its two bf16 products 65,536, rstd 2,048;
// out_proj's input 32,768: 537,632.
func TestGatedDeltaNetSaves(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		hidden, hk, hv, dk, dv, t int64
		split                     bool
		kernel                    string
		want                      int64 // without the input
	}{
		{"next torch", 256, 2, 4, 32, 32, 128, false, nn.GDNTorch, 1_860_160},
		{"next torch padded", 256, 2, 4, 32, 32, 200, false, nn.GDNTorch, 3_466_016},
		{"next torch kv", 256, 2, 2, 32, 64, 256, false, nn.GDNTorch, 2_515_504},
		{"next torch odd", 192, 3, 3, 16, 48, 100, false, nn.GDNTorch, 1_290_520},
		{"q35 torch", 256, 2, 4, 32, 32, 128, true, nn.GDNTorch, 1_860_160},
		{"q35 torch padded", 256, 2, 4, 32, 32, 200, true, nn.GDNTorch, 3_466_016},
		{"q35 torch wide", 128, 1, 4, 64, 32, 300, true, nn.GDNTorch, 5_925_264},
		{"next fla", 256, 2, 4, 32, 32, 128, false, nn.GDNFla, 537_632},
		{"q35 fla", 256, 2, 4, 32, 32, 128, true, nn.GDNFla, 537_632},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &nn.GatedDeltaNet{Name: "linear_attn", Dim: tc.hidden, KHeads: tc.hk, VHeads: tc.hv, KHeadDim: tc.dk,
				VHeadDim: tc.dv, ConvK: 4, Chunk: 64, SplitProj: tc.split, Kernel: tc.kernel}
			var saved [2]int64
			for l := range saved {
				p := tinyPlan(t, gdnStack(g, int64(l+1)))
				p.Seq = tc.t
				saved[l] = evalPlan(t, p).SavedActivations
			}
			want := tc.want + 2*tc.t*tc.hidden
			if got := saved[1] - saved[0]; got != want {
				t.Errorf("a layer saves %d bytes, want %d (%+.2f %%)", got, want, 100*float64(got-want)/float64(want))
			}
		})
	}
}

// What Qwen3-Next's gated attention saves in bf16 with eager attention,
// one sequence: transformers' Qwen3NextAttention (5.17.0, torch 2.15.0,
// CPU, saved_tensors_hooks, storages deduplicated, the input, parameters
// and the rotary tables excluded; tools/oracle/gdn_saved.py --attn):
// 1,183,232 bytes for hidden 256, 4 heads, 2 kv heads of 64, 128 tokens,
// and 255,488 for 4 heads, 1 kv head of 32, 64 tokens: exact, the output
// gate's sigmoid and product included, and Qwen3NextRMSNorm's q_norm and
// k_norm as Gemma's (x * (1 + w) in fp32, then cast: the normed value in
// fp32 and the fp32 1 + w, QKNormGemma). As Llama's they kept 2 bytes an
// element of q and k and 2 x 4 x head_dim bytes less.
func TestGatedAttentionSaves(t *testing.T) {
	for _, tc := range []struct {
		hidden, h, kv, d, t int64
		measured            int64
	}{
		{256, 4, 2, 64, 128, 1_183_232},
		{256, 4, 1, 32, 64, 255_488},
	} {
		a := &nn.Attention{Name: "self_attn", Dim: tc.hidden, Heads: tc.h, KVHeads: tc.kv, HeadDim: tc.d, Impl: "eager",
			Causal: true, Rope: true, SoftmaxFP32: true, QKNorm: true, QKNormGemma: true, OutputGate: true, EnableGQA: true}
		var saved [2]int64
		for l := range saved {
			m := &core.Model{Name: "attn", Loss: "none", Layers: []core.Layer{
				&nn.Embedding{Name: "embed_tokens", Rows: 128, Dim: tc.hidden},
				&core.Repeat{Name: "layers", N: int64(l + 1), Layer: a},
			}}
			p := tinyPlan(t, m)
			p.Seq = tc.t
			saved[l] = evalPlan(t, p).SavedActivations
		}
		want := tc.measured + 2*tc.t*tc.hidden // the input, saved by the projections
		if got := saved[1] - saved[0]; got != want {
			t.Errorf("%+v: a layer saves %d bytes, want %d (%+.2f %%)", tc, got, want, 100*float64(got-want)/float64(want))
		}
	}
}
