package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestRepeatPastOOMFigures replays the FuzzSizes repeat_65536 seeds'
// step at 4,096 blocks (a stack of 65,461 x 65,461 linears, bf16-mixed
// AdamW on 8 GPUs; past the limit from the fourth block on): as DDP with
// cudaMalloc'd segments, and as FSDP2 offloading its parameters with
// expandable segments. The figures are the replay's before the free index
// kept blocks by size class and the allocator stopped listing a new
// segment's block (44eb544): the work those changes saved must not move
// a byte of the report (peaks, the OOM and its request, the free blocks
// at the peak, the request that grew the reserve last). The DDP figures
// moved once since, on purpose: the foreach optimizer's temporaries are a
// tensor per parameter (core.Optimizer.StepTemporary), so the largest
// allocation is a DDP bucket, not one 63.85 TiB block of temporaries, the
// last growth is the last weight's temporary, and the reserved peak is
// 6.35 GB higher (per-tensor blocks cannot all reuse the cache); and once
// more with NCCL's init memory (replay/nccl.go ncclInitMem: nccl_dp 196
// MiB more, and the device figures with it); and once more when the
// H100 took the H200's measured context on the current stack (hw/
// catalog.go gh100Context: cuda_context 524,288,000 -> 804,061,184 B, the
// device figures 279,773,184 B more, the OOM's free 12.04 -> 11.78 GiB
// and in use 67.16 -> 67.42 GiB; allocated and reserved unmoved); and
// FSDP2's once more when it kept each reduce-scatter input until the next
// unit's post_backward and copied a backward prefetch out only at the
// prefetched unit's pre-backward (torch 2.15's FSDP2, measured on the CPU
// by tools/oracle/fsdp_live.py: sim/fsdp_live_test.go): allocated
// 42,930,974,720 -> 51,503,748,096 B (the kept 17.1 GB input of the last
// block while the one before ran its backward), reserved 74,031,562,752 ->
// 65,475,182,592 B (the all-gather stream's pool 20.4 -> 11.8 GB), the
// peak one layer later.
func TestRepeatPastOOMFigures(t *testing.T) {
	l, _ := fuzzLayer('E', 65461, 4096, 1099511627776, 2, 1)
	m := &core.Model{Name: "fuzz", Layers: []core.Layer{l}, Loss: "mse"}
	p := fuzzPlan(m, 1, 16, 0x21)
	cases := []struct {
		name string
		want string
	}{
		{"ddp", "peak allocated 421246722371072 reserved 421284840210432 device 421288668364800 at {optimizer optimizer.step}; largest ddp bucket 0 17140570084; oom ddp bucket 4 17140570084: CUDA out of memory. Tried to allocate 15.96 GiB. GPU 0 has a total capacity of 79.20 GiB of which 11.78 GiB is free. Including non-PyTorch memory, this process has 67.42 GiB memory in use. Of the allocated memory 63.85 GiB is allocated by PyTorch, and 5.91 MiB is reserved by PyTorch but unallocated.; free at peak [{Blocks:0 Bytes:0 Largest:0} {Blocks:24577 Bytes:38117839360 Largest:16781824}]; growth layers.4095.linear.weight step temporary 17140570084 {Request:17140570112 Cache:{Blocks:24576 Bytes:38116289024 Largest:16781824} Other:{Blocks:0 Bytes:0 Largest:0}} reserved 421284840210432; params 70207775178752; grads 70207775178752; optimizer 140415550357504; activations 4189696; temporaries 70207842287616; comm 70207775178752; fragmentation 38117839360; cuda_context 804061184; nccl_dp 3024093184"},
		{"fsdp2 offload expandable", "peak allocated 51503748096 reserved 65475182592 device 66887417856 at {backward layers.4094.linear}; largest layers.4095 reduce-scatter input 17141355616; free at peak [{Blocks:1 Bytes:2096640 Largest:2096640} {Blocks:2 Bytes:16603648 Largest:14508544}]; growth layers.4095 reduce-scatter output 2142669452 {Request:2142669824 Cache:{Blocks:0 Bytes:0 Largest:0} Other:{Blocks:0 Bytes:0 Largest:0}} reserved 65475182592; params 0; grads 8570285056; optimizer 0; activations 8579451392; temporaries 71299072; comm 34282712576; fragmentation 18700288; all_gather_stream 11792667648; reduce_scatter_stream 2160066560; cuda_context 804061184; nccl_dp 608174080"},
	}
	for i, c := range cases {
		if i == 1 {
			p.ExpandableSegments, p.Parallel.FSDP, p.Offload = true, true, &core.Offload{Params: "cpu"}
		}
		rep, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := pastOOMFigures(rep); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// pastOOMFigures are a report's memory figures on one line.
func pastOOMFigures(r *replay.Report) string {
	s := fmt.Sprintf("peak allocated %d reserved %d device %d at %v; largest %s %d", r.PeakAllocated, r.PeakReserved, r.DeviceUsed, r.PeakAt, r.Largest.Tensor, r.Largest.Bytes)
	if r.OOM != nil {
		s += fmt.Sprintf("; oom %s %d: %s", r.OOM.Alloc.Tensor, r.OOM.Alloc.Bytes, r.OOM.Message)
	}
	s += fmt.Sprintf("; free at peak %+v", r.Frag.AtPeak)
	if g := r.Frag.PeakGrowth; g != nil {
		s += fmt.Sprintf("; growth %s %d %+v reserved %d", g.Alloc.Tensor, g.Alloc.Bytes, g.Growth, g.Reserved)
	}
	for _, b := range r.Breakdown {
		s += fmt.Sprintf("; %s %d", b.Name, b.Bytes)
	}
	return s
}
