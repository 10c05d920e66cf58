package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestContextParallel: with cp ranks each holds seq/cp tokens of every
// sequence through the whole layer, so what a block saves halves at cp=2;
// attention's keys and values travel around the ring: in forward each
// rank receives the other cp-1 chunks, in backward the chunks again with
// their gradients.
func TestContextParallel(t *testing.T) {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&nn.Norm{Dim: 512, RMS: true}, &nn.Attention{Dim: 512, Heads: 8, KVHeads: 2, Impl: "flash", Causal: true, Rope: true}}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{&nn.Norm{Dim: 512, RMS: true}, &nn.MLP{Dim: 512, Hidden: 1024, Act: "swiglu"}}}},
	}}
	m := &core.Model{Name: "m", Layers: []core.Layer{&core.Repeat{Layer: block, N: 2}}, Loss: "none", InputDim: 512}
	base := distPlan(t, m, "bf16", core.Parallelism{})
	base.Seq = 4096
	one := evalPlan(t, base)
	for _, cp := range []int64{2, 4} {
		p := distPlan(t, m, "bf16", core.Parallelism{CP: cp})
		p.Seq = 4096
		r := evalPlan(t, p)
		if r.SavedActivations*cp != one.SavedActivations {
			t.Errorf("cp=%d: saves %d, want 1/%d of %d", cp, r.SavedActivations, cp, one.SavedActivations)
		}
		// Local k and v: [1, 4096/cp, 2 kv heads x 64] bf16 each, per layer.
		kv := 2 * 2 * (4096 / cp) * 2 * 64
		want := []replay.Share{{Name: "send_recv", Bytes: 2 * (cp - 1) * kv * 3}} // 2 layers x (forward 1 + backward 2)
		if len(r.CommBytes) != 1 || r.CommBytes[0] != want[0] {
			t.Errorf("cp=%d: comm %v, want %v", cp, r.CommBytes, want)
		}
	}
}

// TestNCCLOverheads: one named overhead per communicator, outside the
// allocator, sized from NCCL's FIFO buffers (estimates, replay/comm.go).
func TestNCCLOverheads(t *testing.T) {
	moe := &nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"}
	m := &core.Model{Name: "m", Layers: []core.Layer{&core.Repeat{N: 4, Layer: moe}}, Loss: "mse", InputDim: 512}
	fifo := int64(4<<20 + 4_915_200 + 512<<10)
	for _, tc := range []struct {
		par  core.Parallelism
		want map[string]int64
	}{
		{core.Parallelism{DP: 8}, map[string]int64{"nccl_dp": 32 * fifo}},
		{core.Parallelism{DP: 16}, map[string]int64{"nccl_dp": 16 * 2 * fifo}}, // across nodes: ring and tree
		{core.Parallelism{DP: 8, EP: 8}, map[string]int64{"nccl_dp": 32 * fifo, "nccl_ep": 7 * 32 * (12 << 20)}},
		{core.Parallelism{PP: 4, TP: 2}, map[string]int64{"nccl_tp": 32 * fifo, "nccl_pp": 2 * 8 * (4 << 20)}},
	} {
		r := evalPlan(t, distPlan(t, m, "bf16", tc.par))
		got := map[string]int64{}
		var sum int64
		for _, o := range r.Overheads {
			sum += o.Bytes
			if o.Name != "cuda_context" {
				got[o.Name] = o.Bytes
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: overheads %v, want %v", tc.par, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %d, want %d", tc.par, k, got[k], v)
			}
		}
		if r.DeviceUsed < r.PeakReserved+sum {
			t.Errorf("%s: device used %d leaves out the NCCL buffers (reserved %d + %d)", tc.par, r.DeviceUsed, r.PeakReserved, sum)
		}
	}
}
