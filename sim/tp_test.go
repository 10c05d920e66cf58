package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestTensorParallelKorthikanti checks the saved activations of a GPT-2
// block under tensor parallelism against Korthikanti et al. 2022
// (arXiv:2205.05198, section 4.2; 16-bit activations, 1-byte dropout
// masks), per layer:
//
//	no parallelism   sbh(34 + 5as/h)
//	TP               sbh(10 + 24/t + 5as/(ht))
//	TP + SP          sbh/t (34 + 5as/h)
//
// The engine's eager GPT-2 block saves exactly the tensors the paper
// counts (the oracle matches it to the byte at t=1), plus two terms the
// paper leaves out: each LayerNorm's mean and rstd (one value per token
// row, in the input dtype on the oracle's CPU runtime: 2 norms x 2 stats
// x rows x 2 bytes, rows sharded with SP) and the fp64 1/sqrt(d) scalar
// the score scaling saves (8 bytes).
func TestTensorParallelKorthikanti(t *testing.T) {
	for _, tc := range []struct {
		s, b, h, a int64
		tp         int64
		sp         bool
	}{
		{512, 2, 768, 12, 1, false},
		{512, 2, 768, 12, 2, false},
		{512, 2, 768, 12, 4, false},
		{512, 2, 768, 12, 2, true},
		{512, 2, 768, 12, 4, true},
		{1024, 1, 1024, 16, 8, false},
		{1024, 1, 1024, 16, 8, true},
	} {
		c := oracleCase{kind: "gpt2", s: tc.s, b: tc.b, h: tc.h, a: tc.a, dtype: "bf16"}
		plan := oraclePlan(t, c)
		plan.Parallel = core.Parallelism{TP: tc.tp, SequenceParallel: tc.sp}
		rep, err := Evaluate(plan, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, b, h, a, tp := tc.s, tc.b, tc.h, tc.a, tc.tp
		sbh := s * b * h
		scores := 5 * a * s * s * b / tp
		rows := s * b
		var want int64
		if tc.sp {
			want = sbh*34/tp + scores
			rows /= tp
		} else {
			want = sbh*10 + sbh*24/tp + scores
		}
		want += 2*2*rows*2 + 8
		if got := rep.SavedActivations; got != want {
			t.Errorf("s=%d b=%d h=%d a=%d tp=%d sp=%v: saved %d, Korthikanti %d (%+d)", s, b, h, a, tp, tc.sp, got, want, got-want)
		}
	}
}

// TestTensorParallelParams checks the per-rank parameter shards: every
// matrix of attention and MLP split tp ways, norms and row-parallel biases
// replicated, and the unsharded count unchanged.
func TestTensorParallelParams(t *testing.T) {
	c := oracleCase{kind: "gpt2", s: 128, b: 1, h: 256, a: 4, dtype: "bf16", params: 789760}
	for _, tp := range []int64{1, 2, 4} {
		plan := oraclePlan(t, c)
		plan.Parallel = core.Parallelism{TP: tp}
		prog, err := plan.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var local, full int64
		for _, p := range prog.Params {
			local += p.Numel
			full += p.FullNumel
		}
		h := c.h
		// matrices 12h² and column biases (3h + 4h) split; norms 4h,
		// row-parallel biases 2h replicated.
		want := (12*h*h+7*h)/tp + 6*h
		if local != want || full != c.params {
			t.Errorf("tp=%d: %d params per rank (want %d), %d unsharded (want %d)", tp, local, want, full, c.params)
		}
	}
}
