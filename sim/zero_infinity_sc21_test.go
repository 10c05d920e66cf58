package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// ZeRO-Infinity's SC21 talk (Rajbhandari et al.; the slides are in
// DeepSpeed's repository, docs/assets/files/SC21-ZeRO-Infinity.pdf at
// edaa722, "Democratizing Large Model Training") gives the largest model
// trained on one DGX-2 node (16 x V100-32GB, 1.5 TB of host memory:
// sim/hw/host.go's dgx2Host source): 70B with ZeRO-Infinity on the CPU,
// 1T on NVMe. Recorded here against memsh's model of DeepSpeed at
// edaa722, GPT-shaped Llama blocks (12 h^2 per layer), fp16 mixed
// precision, full checkpointing, one 1024-token sequence per GPU.
//
//   - CPU (params and optimizer on the host): 20 B per parameter on the
//     host (master and moments 12, fp32 gradients 4, fp16 gradient
//     partitions 2, fp16 parameters 2): a 70B model needs less than 1.5
//     TB per node, so it fits as the talk says; memsh's host limit is
//     1.5 TB / 20 B = 75B.
//   - NVMe: today's stage 3 keeps the whole fp16 gradient partition in
//     pinned host memory (grad_partitions_flat_buffer, stage3.py
//     737-746 at edaa722: on self.device, the CPU when offloading), 2 B
//     per parameter: 2 TB for 1T, more than the node's 1.5 TB, on top of
//     the swap buffers. The talk's 2021 DeepSpeed fit 1T; memsh, reading
//     DeepSpeed 0.19.6, says the node falls short, and this test records
//     that divergence with its cause rather than fitting it away.
func TestZeROInfinitySC21SingleNode(t *testing.T) {
	const nodeRAM = 1_500_000_000_000 // DGX-2: 1.5 TB DDR4
	gpt := func(hidden, layers int64) *core.Plan {
		m := testmodels.Llama(hidden, layers, hidden/128, hidden/128, hidden*8/3, 50304, "sdpa")
		p := testmodels.LlamaPlan(m, 1, 1024, "fp16-mixed", "full", "V100-32GB")
		p.Parallel = core.Parallelism{DP: 16, Zero: 3}
		p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 16}
		return p
	}
	cpu := gpt(8192, 87) // 12 x 87 x 8192^2 = 70.1B, and the embedding
	cpu.Offload = &core.Offload{Optimizer: "cpu", Params: "cpu"}
	r, err := Evaluate(cpu, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	params := float64(cpu.Model.Params())
	if node := 16 * r.HostMemory; node > nodeRAM {
		t.Errorf("CPU offload of %.1fB: a node needs %.2f TB of host memory, more than a DGX-2's 1.5 TB (the talk trains 70B)", params/1e9, float64(node)/1e12)
	} else {
		t.Logf("CPU offload of %.1fB: %.2f TB per node (%.1f B per parameter); the host limit is ~%.0fB",
			params/1e9, float64(node)/1e12, float64(node)/params, nodeRAM/(float64(node)/params)/1e9)
	}

	nvme := gpt(25600, 128) // 1.007T
	nvme.Offload = &core.Offload{Optimizer: "nvme", Params: "nvme"}
	r, err = Evaluate(nvme, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	params = float64(nvme.Model.Params())
	grads := hostShare(r, "fp16 gradient buffers (pinned)")
	if node := 16 * r.HostMemory; node <= nodeRAM || 16*grads < 2*int64(params) {
		t.Errorf("NVMe offload of %.2fT: a node needs %.2f TB (fp16 gradient buffers %.2f TB); want more than 1.5 TB, at least 2 B per parameter of gradients (DeepSpeed edaa722's grad_partitions_flat_buffer)",
			params/1e12, float64(node)/1e12, float64(16*grads)/1e12)
	} else {
		t.Logf("NVMe offload of %.2fT: a node needs %.2f TB of host memory (fp16 gradient buffers %.2f TB): %v", params/1e12, float64(node)/1e12, float64(16*grads)/1e12, r.HostBreakdown)
	}
}
