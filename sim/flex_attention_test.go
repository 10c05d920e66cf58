package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// What compiled FlexAttention saves, as tools/oracle/flex_saved.py
// measures it (torch 2.15.0 on the CPU, backend
// aot_eager_decomp_partition: Inductor's min-cut partitioner; 8 query
// heads, 2 kv heads of 64, bf16, a block_causal BlockMask over three
// documents):
//
//	python flex_saved.py 256 bf16 aot_eager_decomp_partition  -> 663,552 B
//	python flex_saved.py 512 bf16 aot_eager_decomp_partition  -> 1,327,104 B
//
// q, k and v themselves (k and v with their 2 kv heads), the output and
// an fp32 logsumexp of [heads, tokens], the int32 BlockMask tensors
// excluded (memsh does not replay them: nn/flex_attention.go). flash's
// saved set is the same; the workspaces differ (torch's Inductor
// lowering: an fp32 max_scores in forward and delta in backward, no fp32
// dq accumulator, dk and dv with the kv heads).
func TestFlexAttentionSaved(t *testing.T) {
	for _, tc := range []struct {
		tokens, saved int64
	}{
		{256, 663_552},
		{512, 1_327_104},
	} {
		for _, impl := range []string{"flex", "flash"} {
			m := &core.Model{Name: "flex", Vocab: 1000, Layers: []core.Layer{
				&nn.Embedding{Name: "embed", Rows: 1000, Dim: 512},
				&nn.Attention{Dim: 512, Heads: 8, KVHeads: 2, Impl: impl, Causal: true},
			}}
			p := tinyPlan(t, m)
			p.Seq = tc.tokens
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var op *core.OpInfo
			for i := range prog.Ops {
				if prog.Ops[i].Kind == "attention" {
					op = &prog.Ops[i]
				}
				if prog.Ops[i].Kind == "repeat_kv" {
					t.Errorf("%s: %s copies the kv heads", impl, prog.Ops[i].Name)
				}
			}
			if op == nil {
				t.Fatalf("%s: no attention op", impl)
			}
			var saved int64
			for _, v := range op.Saved {
				saved += prog.Values[v].Bytes
			}
			if saved != tc.saved {
				t.Errorf("%s, %d tokens: the attention saves %d B, torch's compiled flex_attention %d B", impl, tc.tokens, saved, tc.saved)
			}
			lse := 4 * 8 * tc.tokens // fp32 [heads, tokens]
			wantF, wantB := int64(0), lse+4*8*64*tc.tokens+2*2*8*64*tc.tokens
			if impl == "flex" {
				wantF, wantB = lse, lse
			}
			if op.WorkF != wantF || op.WorkB != wantB {
				t.Errorf("%s, %d tokens: workspaces %d B forward, %d B backward, want %d and %d", impl, tc.tokens, op.WorkF, op.WorkB, wantF, wantB)
			}
		}
	}
}
