package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
)

// The Triton GraphTransformer (models/triton/gt.py, anemoi-core PR #631),
// counted by hand on chunkedPlan's decoder (two stacked members, fp32;
// R = 128 grid rows, S = 20 mesh rows, E = 256 edges, C = 8, H = 2) in
// K = 4 destination chunks of r = 32 rows, e = 64 edges and s = 10, 14,
// 14, 10 source rows (the band's 5 and 4.47 across each of its one or two
// boundaries: TestChunkedMapper):
//
//   - edge_index_to_csc per chunk: colptr [r+1] int64 (264 B), rowptr
//     [s+1] int64 (88, 120, 120, 88 B), edge_id_per_src [e] int64 (512 B);
//   - the kernel per chunk: out_saved [32, 8] fp32 (1,024 B), lse [32, 2]
//     fp32 (256 B), out [32, 8] in the query's dtype (fp32 here, 1,024 B);
//     it saves its 4 inputs, out_saved, lse, the edge index and the 3
//     index tensors, and its backward's D is [32, 2] fp32 (256 B);
//   - no per-edge tensor: PyG's query_i, key_j, value_j, softmax and
//     scatter_out are gone.
func TestTritonGraphAttention(t *testing.T) {
	prog, err := chunkedPlanWith(t, 4, 1, core.Train, graph.BackendTriton).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	bytes := map[string][]int64{}
	for _, v := range prog.Values {
		if strings.HasPrefix(v.Name, "decoder.") {
			parts := strings.Split(v.Name, ".")
			bytes[parts[len(parts)-1]] = append(bytes[parts[len(parts)-1]], v.Bytes)
		}
	}
	four := func(n int64) []int64 { return []int64{n, n, n, n} }
	for _, c := range []struct {
		name string
		want []int64
	}{
		{"colptr", four(264)}, {"rowptr", []int64{88, 120, 120, 88}}, {"edge_id_per_src", four(512)},
		{"out_saved", four(1_024)}, {"lse", four(256)},
		{"scatter_out", nil}, {"query_i", nil}, {"key_j", nil}, {"alpha", nil},
	} {
		if got := bytes[c.name]; !slices.Equal(got, c.want) {
			t.Errorf("decoder %s: %v bytes, want %v", c.name, got, c.want)
		}
	}
	kernels := 0
	for _, op := range prog.Ops {
		if op.Kind != "graph_attention" || !strings.HasPrefix(op.Name, "decoder.") {
			continue
		}
		kernels++
		if len(op.Saved) != 10 {
			t.Errorf("%s saves %d tensors, want 10 (q, k, v, e, out_saved, lse, edge index, colptr, rowptr, edge_id_per_src)", op.Name, len(op.Saved))
		}
		if out := prog.Values[op.Out[len(op.Out)-1]]; out.Bytes != 1_024 || out.Dtype != prog.Values[op.In[0]].Dtype {
			t.Errorf("%s: out %d B of %s, want 1,024 B in the query's dtype", op.Name, out.Bytes, out.Dtype)
		}
		if op.WorkB != 256 {
			t.Errorf("%s: backward workspace %d B, want D's 256", op.Name, op.WorkB)
		}
	}
	if kernels != 4 {
		t.Errorf("%d decoder kernels, want 4", kernels)
	}
}

// The backend follows the release: Triton from anemoi-models 0.11.0 (its
// default since PR #631), PyG before; asking for Triton on an older
// release, or for an unknown backend, is an error.
func TestGraphAttentionBackend(t *testing.T) {
	for _, c := range []struct {
		version string
		want    string
	}{{"0.8.1", graph.BackendPyG}, {"0.10.0", graph.BackendPyG}, {"0.11.0", graph.BackendTriton}, {"0.18.0", graph.BackendTriton}} {
		v, err := graph.ParseVersion(c.version)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.DefaultBackend(); got != c.want {
			t.Errorf("anemoi-models %s: default backend %q, want %q", c.version, got, c.want)
		}
	}
	p := tinyGraphPlan(t, 1, "stacked", "fp32")
	epd := *p.Model.Layers[0].(*graph.EncoderProcessorDecoder)
	dec := *epd.Decoder
	dec.Backend = graph.BackendTriton
	epd.Decoder = &dec
	if _, err := graph.NewEncoderProcessorDecoder(epd); err == nil || !strings.Contains(err.Error(), "needs anemoi-models 0.11.0") {
		t.Errorf("triton on 0.8.1: %v, want an error naming 0.11.0", err)
	}
	dec.Backend = "cuda"
	if err := dec.Validate("decoder"); err == nil || !strings.Contains(err.Error(), "unknown attention_backend") {
		t.Errorf("backend cuda: %v, want unknown attention_backend", err)
	}
}

// On a real grid the fused kernel keeps no per-edge tensor, so the same
// model needs less memory with it than with PyG's message passing: in a
// forward in 4 chunks, and in a training step in one. (Trained in 4
// chunks, this small model peaks where the chunks' gradients of the
// shared mapper weights are summed, out of place, in the backward, where
// neither backend holds a per-edge tensor: the peaks are within 512 B.)
func TestTritonSavesMemory(t *testing.T) {
	for _, c := range []struct {
		chunks int64
		phase  core.Phase
	}{{4, core.Eval}, {1, core.Train}} {
		pyg := evalPlan(t, chunkedPlanWith(t, c.chunks, c.chunks, c.phase, graph.BackendPyG))
		tri := evalPlan(t, chunkedPlanWith(t, c.chunks, c.chunks, c.phase, graph.BackendTriton))
		if tri.PeakAllocated >= pyg.PeakAllocated {
			t.Errorf("%v in %d chunks: peak with triton %d B, with pyg %d B: want less with triton", c.phase, c.chunks, tri.PeakAllocated, pyg.PeakAllocated)
		}
	}
}
