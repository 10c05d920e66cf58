package sim

import (
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// memsh's step time against the oracle's CUDA suite, measured on one H200
// (sim/testdata/cuda_h200/suite.jsonl, plain_step_wall_s: measure.py
// --device cuda --suite cuda, torch 2.11.0+cu130). Each case ran two
// measured steps, then one plain step timed by the wall clock between two
// synchronisations: forward, backward(gout) (no loss, except lmhead's
// cross-entropy), AdamW's default step (foreach); zero_grad is outside it.
// The models are shared/oracle's (oracleBlock); gnn (a PyG-like message
// passing layer) has no memsh model here.
//
// What the figures say (go test ./sim -run TestOracleCUDAStepTime -v):
//
//   - memsh prices a training run's kernels at Sustain (0.73 on Hopper: the
//     power limit and what else a long run loses). One plain step of
//     13-340 ms after the harness's idle waits runs closer to the isolated
//     kernels (the H200's GEMMs kept their full rate for ~50 ms of load,
//     timing/h200_measured_test.go), so the rows are compared with both.
//   - Isolated, memsh is never more than 5 % slower than a measured step:
//     it prices the kernels at their measured rates and nothing else on
//     the GPU. The fp32 rows (gpt2, llama, lmhead), whose steps are fp32
//     GEMMs at the measured fp32 rate, land within 4 %; the embedding's
//     (its gradient's index_add_ and AdamW over a 2 GiB table) -4.8 %.
//   - The bf16 and mixed-precision rows are 5-34 % faster in memsh than
//     measured (isolated), most where the step is many mid-sized kernels:
//     GPT-2's 12 layers of width 1024 (-24 to -34 %, with SDPA -34 %).
//     The H200's mid-sized GEMMs ran 15-18 % below memsh's isolated rate
//     in the kernel sweep (8192 x 3072 x 1024 and 8192 x 1024 x 4096,
//     GPT-2's shapes), and layer_norm and GELU 20 and 8 % below memsh's
//     stream rate; what the rest is needs a per-kernel profile of these
//     steps (tools/oracle/cuda_profile.py, prepared, not yet run).
type cudaTimeRow struct {
	oracleCase
	attn        string // eager | sdpa
	reentrant   bool   // checkpoint(use_reentrant=True), measure.py's default
	vocab       int64  // lmhead, embedding
	upcast      bool   // lmhead: logits.float()
	measured    float64
	computeFP32 bool // the step is fp32 GEMMs: isolated within 5 %
}

var cudaTimeRows = []cudaTimeRow{
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "bf16"}, attn: "eager", measured: 0.05582833290100098},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "bf16"}, attn: "sdpa", measured: 0.02598404884338379},
	{oracleCase: oracleCase{kind: "llama", s: 4096, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "bf16"}, attn: "eager", measured: 0.11541271209716797},
	{oracleCase: oracleCase{kind: "llama", s: 4096, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "bf16"}, attn: "sdpa", measured: 0.05490732192993164},
	{oracleCase: oracleCase{kind: "lmhead", s: 4096, b: 2, h: 4096, dtype: "bf16"}, vocab: 128256, upcast: true, measured: 0.05267000198364258},
	{oracleCase: oracleCase{kind: "embedding", s: 4096, b: 8, h: 512, dtype: "fp32"}, vocab: 1048576, measured: 0.013419628143310547},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "bf16"}, attn: "eager", measured: 0.05566096305847168}, // drop=functional: on CUDA the same kernel
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "bf16", ckpt: "full"}, attn: "eager", reentrant: true, measured: 0.07813739776611328},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "bf16", ckpt: "selective"}, attn: "eager", reentrant: true, measured: 0.07283902168273926},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "fp32"}, attn: "eager", measured: 0.23572874069213867, computeFP32: true},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "amp_bf16"}, attn: "eager", measured: 0.08122515678405762},
	{oracleCase: oracleCase{kind: "gpt2", s: 1024, b: 8, h: 1024, a: 16, layers: 12, dtype: "amp_bf16"}, attn: "sdpa", measured: 0.030999183654785156},
	{oracleCase: oracleCase{kind: "gpt2", s: 2048, b: 2, h: 4096, a: 32, layers: 4, dtype: "bf16"}, attn: "eager", measured: 0.06372570991516113},
	{oracleCase: oracleCase{kind: "llama", s: 4096, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "bf16", ckpt: "full"}, attn: "sdpa", reentrant: true, measured: 0.06880378723144531},
	{oracleCase: oracleCase{kind: "llama", s: 4096, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "bf16", ckpt: "full"}, attn: "sdpa", measured: 0.06774735450744629},
	{oracleCase: oracleCase{kind: "llama", s: 2048, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "fp32"}, attn: "eager", measured: 0.2643163204193115, computeFP32: true},
	{oracleCase: oracleCase{kind: "llama", s: 4096, b: 1, h: 4096, a: 32, kv: 8, f: 14336, layers: 4, dtype: "amp_bf16"}, attn: "sdpa", measured: 0.06915473937988281},
	{oracleCase: oracleCase{kind: "llama", s: 2048, b: 4, h: 2048, a: 32, kv: 4, f: 5632, layers: 12, dtype: "bf16"}, attn: "sdpa", measured: 0.08426547050476074},
	{oracleCase: oracleCase{kind: "llama", s: 2048, b: 4, h: 2048, a: 32, kv: 4, f: 5632, layers: 12, dtype: "bf16", ckpt: "selective"}, attn: "eager", reentrant: true, measured: 0.34159255027770996},
	{oracleCase: oracleCase{kind: "lmhead", s: 4096, b: 4, h: 4096, dtype: "fp32"}, vocab: 32000, measured: 0.2522008419036865, computeFP32: true},
}

// cudaTimeModel is the row's model: oracleBlock with the row's attention,
// LMHead (a Linear to the vocabulary, cross-entropy, logits.float() when
// upcast) or nn.Embedding.
func cudaTimeModel(r cudaTimeRow) *core.Model {
	switch r.kind {
	case "lmhead":
		return &core.Model{Name: "lmhead", Layers: []core.Layer{&nn.Linear{Name: "proj", In: r.h, Out: r.vocab}},
			Loss: "cross_entropy", LogitsFP32: r.upcast, InputGrad: true}
	case "embedding":
		return &core.Model{Name: "embedding", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: r.vocab, Dim: r.h}}, Loss: "none"}
	}
	blk := oracleBlock(r.oracleCase)
	core.Walk(blk, "", func(_ string, x core.Layer) {
		if a, ok := x.(*nn.Attention); ok {
			a.Impl = r.attn
		}
	})
	return &core.Model{Name: r.kind, Layers: []core.Layer{&core.Repeat{Layer: blk, N: r.layers}}, Loss: "none", InputGrad: true}
}

func cudaTimePlan(t *testing.T, r cudaTimeRow, sustain float64) *core.Plan {
	t.Helper()
	prec, err := core.LookupPrecision(map[string]string{"fp32": "fp32", "bf16": "bf16", "amp_bf16": "bf16-mixed"}[r.dtype])
	if err != nil {
		t.Fatal(err)
	}
	ck, err := core.ParseCheckpoint(r.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	ck.Reentrant = r.reentrant
	rt, _ := core.LookupRuntime("cuda")
	dev, err := hw.LookupDevice("H200")
	if err != nil {
		t.Fatal(err)
	}
	if sustain > 0 {
		dev.Kernels.Sustain = sustain
	}
	return &core.Plan{Model: cudaTimeModel(r), Batch: r.b, Seq: r.s, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW, Impl: "foreach"}, Checkpoint: ck, Runtime: rt, Device: dev}
}

func TestOracleCUDAStepTime(t *testing.T) {
	var priced, isolated []float64
	for _, r := range cudaTimeRows {
		name := r.kind + " " + r.dtype + " " + r.attn + " ckpt=" + r.ckpt
		step := func(sustain float64) float64 {
			rep, err := Evaluate(cudaTimePlan(t, r, sustain), core.Options{})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return rep.Time.StepSeconds
		}
		s, iso := step(0), step(1)
		e, ei := s/r.measured-1, iso/r.measured-1
		priced, isolated = append(priced, math.Abs(e)), append(isolated, math.Abs(ei))
		t.Logf("%-36s s=%5d b=%d h=%4d L=%2d: measured %6.1f ms, memsh %6.1f ms (%+5.1f %%), isolated %6.1f ms (%+5.1f %%)",
			name, r.s, r.b, r.h, r.layers, 1e3*r.measured, 1e3*s, 100*e, 1e3*iso, 100*ei)
		switch {
		case ei > 0.05:
			t.Errorf("%s: memsh's isolated step %+.1f %% slower than measured (want at most 5 %%: it prices the kernels alone)", name, 100*ei)
		case r.computeFP32 && ei < -0.05:
			t.Errorf("%s: an fp32 GEMM step %+.1f %% off isolated (want within 5 %%)", name, 100*ei)
		case ei < -0.40:
			t.Errorf("%s: memsh's isolated step %+.1f %% faster than measured (want within 40 %%)", name, 100*ei)
		}
	}
	med := func(x []float64) float64 {
		s := slices.Clone(x)
		sort.Float64s(s)
		return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
	}
	t.Logf("%d cases: median |error| %.1f %% as priced (Sustain %.2f), %.1f %% isolated", len(cudaTimeRows), 100*med(priced), hw.H200Sustain(), 100*med(isolated))
	// The medians docs/time.md states ("Median |error| 11.6 % as priced,
	// 6.8 % isolated"; 10.6 and 8.9 % before cross_entropy took its
	// kernels' bytes and RMSNorm's pow(2) pow_backward's three kernels:
	// the llama rows' log_softmax and norms came closer isolated and
	// further over as priced), held within a point and a half so that a
	// change that moves the suite is seen and the doc's figures follow it.
	for _, m := range []struct {
		what      string
		got, docs float64
	}{{"as priced", med(priced), 0.116}, {"isolated", med(isolated), 0.068}} {
		if math.Abs(m.got-m.docs) > 0.015 {
			t.Errorf("median |error| %s %.1f %%, docs/time.md says %.1f %%: the suite moved; update the doc and this row", m.what, 100*m.got, 100*m.docs)
		}
	}
}
