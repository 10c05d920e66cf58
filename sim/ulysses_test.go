package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// attnStack is n blocks of flash attention (dim 512, 8 heads, 4
// key-value heads of 64) over a [b, s, 512] input.
func attnStack(n int64) *core.Model {
	block := &core.Sequential{Layers: []core.Layer{&nn.Attention{Name: "attn", Dim: 512, Heads: 8, KVHeads: 4, Impl: "flash", Causal: true}}}
	return &core.Model{Name: "attn", Layers: []core.Layer{&core.Repeat{Layer: block, N: n}}, Loss: "mse", InputDim: 512}
}

// TestUlysses counts by hand what DeepSpeed Ulysses changes against ring
// attention at cp=2, for 4 blocks, batch 2, seq 1024 (512 tokens per
// rank), bf16:
//
//   - memory: the kernel keeps the exchanged q, k, v and its output, the
//     same bytes as ring attention keeps of the local ones, but the output
//     projection now keeps the output exchanged back, a tensor of its own:
//     2 x 512 x 512 x 2 bytes more per block (ring attention's kernel and
//     projection share one output);
//   - communication: per block all-to-alls of q (8 heads), k and v (4
//     heads each) and of the output (8 heads), 2 x 512 x 24 x 64 x 2
//     bytes, once forward and once backward; no send/recv.
func TestUlysses(t *testing.T) {
	m := attnStack(4)
	run := func(mode string) (int64, map[string]int64) {
		p := distPlan(t, m, "bf16", core.Parallelism{CP: 2, CPMode: mode})
		p.Batch, p.Seq = 2, 1024
		r := evalPlan(t, p)
		c := map[string]int64{}
		for _, s := range r.CommBytes {
			c[s.Name] = s.Bytes
		}
		return r.SavedActivations, c
	}
	ring, _ := run("ring")
	uly, comm := run("ulysses")
	out := int64(2 * 512 * 512 * 2)
	if uly-ring != 4*out {
		t.Errorf("Ulysses saves %d bytes, ring %d: %d more, want 4 blocks x %d", uly, ring, uly-ring, out)
	}
	if want := int64(4 * 2 * (2 * 512 * 24 * 64 * 2)); comm["all_to_all"] != want || comm["send_recv"] != 0 {
		t.Errorf("Ulysses collectives %v, want all_to_all %d and no send_recv", comm, want)
	}
}

// TestUlyssesErrors: Ulysses needs the heads of each tensor-parallel rank
// to divide by cp.
func TestUlyssesErrors(t *testing.T) {
	for _, tc := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{CP: 16, CPMode: "ulysses"}, "cp=16 does not divide the 8 attention heads of each tensor-parallel rank"},
		{core.Parallelism{CP: 8, CPMode: "ulysses"}, "cp=8 does not divide the 4 key-value heads of each tensor-parallel rank"},
		{core.Parallelism{TP: 2, CP: 4, CPMode: "ulysses"}, "cp=4 does not divide the 2 key-value heads"},
		{core.Parallelism{CP: 2, CPMode: "alltoall"}, `unknown cp_mode "alltoall" (known: ring, ulysses, allgather)`},
	} {
		p := distPlan(t, attnStack(2), "bf16", tc.par)
		p.Seq = 1024
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
	ok := distPlan(t, attnStack(2), "bf16", core.Parallelism{TP: 2, CP: 2, CPMode: "ulysses"})
	ok.Seq = 1024
	if err := ok.Validate(); err != nil {
		t.Errorf("tp=2 cp=2 Ulysses over 8 heads and 4 key-value heads: %v", err)
	}
}
