package sim

import (
	"maps"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
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
// allocator (replay/nccl.go), counted by hand. A connection's FIFOs are
// 12 MiB with the default NCCL_BUFFSIZE (the receiver's 4 KiB header,
// Simple 4 MiB, LL128 4.69 MiB and LL 0.5 MiB in 10 MiB, the sender's
// header in 2 MiB, CUDA_IPC_MIN); 32 channels on
// NVLink4 (H100), 16 across nodes or on A100. NVLS on 8 H100s: 24
// channels x 2 x (4 + 2) MiB x 8 ranks = 2,304 MiB.
func TestNCCLOverheads(t *testing.T) {
	const mib = 1 << 20
	moe := &nn.MoE{Dim: 512, Hidden: 1024, Experts: 64, TopK: 2, Act: "swiglu"}
	m := &core.Model{Name: "m", Layers: []core.Layer{&core.Repeat{N: 4, Layer: moe}}, Loss: "mse", InputDim: 512}
	ring8 := int64(32 * 12 * mib)
	// A send or receive pool for peers on other nodes (replay/nccl_p2p.go):
	// 16 p2p channels x NCCL_SHARED_STEPS 16 x NCCL_P2P_NET_CHUNKSIZE 128 KiB.
	netPool := int64(16 * 16 * 128 << 10)
	// Eager NCCL makes the send pool at every communicator's init, with the node's
	// NCCL_P2P_NVL_CHUNKSIZE (512 KiB): 32 channels x 16 x 512 KiB on H100, 16 x 16 x 512 KiB on A100.
	eagerPool, eagerPoolA100 := int64(32*16*512<<10), int64(16*16*512<<10)
	nvls8 := int64(24 * 2 * 6 * 8 * mib)
	// What every communicator holds from its init (replay/nccl.go
	// ncclInitMem): 3 allocations per channel and 2 more, 2 MiB each with
	// cuMem: 32 channels on H100 in a node, 16 across nodes or on A100, 4
	// over PCIe.
	init32, init16, init4 := int64((3*32+2)*2*mib), int64((3*16+2)*2*mib), int64((3*4+2)*2*mib)
	// A communicator of one rank (replay/nccl.go ncclOneRank): nothing
	// connected, the init's structures on NCCL's 32 channels for a lone
	// GPU, and under eager NCCL the send pool at the PCI chunk (no GPU
	// pair, so not all NVLink): 32 x 16 x 128 KiB = 64 MiB.
	oneRank, oneRankEager := init32, init32+int64(32*16*128<<10)
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		rt   core.RuntimeMemory
		gpu  string
		want map[string]int64
	}{
		// DDP all-reduces its buckets: a ring, and NVLS on Hopper.
		{"ddp", core.Parallelism{DP: 8}, core.RuntimeMemory{}, "", map[string]int64{"nccl_dp": ring8 + nvls8 + init32}},
		// Across two nodes: rings and trees on 16 channels, no NVLS.
		{"ddp 2 nodes", core.Parallelism{DP: 16}, core.RuntimeMemory{}, "", map[string]int64{"nccl_dp": 16*3*12*mib + init16}},
		// FSDP all-gathers and reduce-scatters: a ring alone when connected lazily ...
		{"fsdp", core.Parallelism{DP: 8, FSDP: true}, core.RuntimeMemory{}, "", map[string]int64{"nccl_dp": ring8 + init32}},
		// ... rings, trees and NVLS when connected eagerly (NCCL < 2.22).
		{"fsdp eager", core.Parallelism{DP: 8, FSDP: true}, core.RuntimeMemory{NCCLConnect: "eager"}, "", map[string]int64{"nccl_dp": 3*ring8 + nvls8 + eagerPool + init32}},
		{"ddp nvls off", core.Parallelism{DP: 8}, core.RuntimeMemory{NCCLNVLS: "off"}, "", map[string]int64{"nccl_dp": ring8 + init32}},
		// NCCL_BUFFSIZE=8 MiB: 8 + 4.69 + 0.5 MiB + 4 KiB in 14 MiB, + 2 MiB.
		// NCCL_BUFFSIZE=1 MiB: 1 + 4.69 + 0.5 MiB + 4 KiB = 6.19 MiB in 8 MiB, + 2 MiB.
		{"buffsize 1 MiB", core.Parallelism{DP: 8, FSDP: true}, core.RuntimeMemory{NCCLBuffSize: 1 * mib}, "", map[string]int64{"nccl_dp": 32*10*mib + init32}},
		{"buffsize 8 MiB", core.Parallelism{DP: 8, FSDP: true}, core.RuntimeMemory{NCCLBuffSize: 8 * mib}, "", map[string]int64{"nccl_dp": 32*16*mib + init32}},
		// Expert parallelism all-to-alls inside a node: every peer on every channel
		// (p2pnChannelsPerPeer is the 32 channels on NVLink4; NVIDIA/nccl#1685).
		{"ep", core.Parallelism{DP: 8, EP: 8}, core.RuntimeMemory{}, "", map[string]int64{"nccl_dp": ring8 + nvls8 + init32, "nccl_ep": 7*32*12*mib + init32}},
		// ep 16 over two nodes: 16 p2p channels, NCCL_NCHANNELS_PER_NET_PEER's 2 (2 x 16 ranks
		// is not above 4 x 16) for every peer, the 7 in the node too (P2P transport, full
		// FIFOs); the 8 on the other node share a send and a receive pool. dp 16: rings and trees.
		{"ep 2 nodes", core.Parallelism{DP: 16, EP: 16}, core.RuntimeMemory{}, "",
			map[string]int64{"nccl_dp": 16*3*12*mib + init16, "nccl_ep": 7*2*12*mib + 2*netPool + init16}},
		// ep 64 over eight nodes (DeepSeek-V3's degree): 2 x 64 ranks > 4 x 16 halves the
		// network's channels to one per peer: 7 x 1 x 12 MiB + the two pools, not 63 x 16 x 12 MiB.
		{"ep 8 nodes", core.Parallelism{DP: 64, EP: 64}, core.RuntimeMemory{}, "",
			map[string]int64{"nccl_dp": 16*3*12*mib + init16, "nccl_ep": 7*1*12*mib + 2*netPool + init16}},
		// NCCL_BUFFSIZE=512 KiB caps the p2p chunk at 512 KiB / NCCL_STEPS = 64 KiB (pools of
		// 16 MiB) and the connection at 0.5 + 4.69 + 0.5 MiB + 4 KiB in 6 MiB + 2 MiB.
		{"ep 8 nodes buffsize 512 KiB", core.Parallelism{DP: 64, EP: 64}, core.RuntimeMemory{NCCLBuffSize: 512 << 10}, "",
			map[string]int64{"nccl_dp": 16*3*8*mib + init16, "nccl_ep": 7*1*8*mib + 2*16*mib + init16}},
		// Over PCIe (L40S: 4 channels) a peer in the node gets 2 p2p channels (NVIDIA/nccl#1706:
		// "4 p2p channels, 2 p2p channels per peer").
		{"ep pcie", core.Parallelism{DP: 4, EP: 4}, core.RuntimeMemory{}, "L40S", map[string]int64{"nccl_dp": 4*12*mib + init4, "nccl_ep": 3*2*12*mib + init4}},
		// Two tensor-parallel ranks all-reduce (no NVLS with two); the pipeline sends to and
		// receives from its two neighbours in the node over P2P: 2 x 32 channels x 12 MiB.
		{"tp pp", core.Parallelism{PP: 4, TP: 2}, core.RuntimeMemory{}, "", map[string]int64{"nccl_tp": ring8 + init32, "nccl_pp": 2*32*12*mib + init32}},
		// Stages a node apart (tp 8): both neighbours on other nodes, the two shared pools only.
		{"pp 2 nodes", core.Parallelism{PP: 2, TP: 8, SequenceParallel: true}, core.RuntimeMemory{}, "",
			map[string]int64{"nccl_tp": ring8 + init32, "nccl_pp": 2*netPool + init16}},
		// NVIDIA/nccl#964: 4 x A100, eager NCCL, an all-reduce per group: measured 688 MB (more than
		// two ranks) and 544 MB (two); rings and trees on 16 channels and the p2p send pool give
		// 704 MiB = 738 MB (+7 % and +36 %; NCCL of mid-2023 predates cuMem's 2 MiB rounding, which
		// also makes the init's 50 small allocations 100 MiB: 843 MB with them, +23 and +55 %).
		{"nccl#964", core.Parallelism{DP: 4}, core.RuntimeMemory{NCCLConnect: "eager"}, "A100-80GB", map[string]int64{"nccl_dp": 16*3*12*mib + eagerPoolA100 + init16}},
		// Eager NCCL connects the ring and the tree on a pipeline's communicator too,
		// beside its peer's p2p buffers: 1 peer x 32 x 12 MiB + 32 x 3 x 12 MiB + the send pool.
		{"pp eager", core.Parallelism{PP: 2}, core.RuntimeMemory{NCCLConnect: "eager"}, "", map[string]int64{"nccl_pp": ring8 + 3*ring8 + eagerPool + init32}},
		// Megatron's distributed optimizer with ep 4 on 8 H100s (replay/nccl_megatron.go): dp's ring
		// (reduce-scatter and all-gather: no NVLS), ep's 3 peers, and Megatron's own groups: world
		// (the gradient norm), edp (8 / 4 = 2 ranks: the experts' gradients), tp_ep (the dispatcher's
		// token counts, 4 ranks); expert tp and tp x cp are 1: no etp, no tp_cp. Groups of one
		// rank that still run collectives: tp (get_batch's broadcast, the vocab-parallel loss)
		// and pp (the MoE aux-loss tracker's all-reduce).
		{"megatron ep", core.Parallelism{DP: 8, EP: 4, ETP: 1, DistributedOptimizer: true}, core.RuntimeMemory{}, "",
			map[string]int64{"nccl_dp": ring8 + init32, "nccl_ep": 3*ring8 + init32, "nccl_world": ring8 + init32, "nccl_edp": ring8 + init32, "nccl_tp_ep": ring8 + init32,
				"nccl_tp": oneRank, "nccl_pp": oneRank}},
		// ms-swift's tp 2 ep 4 row on A100s with NCCL 2.21 (eager: ring and tree, 16 x 3 x 12 MiB =
		// 576 MiB, and the 128 MiB send pool on every communicator): tp, dp, ep (+ 3 peers x 16 x 12 MiB), world, mp (tp 2 x
		// pp 1: train_step's all-reduces), tp_ep (8 ranks), etp (2: expert tp = tp), tp_cp (2: the
		// aux loss); edp is 8 / (4 x 2) = 1 rank and pp 1, each a communicator of one rank
		// (DDP's expert buffers, the aux-loss tracker), eager: 196 + 64 MiB.
		{"megatron tp ep eager", core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, EP: 4, ETP: 2, DistributedOptimizer: true},
			core.RuntimeMemory{NCCLConnect: "eager"}, "A100-80GB",
			map[string]int64{"nccl_tp": 704*mib + init16, "nccl_dp": 704*mib + init16, "nccl_ep": (3*16*12+704)*mib + init16, "nccl_world": 704*mib + init16, "nccl_mp": 704*mib + init16,
				"nccl_tp_ep": 704*mib + init16, "nccl_etp": 704*mib + init16, "nccl_tp_cp": 704*mib + init16,
				"nccl_edp": oneRankEager, "nccl_pp": oneRankEager}},
		// The loss's DATA_PARALLEL_GROUP (loss_dp_group: Megatron-Core before 0.13) beside the
		// gradients' group: dp 2 x cp 2 x tp 2 on 8 A100s, eager; dp_loss is the 2 dp ranks (cp
		// ring attention's p2p: 1 peer x 16 x 12 MiB + 704 MiB); mp the tp pair.
		{"megatron loss dp group", core.Parallelism{DP: 2, CP: 2, TP: 2, DistributedOptimizer: true, LossDPGroup: true},
			core.RuntimeMemory{NCCLConnect: "eager"}, "A100-80GB",
			map[string]int64{"nccl_tp": 704*mib + init16, "nccl_cp": (16*12+704)*mib + init16, "nccl_dp": 704*mib + init16, "nccl_world": 704*mib + init16, "nccl_mp": 704*mib + init16, "nccl_dp_loss": 704*mib + init16}},
	} {
		p := distPlan(t, m, "bf16", tc.par)
		p.RuntimeMemory = tc.rt
		if tc.gpu != "" {
			dev, err := hw.LookupDevice(tc.gpu)
			if err != nil {
				t.Fatal(err)
			}
			p.Device = dev
		}
		r := evalPlan(t, p)
		got := map[string]int64{}
		var sum int64
		for _, o := range r.Overheads {
			sum += o.Bytes
			if o.Name != "cuda_context" {
				got[o.Name] = o.Bytes
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: overheads %v, want %v", tc.name, got, tc.want)
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %s = %d MiB, want %d MiB", tc.name, k, got[k]/mib, v/mib)
			}
		}
		if r.DeviceUsed < r.PeakReserved+sum {
			t.Errorf("%s: device used %d leaves out the NCCL buffers (reserved %d + %d)", tc.name, r.DeviceUsed, r.PeakReserved, sum)
		}
	}
}

// Megatron's train_step all-reduces over the model-parallel group every
// step (update_successful and the gradient norm; without the distributed
// optimizer the norm itself too, replay/nccl_megatron.go): tp 2 x pp 2 = 4
// ranks in an H100 node, one more ring of 32 channels x 12 MiB = 384 MiB
// beside tp's ring and pp's send/recv buffers (1 peer x 32 channels x
// 12 MiB), each communicator with its init's 196 MiB (replay/nccl.go
// ncclInitMem: 32 channels). Every Megatron-LM run uses the default group (pretrain's
// start-time all-reduce, the timers' all-gather): world, 4 ranks, with or
// without the distributed optimizer, whose gradient norm goes over it
// before Megatron-Core 0.14; from 0.14 (grad_norm_group=True) over a
// world-sized group of its own, dist_opt, another 384 MiB ring.
func TestMegatronModelParallelComm(t *testing.T) {
	const mib = 1 << 20
	const c = (384 + 196) * mib // a ring of 32 channels and the init
	m := &core.Model{Name: "m", Layers: []core.Layer{&core.Repeat{N: 4, Layer: &nn.MLP{Dim: 512, Hidden: 1024, Act: "swiglu"}}}, Loss: "mse", InputDim: 512}
	for _, tc := range []struct {
		distopt, gradNorm bool
		want              map[string]int64
	}{
		{false, false, map[string]int64{"nccl_tp": c, "nccl_pp": c, "nccl_world": c, "nccl_mp": c}},
		{true, false, map[string]int64{"nccl_tp": c, "nccl_pp": c, "nccl_world": c, "nccl_mp": c}},
		{true, true, map[string]int64{"nccl_tp": c, "nccl_pp": c, "nccl_world": c, "nccl_mp": c, "nccl_dist_opt": c}},
	} {
		p := distPlan(t, m, "megatron", core.Parallelism{TP: 2, PP: 2, DistributedOptimizer: tc.distopt, GradNormGroup: tc.gradNorm})
		got := map[string]int64{}
		for _, o := range evalPlan(t, p).Overheads {
			if o.Name != "cuda_context" {
				got[o.Name] = o.Bytes
			}
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("distributed optimizer %v, grad_norm_group %v: overheads %v, want %v", tc.distopt, tc.gradNorm, got, tc.want)
		}
	}
}
