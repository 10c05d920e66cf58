package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// The oracle's CUDA suite against memsh (issues 19, 20, 28). Measured on
// one H200, sim/testdata/cuda_h200, tools/oracle/cuda_run.sh: torch
// 2.11.0+cu130, CUDA 13.0, cuDNN 9.19, driver 580, no allocator settings;
// ../shared/oracle/measure.py --device cuda --suite cuda, step 2 (the
// steady state: the cache step 1 left). Each row is one case, its figures
// written here: allocated at the start of the step, after the forward and
// after the backward, the saved activations (saved_tensors_hooks,
// storages, the input's included), max_memory_allocated and
// max_memory_reserved. memsh builds the same model (oracleBlock for gpt2
// and llama, a Linear and cross-entropy for lmhead, an Embedding), on the
// H200, runtime "cuda", AdamW foreach (torch.optim.AdamW(params,
// lr=1e-4): foreach is the default on CUDA), the input requiring grad.
//
// What measure.py holds beside the model is added to memsh's figures,
// each from its source, never fitted: the fixed output gradient gout
// (out.backward(gout): the output's size, held all step), the output
// itself from the end of the forward to `del out` after the backward (a
// "none" loss in memsh sums it and drops it), the blocks' buffers
// (register_buffer: GPT-2's [s, s] bool causal mask, Llama's the same and
// its cos and sin tables, [s, head_dim] each in the parameters' dtype),
// and the cuBLASLt workspaces (1 MiB each) that earlier cases of the same
// process left: the suite runs in one process and PyTorch keeps every
// workspace; lt is what the process held, read from
// known_baseline_minus_allocated_at_start (-(2 x 32 MiB + lt x 1 MiB) +
// 4 B per parameter tensor, AdamW's step on the CPU).
//
// Per row (peak: max_memory_allocated; reserved: max_memory_reserved;
// memsh with the harness terms; -v prints the same table). memsh replays
// step 1 before step 2 through the same allocator (AdamW makes its
// moments in step 1's step(), in the cache its activations left:
// replay/lazy_states.go); replaying step 2 alone on an empty cache the
// reserve was -11.3 % to +13.2 % (rows 21 and 5; row 3 +8.9 %, row 19
// -8.9 %), now -4.8 % to +4.0 %:
//
//	#   case                                           peak          memsh       %       reserved          memsh       %
//	1   gpt2 bf16 eager                         12735340544    12768895488   +0.3%    13044285440    13237223424   +1.5%
//	2   gpt2 bf16 sdpa                           4602649088     4552305152   -1.1%     4854906880     4661968896   -4.0%
//	3   llama bf16 eager                        27004297216    27004297728   +0.0%    28032630784    29140975616   +4.0%
//	4   llama bf16 sdpa                          9323220992     9356771840   +0.4%     9764339712     9614393344   -1.5%
//	5   lmhead bf16                             15895430144    15895430656   +0.0%    15896412160    15897460736   +0.0%
//	6   gnn fp32                                20794347008              -       -    30851203072              -       -
//	7   embedding fp32                          10872946688    10872946688   +0.0%    11018436608    10941890560   -0.7%
//	8   gpt2 bf16 eager drop=functional         12735340544    12768895488   +0.3%    13044285440    13237223424   +1.5%
//	9   gpt2 bf16 eager ckpt=full                2526304256     2526304768   +0.0%     3070230528     2923429888   -4.8%
//	10  gpt2 bf16 eager ckpt=selective           5438300160     5455077888   +0.3%     5676990464     5722079232   +0.8%
//	11  gpt2 fp32 eager                         23728537600    23795646976   +0.3%    24450695168    24413995008   -0.2%
//	12  gpt2 amp_bf16 eager                     18408062976    18441617920   +0.2%    18897436672    19280166912   +2.0%
//	13  gpt2 amp_bf16 sdpa                       6248823296     6232035840   -0.3%     6425673728     6279921664   -2.3%
//	14  gpt2 bf16 eager                         13375111168    13442220544   +0.5%    14153678848    14081327104   -0.5%
//	15  llama bf16 sdpa ckpt=full                8969846784     8969846784   +0.0%     9240051712     9139388416   -1.1%
//	16  llama bf16 sdpa ckpt=full nonreentrant     8969846784     8969846784   +0.0%     9122611200     9021947904   -1.1%
//	17  llama fp32 eager                        17811578880    17811579392   +0.0%    20606615552    20854079488   +1.2%
//	18  llama amp_bf16 sdpa                     17803378688    17803378688   +0.0%    21644705792    21686648832   +0.2%
//	19  llama bf16 sdpa                         12879704064    12913246720   +0.3%    14428405760    13985906688   -3.1%
//	20  llama bf16 eager ckpt=selective         20957892608    20890784256   -0.3%    23198695424    23179821056   -0.1%
//	21  lmhead fp32                              8202093568     8202094080   +0.0%     9252634624     9252634624   +0.0%
//	22  gnn bf16                                10744004096              -       -    15493758976              -       -
//
// Before this test's fixes (the same harness, memsh at 2737b36) peak
// allocated was -11.9 % (row 3), -15.7 % (row 20), -4.2 % (row 12), -4.0 %
// (row 9): the bf16 softmax's fp32 copy and CUDA's softmax backward
// temporary (core/softmax_input.go, nn/attention.go) and the recompute's
// cuBLASLt workspace (replay/cublas.go) close them. The other figures
// (at the start, after the forward and the backward, saved) are asserted
// to the byte, or to what TestOracleCUDA names.
//
// Within the defaults but not explained: at the backward peak memsh holds
// one to four [b, s, h] tensors (16 to 64 MiB) more than PyTorch in rows
// 1, 4, 8, 10-12, 14 and 19, and 64 MiB less in row 20; the peaks of the
// Llama rows 3, 15-18 and of lmhead and embedding are exact to 512 B.
//
// Named causes of what remains: see cudaRow.why. The gnn rows are not
// modelled: memsh has no message-passing layer of index_select, cat and
// index_add or scatter_add over a node table (sim/graph's layers are
// anemoi's), so their figures are kept here but not compared.

// cudaRow is one case of the suite and its measured figures.
type cudaRow struct {
	n int
	oracleCase
	attn         string // eager | sdpa
	functional   bool   // drop=functional (F.dropout: native_dropout on CUDA, the same bytes)
	nonReentrant bool
	vocab        int64
	upcast       bool
	lt           int64 // cuBLASLt workspaces the process held (measured)

	start, fwd, bwd, saved, peak, res int64 // measured, step 2

	bwdGap          int64   // memsh after the backward less the measurement, where a cause is named (why)
	tolPeak, tolRes float64 // percent; 0: 1 and 5
	why             string  // the named cause of a gap beyond the defaults
}

var cudaRows = []cudaRow{
	{n: 1, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "eager", lt: 1,
		start: 1021222912, fwd: 12498411520, bwd: 1357086720, saved: 11477188608, peak: 12735340544, res: 13044285440},
	{n: 2, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "sdpa", lt: 1,
		start: 1021222912, fwd: 4451651584, bwd: 1357086720, saved: 3430416576, peak: 4602649088, res: 4854906880,
		tolPeak: 1.5, why: "peak: cuDNN attention's backward (ScaledDotProductCudnnAttentionBackward0) holds 48 MiB, 3 x [b, s, h] bf16, more than the flash-attn workspace memsh replays (an fp32 dq accumulator and softmax_d); not identified in cuDNN's frontend"},
	{n: 3, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 4096, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336}, attn: "eager", lt: 1,
		start: 5445451776, fwd: 21853700096, bwd: 7257456640, saved: 16374693888, peak: 27004297216, res: 28032630784},
	{n: 4, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 4096, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336}, attn: "sdpa", lt: 1,
		start: 5445451776, fwd: 8970899456, bwd: 7257456640, saved: 3491889216, peak: 9323220992, res: 9764339712},
	{n: 5, oracleCase: oracleCase{kind: "lmhead", dtype: "bf16", s: 4096, b: 2, h: 4096}, vocab: 128256, upcast: true, lt: 1,
		start: 3287351296, fwd: 7490044928, bwd: 4405133824, saved: 4269867012, peak: 15895430144, res: 15896412160},
	{n: 6, oracleCase: oracleCase{kind: "gnn", dtype: "fp32"}, lt: 1,
		start: 2167309312, fwd: 14457209856, bwd: 4216687616, saved: 12336000000, peak: 20794347008, res: 30851203072},
	{n: 7, oracleCase: oracleCase{kind: "embedding", dtype: "fp32", s: 4096, b: 8, h: 512}, vocab: 1048576, lt: 1,
		start: 6577979392, fwd: 6645088256, bwd: 8792571904, saved: 262144, peak: 10872946688, res: 11018436608},
	{n: 8, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "eager", functional: true, lt: 1,
		start: 1021222912, fwd: 12498411520, bwd: 1357086720, saved: 11477188608, peak: 12735340544, res: 13044285440},
	{n: 9, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12, ckpt: "full"}, attn: "eager", lt: 2,
		start: 1022271488, fwd: 1223598080, bwd: 1358135296, saved: 201326592, peak: 2526304256, res: 3070230528,
		bwdGap: -16 << 20, why: "after the backward memsh holds 16 MiB ([b, s, h] bf16) less under reentrant full checkpointing than without (PyTorch the same as row 1, but for the recompute's cuBLASLt workspace): not identified; the peak is exact"},
	{n: 10, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12, ckpt: "selective"}, attn: "eager", lt: 2,
		start: 1022271488, fwd: 4446396416, bwd: 1358135296, saved: 3424124928, peak: 5438300160, res: 5676990464},
	{n: 11, oracleCase: oracleCase{kind: "gpt2", dtype: "fp32", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "eager", lt: 2,
		start: 1962754048, fwd: 23103619072, bwd: 2634481664, saved: 21140865024, peak: 23728537600, res: 24450695168},
	{n: 12, oracleCase: oracleCase{kind: "gpt2", dtype: "amp_bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "eager", lt: 2,
		start: 1962754048, fwd: 17365811200, bwd: 2634481664, saved: 15101067264, peak: 18408062976, res: 18897436672},
	{n: 13, oracleCase: oracleCase{kind: "gpt2", dtype: "amp_bf16", s: 1024, b: 8, h: 1024, a: 16, layers: 12}, attn: "sdpa", lt: 2,
		start: 1962754048, fwd: 6097825792, bwd: 2634481664, saved: 3833069760, peak: 6248823296, res: 6425673728},
	{n: 14, oracleCase: oracleCase{kind: "gpt2", dtype: "bf16", s: 2048, b: 2, h: 4096, a: 32, layers: 4}, attn: "eager", lt: 2,
		start: 4986208256, fwd: 12636880896, bwd: 6664355840, saved: 7650672640, peak: 13375111168, res: 14153678848},
	{n: 15, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 4096, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336, ckpt: "full"}, attn: "sdpa", lt: 2,
		start: 5446500352, fwd: 5580718080, bwd: 7258505216, saved: 134217728, peak: 8969846784, res: 9240051712},
	{n: 16, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 4096, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336, ckpt: "full"}, attn: "sdpa", nonReentrant: true, lt: 2,
		start: 5446500352, fwd: 5580718080, bwd: 7258505216, saved: 134217728, peak: 8969846784, res: 9122611200},
	{n: 17, oracleCase: oracleCase{kind: "llama", dtype: "fp32", s: 2048, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336}, attn: "eager", lt: 2,
		start: 10630856704, fwd: 15999631360, bwd: 14187757568, saved: 5368774656, peak: 17811578880, res: 20606615552},
	{n: 18, oracleCase: oracleCase{kind: "llama", dtype: "amp_bf16", s: 4096, b: 1, h: 4096, a: 32, kv: 8, layers: 4, f: 14336}, attn: "sdpa", lt: 2,
		start: 10756685824, fwd: 16664498176, bwd: 14380695552, saved: 4162977856, peak: 17803378688, res: 21644705792},
	{n: 19, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 2048, b: 4, h: 2048, a: 32, kv: 4, layers: 12, f: 5632}, attn: "sdpa", lt: 2,
		start: 3364126720, fwd: 12672086016, bwd: 4488298496, saved: 9274392768, peak: 12879704064, res: 14428405760},
	{n: 20, oracleCase: oracleCase{kind: "llama", dtype: "bf16", s: 2048, b: 4, h: 2048, a: 32, kv: 4, layers: 12, f: 5632, ckpt: "selective"}, attn: "eager", lt: 2,
		start: 3364126720, fwd: 12659490816, bwd: 4488298496, saved: 9261809664, peak: 20957892608, res: 23198695424},
	{n: 21, oracleCase: oracleCase{kind: "lmhead", dtype: "fp32", s: 4096, b: 4, h: 4096}, vocab: 32000, lt: 2,
		start: 1910636544, fwd: 4007789568, bwd: 2703360512, saved: 2365718532, peak: 8202093568, res: 9252634624},
	{n: 22, oracleCase: oracleCase{kind: "gnn", dtype: "bf16"}, lt: 2,
		start: 1142781952, fwd: 7287109632, bwd: 2167307264, saved: 6192000000, peak: 10744004096, res: 15493758976},
}

// cudaModel is the case's model in memsh, nil for gnn.
func cudaModel(c cudaRow) *core.Model {
	switch c.kind {
	case "gpt2", "llama":
		blk := oracleBlock(c.oracleCase)
		core.Walk(blk, "", func(_ string, x core.Layer) {
			if a, ok := x.(*nn.Attention); ok {
				a.Impl = c.attn
			}
		})
		return &core.Model{Name: c.kind, Layers: []core.Layer{&core.Repeat{Layer: blk, N: c.layers}}, Loss: "none", InputGrad: true}
	case "lmhead": // LMHead: Linear(h, vocab, bias=False), logits.float() when upcast, F.cross_entropy
		return &core.Model{Name: "lmhead", Layers: []core.Layer{&nn.Linear{Name: "proj", In: c.h, Out: c.vocab}},
			Loss: "cross_entropy", LogitsFP32: c.upcast, InputGrad: true}
	case "embedding": // nn.Embedding(vocab, h) on int64 ids, backward(gout)
		return &core.Model{Name: "embedding", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: c.vocab, Dim: c.h}}, Loss: "none"}
	}
	return nil
}

func cudaPlan(t testing.TB, c cudaRow, m *core.Model) *core.Plan {
	prec := map[string]string{"fp32": "fp32", "bf16": "bf16", "amp_bf16": "bf16-mixed"}[c.dtype]
	ck, err := core.ParseCheckpoint(c.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if c.ckpt != "" {
		ck.Reentrant = !c.nonReentrant
	}
	return &core.Plan{
		Model: m, Batch: c.b, Seq: c.s, GradAccum: 1, Members: 1, Precision: mustPrecision(t, prec),
		Optimizer: core.Optimizer{Kind: core.AdamW, Impl: "foreach"}, Checkpoint: ck, Runtime: mustRuntime(t, "cuda"), Device: mustDevice(t, "H200"),
	}
}

// harness is what measure.py holds beside the model: gout and the
// module buffers all step, the output (out) from the end of the forward
// to the end of the backward.
func (c cudaRow) harness() (held, out int64) {
	act := int64(2) // bf16 activations; fp32 inputs under amp_bf16 keep the residual stream fp32
	par := int64(2)
	if c.dtype != "bf16" {
		act, par = 4, 4
	}
	switch c.kind {
	case "gpt2":
		out = c.b * c.s * c.h * act
		held = out + c.layers*c.s*c.s // the causal mask, bool
	case "llama":
		out = c.b * c.s * c.h * act
		held = out + c.layers*(c.s*c.s+2*c.s*(c.h/c.a)*par) // mask, cos, sin
	case "embedding":
		out = c.b * c.s * c.h * 4
		held = out
	}
	return held, out
}

type cudaFigures struct{ start, fwd, bwd, saved, peak, res int64 }

// cudaMemsh replays row c and adds the harness's terms.
func cudaMemsh(t *testing.T, c cudaRow, m *core.Model) cudaFigures {
	rep, err := Evaluate(cudaPlan(t, c, m), core.Options{Timeline: true})
	if err != nil {
		t.Fatalf("row %d: %v", c.n, err)
	}
	var f cudaFigures
	lts := int64(-2) // the setup's "cublas" allocations: two cuBLAS workspaces, then memsh's own cuBLASLt ones
	for _, p := range rep.Timeline {
		switch p.Phase {
		case replay.PhaseSetup:
			f.start = p.Allocated
			if p.Op == "cublas" {
				lts++
			}
		case replay.PhaseForward:
			f.fwd = p.Allocated
		case replay.PhaseBackward:
			f.bwd = p.Allocated
		}
	}
	held, out := c.harness()
	held += (c.lt - lts) << 20
	f.start += held
	f.fwd += held + out
	f.bwd += held + out
	f.saved = rep.SavedActivations
	extra := held
	if rep.PeakAt.Phase == replay.PhaseBackward {
		extra += out
	}
	f.peak = rep.PeakAllocated + extra
	f.res = rep.PeakReserved + extra
	return f
}

func cudaPct(got, want int64) float64 { return 100 * float64(got-want) / float64(want) }

// cudaLabel names row c as the table prints it.
func cudaLabel(c cudaRow) string {
	label := c.kind + " " + c.dtype
	if c.attn != "" {
		label += " " + c.attn
	}
	if c.ckpt != "" {
		label += " ckpt=" + c.ckpt
		if c.nonReentrant {
			label += " nonreentrant"
		}
	}
	if c.functional {
		label += " drop=functional"
	}
	return label
}

// TestOracleCUDA compares every modelled row: allocated at the start of
// the step to the byte; after the forward and the saved activations up
// to what cuDNN's SDPA keeps of its RNG (a philox seed and offset, two
// 8-byte GPU tensors of a 512 B block each, per call, which memsh does
// not replay); after the backward to the 512 B of the loss, or the row's
// named gap; max_memory_allocated within tolPeak (1 % unless the row says
// why) and max_memory_reserved within tolRes (5 % unless the row says
// why).
func TestOracleCUDA(t *testing.T) {
	var tab strings.Builder
	fmt.Fprintf(&tab, "%-3s %-36s %14s %14s %7s %14s %14s %7s\n", "#", "case", "peak", "memsh", "%", "reserved", "memsh", "%")
	for _, c := range cudaRows {
		m := cudaModel(c)
		if m == nil {
			fmt.Fprintf(&tab, "%-3d %-36s %14d %14s %7s %14d %14s %7s\n", c.n, cudaLabel(c), c.peak, "-", "-", c.res, "-", "-")
			continue
		}
		f := cudaMemsh(t, c, m)
		fmt.Fprintf(&tab, "%-3d %-36s %14d %14d %+6.1f%% %14d %14d %+6.1f%%\n", c.n, cudaLabel(c), c.peak, f.peak, cudaPct(f.peak, c.peak), c.res, f.res, cudaPct(f.res, c.res))
		calls := int64(0)                     // cuDNN SDPA calls
		if c.attn == "sdpa" && c.ckpt == "" { // under full checkpointing the hooks see only the blocks' inputs
			calls = c.layers
		}
		if f.start != c.start {
			t.Errorf("row %d %s: allocated at start %d, measured %d (%+d)", c.n, cudaLabel(c), f.start, c.start, f.start-c.start)
		}
		if d := f.fwd - c.fwd; d > 512 || d < -512-1024*calls {
			t.Errorf("row %d %s: allocated after forward %d, measured %d (%+d)", c.n, cudaLabel(c), f.fwd, c.fwd, d)
		}
		if d := f.saved - c.saved; d != -16*calls {
			t.Errorf("row %d %s: saved %d, measured %d (%+d)", c.n, cudaLabel(c), f.saved, c.saved, d)
		}
		if d := f.bwd - c.bwd - c.bwdGap; d > 0 || d < -512 {
			t.Errorf("row %d %s: allocated after backward %d, measured %d (%+d; named gap %+d)", c.n, cudaLabel(c), f.bwd, c.bwd, f.bwd-c.bwd, c.bwdGap)
		}
		tolPeak, tolRes := c.tolPeak, c.tolRes
		if tolPeak == 0 {
			tolPeak = 1
		}
		if tolRes == 0 {
			tolRes = 5
		}
		if e := cudaPct(f.peak, c.peak); e > tolPeak || e < -tolPeak {
			t.Errorf("row %d %s: peak allocated %d, measured %d (%+.2f%%, beyond %.1f%%)", c.n, cudaLabel(c), f.peak, c.peak, e, tolPeak)
		}
		if e := cudaPct(f.res, c.res); e > tolRes || e < -tolRes {
			t.Errorf("row %d %s: peak reserved %d, measured %d (%+.2f%%, beyond %.1f%%)", c.n, cudaLabel(c), f.res, c.res, e, tolRes)
		}
	}
	t.Log("\n" + tab.String())
}
