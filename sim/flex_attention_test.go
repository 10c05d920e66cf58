package sim

import (
	"math"
	"strings"
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

// train(doc_tokens=L) prices the attention core per document: the flex
// op's FLOPs are the causal row's times the blocks its BlockMask runs
// (nn/flex_blocks.go; 512 tokens in documents of 128: 4 + 3 x 127/128 of
// 10 blocks), flash's the keys each query sees in its document (at
// offsets 0 and 1 alike, 1.5 a query but the row's first); SDPA
// attends across the row and is refused.
func TestDocTokensPricing(t *testing.T) {
	flops := func(impl string, doc int64) (float64, error) {
		m := &core.Model{Name: "doc", Vocab: 1000, Layers: []core.Layer{
			&nn.Embedding{Name: "embed", Rows: 1000, Dim: 512},
			&nn.Attention{Dim: 512, Heads: 8, KVHeads: 2, Impl: impl, Causal: true},
		}}
		p := tinyPlan(t, m)
		p.Seq, p.DocTokens = 512, doc
		if err := p.Validate(); err != nil {
			return 0, err
		}
		prog, err := p.LowerProgram()
		if err != nil {
			return 0, err
		}
		for _, op := range prog.Ops {
			if op.Kind == "attention" {
				return op.Flops, nil
			}
		}
		return 0, nil
	}
	row, err := flops("flex", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * 512 * 256 * 512.0; row != want { // 4 x tokens x seq/2 keys x heads*head_dim
		t.Errorf("one causal row: %g FLOPs, want %g", row, want)
	}
	for _, tc := range []struct {
		impl string
		doc  int64
		want float64
	}{
		{"flex", 128, (4 + 3*127.0/128) / 10},
		{"flex", 1 << 40, 1},
		{"flash", 2, (1 + 511*1.5) / 512 / 256}, // the row's first query sees 1 key, the others 1 or 2
	} {
		got, err := flops(tc.impl, tc.doc)
		if err != nil {
			t.Fatal(err)
		}
		if r := got / row; math.Abs(r/tc.want-1) > 1e-9 {
			t.Errorf("%s, documents of %d: %.6f of the causal row, want %.6f", tc.impl, tc.doc, r, tc.want)
		}
	}
	if _, err := flops("sdpa", 128); err == nil || !strings.Contains(err.Error(), "doc_tokens masks attention per document") {
		t.Errorf("sdpa with doc_tokens: %v, want the refusal", err)
	}
}
