package timing

import "github.com/memsh/memsh/sim/core"

// The host's time per aten op.
//
// Kernel launches are not all a PyTorch step's host work: every aten op
// the Python code calls passes the dispatcher, those that launch no
// kernel (views, selects, .item(), a no-op .to()) too, and a backward
// node runs its own. Where memsh knows how many aten ops a group of ops
// dispatches (core.OpInfo.AtenF and AtenB: one pass of transformers 5's
// per-expert MoE loop, nn/moe_loop.go), the group's host time is those
// counts at atenHost each, in place of its kernels' launches
// (dispatch.go); the rest of the program keeps the per-kernel rule.
//
// atenHost, measured on one H200 (sim/testdata/cuda_h200/
// hf_profile.jsonl, steps under torch.profiler, torch 2.11, transformers
// 5.17; tools/oracle/cuda_hf.py --profile): the host cannot take longer
// than the step, and the small Mixtral's step (75.5 ms, 6,080 aten ops)
// bounds it at 12.42 µs, the tightest of the six GPU-bound runs (the
// LoRA step's 14.1 µs, the others 16-22 µs). The per-expert loop's step
// is host-bound: 0.724 s (the median of steps 2-4) less its 1,279
// syncs' latency (19.1 ms, host_sync.go) and its optimizer step (11.1
// ms) over its 54,308 aten ops is 12.78 µs. The two agree within 3 %;
// memsh takes the bound, 12.4 µs (TestAtenHostWithinProfiledSteps). It
// is an average over the step: its forward and backward differ
// (docs/time.md).
const atenHost = 12.4e-6

// hostOps replaces c's CPU dispatch by its group's aten ops where the
// program counts them (eager and fused dispatch: the compiled modes
// launch from Inductor's wrapper, dispatch.go).
func (pr *pricer) hostOps(op *core.OpInfo, c *OpCost) {
	if pr.dispatch != DispatchEager && pr.dispatch != DispatchFused {
		return
	}
	switch {
	case op.HostGrouped:
		c.FwdCPU, c.BwdCPU = 0, 0
	case op.AtenF > 0 || op.AtenB > 0:
		c.FwdCPU, c.BwdCPU = float64(op.AtenF)*atenHost, float64(op.AtenB)*atenHost
	}
}
