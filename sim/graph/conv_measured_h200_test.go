package graph

import (
	"math"
	"testing"
)

// TestGraphConvMeasuredH200 prices anemoi's whole PyG GraphTransformerConv
// message passing (conv.go's PyG lowering; attentionAlone's harness, as
// TestGraphAttentionAgainstPR631) against its forward + backward time
// measured on one H200 (sim/testdata/cuda_h200/graph_conv.jsonl and
// graph_conv_repeat.jsonl, runs 5 and 6, tools/oracle/graph_conv.py: the
// median of 5 runs after 2 warm-ups, CUDA events, torch 2.11.0+cu130). The
// script's leaves q, k, v, e require gradients and its destination
// indices are sorted (repeat_interleave where every row has the same
// in-degree), its source indices uniform at random. The two runs differ by
// at most 1.5 % (h_to_h's forward + backward, 11.79 and 11.97 ms); memsh
// is held within 20 % of their mean, forward and forward + backward.
//
// memsh (go test ./sim/graph -run MeasuredH200 -v):
//
//	graph          mode           fwd+bwd ms (measured)   fwd ms (measured)
//	h_to_h         fp16            11.02  (11.88)  -7 %    3.65  (4.16) -12 %
//	h_to_era       fp16            54.79  (57.16)  -4 %   18.20 (20.00)  -9 %
//	era_to_h       fp16            28.89  (30.56)  -5 %    9.47 (10.52) -10 %
//	h_to_h 8 heads fp16            10.73  (10.71)  +0 %    3.51  (3.56)  -1 %
//	h_to_h 1024    fp16            21.03  (19.83)  +6 %    6.72  (6.22)  +8 %
//	Bris processor bf16-autocast  146.86 (138.08)  +6 %   46.04 (40.90) +13 %
//	Bris processor fp16           135.01 (136.74)  -1 %   43.57 (44.64)  -2 %
//
// The backward takes autograd's rules (sim/timing/backward.go) for the
// two adds (key_j + edge_attr, value_j + edge_attr: the gradient passed
// through, edge_attr's two gradients summed by one add) and for the
// autocast fp32 cast of the product (one cast back), where the general
// rule priced twice their bytes: before, +0, +3, +2, +8, +15, +15 and
// +7 %. The Bris bf16 forward is 13 % over, 2.5 ms of it the fp32 cast at
// the upcast's measured rate (hw.EagerKernels.Upcast); the 1024-channel
// fp16 forward, without a cast, is 8 % over too (not isolated). The
// 512-channel, 16-head rows are 4-7 % under: their forward is 9-12 %
// under. The measured kernels' forward
// (graph_kernels.jsonl: three index_select, two adds, a same-shape
// multiply, the head sum, the broadcast multiply, scatter_add_) sums to
// 3.67 ms on h_to_h, itself 0.49 ms under the whole forward; what it
// leaves out is the scaling by 1/sqrt(d) and PyG's softmax over [edges,
// heads] (scatter_reduce amax, index_select, sub, exp, scatter_add_,
// index_select, add, div), which memsh prices as one op of its bytes
// (0.009 ms) and nobody has timed on its own.
func TestGraphConvMeasuredH200(t *testing.T) {
	for _, r := range []struct {
		graph, mode     string // graph_conv.jsonl's graph and mode
		precision       string // memsh's
		src, dst, edges int64
		channels, heads int64
		fwd, fwdBwd     [2]float64 // ms, graph_conv.jsonl (run 5) and graph_conv_repeat.jsonl (run 6)
	}{
		{"pr631_h_to_h", "fp16", "fp16", 40_962, 40_962, 327_600, 512, 16, [2]float64{4.128, 4.183}, [2]float64{11.794, 11.969}},
		{"pr631_h_to_era", "fp16", "fp16", 40_962, 542_080, 1_626_240, 512, 16, [2]float64{19.977, 20.028}, [2]float64{57.065, 57.252}},
		{"pr631_era_to_h", "fp16", "fp16", 542_080, 40_962, 852_830, 512, 16, [2]float64{10.513, 10.534}, [2]float64{30.508, 30.612}},
		{"pr631_h_to_h_8heads", "fp16", "fp16", 40_962, 40_962, 327_600, 512, 8, [2]float64{3.538, 3.579}, [2]float64{10.650, 10.768}},
		{"pr631_h_to_h_1024", "fp16", "fp16", 40_962, 40_962, 327_600, 1024, 16, [2]float64{6.209, 6.228}, [2]float64{19.799, 19.869}},
		{"bris_processor", "bf16-autocast", "bf16-mixed", 261_634, 261_634, 2_093_072, 1024, 16, [2]float64{40.880, 40.914}, [2]float64{137.910, 138.252}},
		{"bris_processor", "fp16", "fp16", 261_634, 261_634, 2_093_072, 1024, 16, [2]float64{44.622, 44.650}, [2]float64{136.709, 136.766}},
	} {
		a := attentionAlone{src: r.src, dst: r.dst, edges: r.edges,
			g: edgeAttention{channels: r.channels, heads: r.heads, backend: BackendPyG}}
		fwd, bwd := attentionPhases(t, &a, "H200", "cuda", r.precision)
		fwd, both := 1e3*fwd, 1e3*(fwd+bwd)
		m := (r.fwdBwd[0] + r.fwdBwd[1]) / 2
		mf := (r.fwd[0] + r.fwd[1]) / 2
		t.Logf("%-20s %-13s fwd+bwd %7.2f ms (measured %7.2f, %+4.0f %%)  fwd %6.2f (measured %6.2f, %+4.0f %%)",
			r.graph, r.mode, both, m, 100*(both/m-1), fwd, mf, 100*(fwd/mf-1))
		for _, x := range []struct {
			what      string
			got, runs float64
			meas, tol [2]float64
		}{
			{"forward + backward", both, m, r.fwdBwd, [2]float64{}},
			{"forward", fwd, mf, r.fwd, [2]float64{}},
		} {
			if spread := math.Abs(x.meas[0]/x.meas[1] - 1); spread > 0.02 {
				t.Errorf("%s %s %s: the two runs (%.3f, %.3f ms) differ by %.1f %%, over the 2 %% this test's 20 %% assumes",
					r.graph, r.mode, x.what, x.meas[0], x.meas[1], 100*spread)
			}
			if math.Abs(x.got/x.runs-1) > 0.20 {
				t.Errorf("%s %s %s: memsh %.2f ms, measured %.2f: more than 20 %% off", r.graph, r.mode, x.what, x.got, x.runs)
			}
		}
	}
}
