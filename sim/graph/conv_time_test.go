package graph

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// attentionAlone is the graph attention on its own, as anemoi-core PR
// #631 timed it (test_triton_gt.py at b40b6c610 calls
// GraphTransformerConv and GraphTransformerFunction on given query [dst,
// H, d], key and value [src, H, d] and edge features [edges, H, d]): the
// four inputs are made from the model input by copies outside the conv's
// scope, in the plan's compute dtype (fp16 for "fp16", bf16 for
// "bf16-mixed": tools/oracle/graph_conv.py's bf16 leaves under autocast),
// and need gradients.
//
// With chunks > 0 it is anemoi-models 0.8.1's attention_block over that
// many edge chunks (block.py@models-0.8.1 l.556-584): the edges copied
// per chunk, an fp32 accumulator over all destination rows, and
// out += self.conv(...) per chunk.
type attentionAlone struct {
	g                       edgeAttention
	src, dst, edges, chunks int64
}

func (a *attentionAlone) Kind() string           { return "attention_alone" }
func (a *attentionAlone) Label() string          { return "" }
func (a *attentionAlone) Params() int64          { return 0 }
func (a *attentionAlone) Children() []core.Layer { return nil }
func (a *attentionAlone) Summary() string        { return "" }
func (a *attentionAlone) Validate(string) error  { return nil }

func (a *attentionAlone) Lower(b *core.Builder, x core.Value) core.Value {
	c, dt := a.g.channels, b.Prec.Compute
	in := func(name string, rows int64) core.Value {
		return b.Ew("copy", name, []core.Value{x}, []int64{rows, c}, dt, "benchmark input")
	}
	q, k, v, e := in("query", a.dst), in("key", a.src), in("value", a.src), in("edge_attr", a.edges)
	idx := b.Ew("copy", "edge_index", []core.Value{x}, []int64{2, a.edges}, units.INT64, "benchmark edge index")
	b.Val(idx).Grad = false
	if a.chunks > 0 {
		return a.g.block(b, q, k, v, e, idx, a.dst, a.edges, a.chunks)
	}
	return a.g.conv(b, "conv", q, k, v, e, idx, a.dst, a.edges)
}

// attentionTime is the forward + backward GPU time of the ops in the
// conv's scope (the benchmark inputs' copies excluded), fp16.
func attentionTime(t *testing.T, a *attentionAlone, gpu, runtime string) float64 {
	t.Helper()
	fwd, bwd := attentionPhases(t, a, gpu, runtime, "fp16")
	return fwd + bwd
}

// attentionPhases is the forward and the backward GPU time, in seconds, of
// the ops in the conv's scope under the named precision.
func attentionPhases(t *testing.T, a *attentionAlone, gpu, runtime, precision string) (fwd, bwd float64) {
	t.Helper()
	prec, err := core.LookupPrecision(precision)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.LookupRuntime(runtime)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hw.LookupDevice(gpu)
	if err != nil {
		t.Fatal(err)
	}
	m := &core.Model{Name: "pr631", Layers: []core.Layer{a}, Loss: "mse", InputDim: a.g.channels, InputGrad: true}
	p := &core.Plan{Model: m, Batch: 1, Seq: a.dst, GradAccum: 1, Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW},
		Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range timing.PriceOps(prog, p) {
		op := prog.Ops[i]
		if strings.HasPrefix(op.Module, "conv") {
			fwd, bwd = fwd+c.Fwd, bwd+c.Bwd
			if testing.Verbose() && len(op.Out) > 0 {
				o := prog.Values[op.Out[len(op.Out)-1]]
				t.Logf("  %-12s %-20s %v %s fwd %.3f bwd %.3f ms", op.Kind, op.Name, o.Shape, o.Dtype, 1e3*c.Fwd, 1e3*c.Bwd)
			}
		}
	}
	return fwd, bwd
}

// PR #631's table: ms per forward + backward of the graph attention alone,
// fp16 ("All runs use era = n320, h = lvl6-multi-scale, dtype = fp16";
// commit b40b6c610's message), PyG's GraphTransformerConv and the Triton
// kernel, on an H200 and an A100. The PR publishes neither its harness nor
// its channels and heads. Its graph (n320 to TriNodes(6)) is the one of
// anemoi's CI benchmark, training/tests/integration/config/benchmark/
// graphtransformer.yaml (08f524592, before the PR): num_channels 512, the
// model's default 16 heads; memsh takes those. (At graphtransformer.yaml's
// 1024 channels the Triton kernel's own bytes, 10 rows of 2 KiB per edge
// at least with no reuse, stream past every measured row: 0.83 ms for
// h_to_h's 327,600 edges would need 8 TB/s on an H200.) The inputs are
// fp16 tensors, not autocast: PyG's message and scatter run in fp16. The
// graphs, anemoi-training's graph/multi_scale.yaml at that commit:
//
//   - h_to_h: MultiScaleEdges on 40,962 nodes, 80*(4^6-1) = 327,600 edges
//     (exact);
//   - h_to_era: KNNEdges(3) to the N320's 542,080 points, 1,626,240 edges
//     (exact);
//   - era_to_h: CutOffEdges(cutoff_factor=0.6): the radius is 0.6 x the
//     largest nearest-neighbour distance of the mesh (graphs/utils.py
//     get_grid_reference_distance), 0.6 x 0.02066 = 0.01240 for the
//     level-6 icosphere; at 542,080 / 4pi points per steradian, 20.8 grid
//     points per mesh node (an estimate: the grid taken as uniform),
//     852,830 edges;
//   - dop_enc is not described: left out.
//
// memsh (go test ./sim/graph -run PR631 -v):
//
//	         PyG ms (measured)       Triton ms (measured)  PyG on torch 2.6
//	H200 era_to_h  28.89 (23.97) +21 %   3.02 (2.77)   +9 %   31.25 +30 %
//	H200 h_to_h    11.02  (9.64) +14 %   0.93 (0.83)  +12 %   11.92 +24 %
//	H200 h_to_era  54.79 (46.99) +17 %   5.57 (4.87)  +14 %   59.28 +26 %
//	A100 era_to_h  26.08 (53.09) -51 %   7.11 (6.81)   +4 %   30.75 -42 %
//	A100 h_to_h     9.22 (20.32) -55 %   2.24 (1.82)  +23 %   10.71 -47 %
//	A100 h_to_era  49.03 (100.4) -51 %  13.24 (11.19) +18 %   57.17 -43 %
//
// The PR does not say which PyTorch it ran; its date (October 2025)
// makes it 2.8 or later, where fp16 index_select copies 8 bytes at a
// time (pytorch#152380): memsh holds it to runtime "cuda" ("cuda-2.6":
// an element at a time, 2.5x slower, the last column).
//
// The fused kernel, priced from the rows gt.py reads and writes (the
// mesh's keys and values partly served from L2: timing/graph.go), lands
// within +4 to +23 %. The PR does not say which A100: memsh's "A100" is
// the 80 GB part (2,039 GB/s); on the 40 GB part (1,555 GB/s) every A100
// time grows by 31 %.
//
// PyG's message passing on the H200 is priced from PyTorch's eager
// kernels measured on one H200 at these shapes (hw.GraphKernels; each
// kernel within 3-13 % of its measurement, timing/graph_rates_test.go):
// three index_selects and their index_add_ backwards (1.42 ms each on
// h_to_h, 8.5 times their bytes at the copy rate), the head sums, the
// broadcast multiplies, the scatter_add_. The kernels PyG runs, as
// measured (sim/testdata/cuda_h200/graph_kernels.jsonl, fp16; the softmax
// over [edges, 16] left out), sum to 11.20 ms on h_to_h and 53.07 ms on
// h_to_era: forward 3 index_select, 2 add and a same-shape multiply (at
// the add's time), a head sum, a broadcast multiply, a scatter_add;
// backward the scatter's gather, the message's broadcast multiply,
// multiply and head sum, the scores' two broadcast multiplies (the
// expanded gradient), an add (edge_attr's two gradients) and 3
// index_add. memsh lands 2 % under and 3 % over those sums (6 and 11 %
// over before the adds' backward took autograd's rule, timing/backward.go:
// the gradient passed through, edge_attr's two gradients summed once);
// the same-shape multiplies keep the general rule, and the scores'
// backward is priced as contiguous multiplies where PyTorch runs two
// broadcast ones. The PR's own times are 14 and 11 % under the sums,
// which its unpublished harness, channels and heads leave unexplained.
// The test holds memsh within 15 % of the kernels' sum and within 35 % of
// the PR on the H200 (the sums up to 16 % over the PR, memsh up to 15 %
// over the sums; era_to_h's edges are an estimate, without a measured
// sum); on the A100,
// which has no measured graph kernels (timing prices their bytes at the
// copy rate: docs/time.md says why the H200's are not carried over),
// under the PR's times, as before, and on torch 2.6 above torch 2.8.
func TestGraphAttentionAgainstPR631(t *testing.T) {
	const c, h = 512, 16
	graphs := map[string]attentionAlone{
		"era_to_h": {src: 542_080, dst: 40_962, edges: 852_830},
		"h_to_h":   {src: 40_962, dst: 40_962, edges: 327_600},
		"h_to_era": {src: 40_962, dst: 542_080, edges: 1_626_240},
	}
	for _, r := range []struct {
		gpu, graph  string
		pyg, triton float64 // ms, PR #631
		kernels     float64 // ms, the measured kernels' sum (0: not measured)
	}{
		{"H200", "era_to_h", 23.97, 2.77, 0}, {"H200", "h_to_h", 9.64, 0.83, 11.20}, {"H200", "h_to_era", 46.99, 4.87, 53.07},
		{"A100", "era_to_h", 53.09, 6.81, 0}, {"A100", "h_to_h", 20.32, 1.82, 0}, {"A100", "h_to_era", 100.44, 11.19, 0},
	} {
		a := graphs[r.graph]
		a.g = edgeAttention{channels: c, heads: h, backend: BackendPyG}
		pyg := 1e3 * attentionTime(t, &a, r.gpu, "cuda")
		old := 1e3 * attentionTime(t, &a, r.gpu, "cuda-2.6")
		a.g.backend = BackendTriton
		tri := 1e3 * attentionTime(t, &a, r.gpu, "cuda")
		t.Logf("%s %-8s pyg %6.2f ms (measured %6.2f, %+4.0f %%)  triton %5.2f ms (measured %5.2f, %+4.0f %%)  ratio %4.1f (measured %4.1f)",
			r.gpu, r.graph, pyg, r.pyg, 100*(pyg/r.pyg-1), tri, r.triton, 100*(tri/r.triton-1), pyg/tri, r.pyg/r.triton)
		t.Logf("%s %-8s pyg on torch 2.6 (fp16 index_select an element at a time) %6.2f ms (%+4.0f %%)", r.gpu, r.graph, old, 100*(old/r.pyg-1))
		if math.Abs(tri/r.triton-1) > 0.30 {
			t.Errorf("%s %s: triton %.2f ms, measured %.2f: more than 30 %% off", r.gpu, r.graph, tri, r.triton)
		}
		if old <= pyg {
			t.Errorf("%s %s: pyg on torch 2.6 %.2f ms, want over 2.8's %.2f", r.gpu, r.graph, old, pyg)
		}
		if r.kernels > 0 {
			t.Logf("%s %-8s pyg %6.2f ms against the measured kernels' %6.2f (%+4.0f %%)", r.gpu, r.graph, pyg, r.kernels, 100*(pyg/r.kernels-1))
			if math.Abs(pyg/r.kernels-1) > 0.15 {
				t.Errorf("%s %s: pyg %.2f ms, the measured kernels sum to %.2f: more than 15 %% off", r.gpu, r.graph, pyg, r.kernels)
			}
		}
		if dev, _ := hw.LookupDevice(r.gpu); dev.Rates().Graph.Measured() {
			if math.Abs(pyg/r.pyg-1) > 0.35 {
				t.Errorf("%s %s: pyg %.2f ms, measured %.2f: more than 35 %% off", r.gpu, r.graph, pyg, r.pyg)
			}
		} else if pyg >= r.pyg || old >= r.pyg {
			t.Errorf("%s %s: pyg %.2f ms (torch 2.6 %.2f), measured %.2f: without measured kernels memsh prices PyG's gathers and scatters at their bytes, a lower bound",
				r.gpu, r.graph, pyg, old, r.pyg)
		}
	}
}
