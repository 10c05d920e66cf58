package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What repeat_kv's copies add to the saved storages of a tiny Llama with
// grouped-query attention (sim/testdata/hf/llama-gqa-tiny.json: 2 layers
// 64 wide, 4 heads, 2 kv heads of 16), trained in fp32 with SDPA and no
// attention mask, as tools/oracle/gqa_sdpa.py measures it (transformers
// 4.57.1, torch 2.15.0, on the CPU): the step as 4.57.1 runs it
// (enable_gqa=True) against the same step with use_gqa_in_sdpa forced
// False (repeat_kv, as transformers 4.53 and older run it):
//
//	python gqa_sdpa.py ../../sim/testdata/hf/llama-gqa-tiny.json 32 1
//	python gqa_sdpa.py ../../sim/testdata/hf/llama-gqa-tiny.json 64 2
//
// Each layer's SDPA saves k and v expanded to 4 heads instead of their 2:
// 2 layers x 2 tensors x tokens x 2 more heads x 16 x 4 bytes. The
// oracle's totals, 342,156 B (enable_gqa) and 358,540 B (repeat_kv) at
// seq 32, are memsh's: the loss's padded labels (33 int64, whose slice
// cross-entropy saves: core's loss_labels.go) and the rotary cos and sin
// tables q * cos saves, 2 x 32 x 16 x 4 B, one pair for all layers
// (nn.Attention.RopeTables), counted.
func TestSDPAGQAAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		seq, batch int64
		want       int64
	}{
		{32, 1, 16_384},
		{64, 2, 65_536},
	} {
		saved := func(version string) int64 {
			m, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa", Transformers: version})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Seq, p.Batch = tc.seq, tc.batch
			if p.Precision, err = core.LookupPrecision("fp32"); err != nil {
				t.Fatal(err)
			}
			if p.Runtime, err = core.LookupRuntime("cpu"); err != nil { // torch 2.15 on the CPU, as measured
				t.Fatal(err)
			}
			return evalPlan(t, p).SavedActivations
		}
		native, repeat := saved("4.57.1"), saved("4.53.3")
		if got := repeat - native; got != tc.want {
			t.Errorf("seq %d batch %d: repeat_kv adds %d saved bytes, transformers %d", tc.seq, tc.batch, got, tc.want)
		}
		if tc.seq == 32 && native != 342_156 {
			t.Errorf("seq 32: %d saved bytes with enable_gqa, want the oracle's 342,156", native)
		}
	}
}

// The rule by version and what keeps repeat_kv: a torch without
// enable_gqa (runtime cuda-2.1), eager attention, a sliding window (its
// mask).
func TestSDPAGQARule(t *testing.T) {
	for _, tc := range []struct {
		version, runtime, attn string
		want                   bool // the k and v copies are gone
	}{
		{"4.57.1", "cuda", "sdpa", true},
		{"4.54.0", "cuda", "sdpa", true},
		{"5.24.0", "cuda", "sdpa", true},
		{"4.53.3", "cuda", "sdpa", false},
		{"4.45", "cuda", "sdpa", false},
		{"4.57.1", "cuda-2.1", "sdpa", false},
		{"4.57.1", "cuda", "eager", false},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: tc.attn, Transformers: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		if p.Runtime, err = core.LookupRuntime(tc.runtime); err != nil {
			t.Fatal(err)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		copies := 0
		for _, op := range prog.Ops {
			if op.Kind == "repeat_kv" {
				copies++
			}
		}
		if got := copies == 0; got != tc.want {
			t.Errorf("transformers %s, %s, %s: %d repeat_kv copies", tc.version, tc.runtime, tc.attn, copies)
		}
	}
	if _, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "latest"}); err == nil {
		t.Error("transformers=\"latest\" was accepted")
	}
}
