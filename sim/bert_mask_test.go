package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// TestBERTExtendedMask hand-counts BERT's eager attention between the
// scaled scores and the P.V matmul (transformers 4.15 modeling_bert.py
// BertSelfAttention.forward: scores / sqrt(d), + attention_mask, softmax,
// dropout, matmul; modeling_utils.py get_extended_attention_mask:
// mask.to(dtype=self.dtype), then (1 - mask) * -10000, so the mask has
// the parameters' dtype, [batch, 1, 1, seq]). Under fp16 autocast the
// parameters are fp32: fp16 scores + an fp32 mask promote to fp32
// (PyTorch's type promotion between two tensors with dimensions), so
// softmax and dropout run on fp32 and the matmul's autocast casts after
// dropout. Each pointwise op reads its input and writes its output.
func TestBERTExtendedMask(t *testing.T) {
	const config = `{"model_type": "bert", "architectures": ["BertForSequenceClassification"],
		"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 128,
		"vocab_size": 100, "max_position_embeddings": 32}`
	const batch, seq, heads = 2, 16, 4
	const n = batch * heads * seq * seq // score elements
	for _, tc := range []struct {
		precision string
		score     units.DType // q @ k^T and the scaled scores
		masked    units.DType // after the mask: the softmax's input and output, dropout's
		cast      bool        // a cast after dropout (the matmul's autocast)
	}{
		{"fp16-mixed", units.FP16, units.FP32, true},
		{"fp32", units.FP32, units.FP32, false},
		{"bf16", units.BF16, units.BF16, false}, // pure bf16: the mask is bf16 too
	} {
		m, err := hf.FromConfigArch([]byte(config), "eager", "BertForSequenceClassification")
		if err != nil {
			t.Fatal(err)
		}
		p := testmodels.LlamaPlan(m, batch, seq, tc.precision, "none", "V100-16GB")
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		ops := map[string]int{}
		for i, op := range prog.Ops {
			ops[op.Name] = i
		}
		const at = "bert.encoder.layer.0.attention.self."
		op := func(name string) int {
			i, ok := ops[at+name]
			if !ok {
				t.Fatalf("%s: no op %s%s", tc.precision, at, name)
			}
			return i
		}
		out := func(i int) units.DType { return prog.Values[prog.Ops[i].Out[0]].Dtype }
		scale, mask, sm, drop := op("scale"), op("attention_mask"), op("softmax"), op("attn_dropout")
		if !(scale < mask && mask < sm && sm < drop) {
			t.Errorf("%s: order scale %d, mask %d, softmax %d, dropout %d", tc.precision, scale, mask, sm, drop)
		}
		if out(scale) != tc.score || out(mask) != tc.masked || out(sm) != tc.masked || out(drop) != tc.masked {
			t.Errorf("%s: dtypes scale %v mask %v softmax %v dropout %v, want %v then %v", tc.precision,
				out(scale), out(mask), out(sm), out(drop), tc.score, tc.masked)
		}
		s, ms := float64(tc.score.Bytes(n)), float64(tc.masked.Bytes(n))
		if got, want := prog.Ops[scale].Bytes, 2*s; got != want {
			t.Errorf("%s: scale moves %.0f B, want %.0f", tc.precision, got, want)
		}
		maskBytes := float64(p.Precision.Params.Bytes(batch * seq))
		if got, want := prog.Ops[mask].Bytes, s+maskBytes+ms; got != want {
			t.Errorf("%s: mask add moves %.0f B, want %.0f (scores in, [batch,1,1,seq] mask, sum out)", tc.precision, got, want)
		}
		if got, want := prog.Ops[sm].Bytes, 2*ms; got != want {
			t.Errorf("%s: softmax moves %.0f B, want %.0f", tc.precision, got, want)
		}
		next := prog.Ops[drop+1]
		if gotCast := next.Kind == "cast"; gotCast != tc.cast {
			t.Errorf("%s: op after dropout is %s %q, want a cast: %v", tc.precision, next.Kind, next.Name, tc.cast)
		}
		if tc.cast && prog.Values[next.Out[0]].Dtype != tc.score {
			t.Errorf("%s: the matmul's cast makes %v, want %v", tc.precision, prog.Values[next.Out[0]].Dtype, tc.score)
		}
	}
}
