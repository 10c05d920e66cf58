package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestCUDAGraphPool counts torch.compile(mode="reduce-overhead")'s private
// pool by hand on linearStack(2, 1024, 4096) in fp32 (no autocast casts)
// on one H100, seq 2560, each block compiled (compile="blocks"), the mse
// loss eager. A [2560, 1024] fp32 activation is 10 MiB and a [2560, 4096]
// one 40 MiB (each a segment of its own: >= 10 MiB requests are rounded
// to 2 MiB), a weight or its gradient 16 MiB, a cuBLAS workspace 32 MiB
// (Hopper).
//
// The pool (cudagraph_trees.py: every graph's allocations, forward and
// backward; a non-static input copied into a placeholder; a cuBLAS
// workspace while a graph runs, clear_cublas_manager):
//
//	forward   block 0: the batch's placeholder 10 and the workspace 32
//	          (segments, freed at the graph's end), h0 40, x1 10; block 1:
//	          the workspace in its freed block, h1 40, x2 10 (in the
//	          placeholder's freed block): segments of 10, 32, 40, 10, 40
//	backward  block 1 (mse's gradient of x2 came from eager code: its
//	          placeholder takes x2's freed block; the workspace its block):
//	          the gradient of h1 40 and of down.weight 16, new segments (no
//	          free block is large enough); h1 freed, up's gradients (x1 10,
//	          up.weight 16) come from its 40; block 0: the workspace, then
//	          the gradient of h0 in the freed gradient of h1, down.weight's
//	          16 a new segment (free: 14, 10, 10), up.weight's h0's freed 40
//
// so the pool's segments are 10 + 32 + 40 + 10 + 40 + 16 + 16 = 164 MiB
// (each compiled linear makes its weight's gradient first and frees its
// saved input before its input's gradient: core's weightGradFirst), and
// after the backward it holds the four weight gradients, 64 MiB.
// The compute stream: parameters 64, AdamW's moments 128, the eager
// cuBLAS workspaces of both threads 2 x 32, the batch 10, the loss's
// small segment 2, mse's gradient of x2 10 and the foreach step's
// temporaries 64: 342 MiB. The two pools never share a block, so the step
// reserves 342 + 164.
//
// Allocated: the eager compile's backward peaks at 388 MiB (at block 1's
// up: 266 of setup, the saved h0 and x1, h1's gradient and both block 1
// weights' gradients, 40 + 10 + 40 + 16 + 16), its step at 394
// MiB (the four foreach temporaries on the 330 MiB after the backward);
// with the graphs the backward holds the placeholder of x2's gradient and
// the workspace besides: 388 + 42 = 430 (and the loss's scalar, a 512-byte
// block, freed before the optimizer step).
func TestCUDAGraphPool(t *testing.T) {
	const mib = 1 << 20
	p := distPlan(t, linearStack(2, 1024, 4096), "fp32", core.Parallelism{})
	p.Seq = 2560
	p.Compile = core.Compile{Blocks: true}
	eager := evalPlan(t, p)
	if len(eager.Streams) != 1 {
		t.Errorf("compile_mode default: streams %v, want the compute stream alone", eager.Streams)
	}
	p.Compile.Mode = "reduce-overhead"
	rep := evalPlan(t, p)
	pool, compute := streamPeak(rep, "cuda_graph_pool"), streamPeak(rep, "compute")
	if pool != 164*mib || compute != 342*mib || rep.PeakReserved != 506*mib {
		t.Errorf("graph pool %d MiB, compute %d MiB, reserved %d MiB; want 164, 342 and 506", pool/mib, compute/mib, rep.PeakReserved/mib)
	}
	if eager.PeakAllocated != 394*mib || rep.PeakAllocated != 430*mib+512 { // and the loss's 512-byte block
		// the placeholder of x2's gradient and the graph's workspace are live at the graphs' peak
		t.Errorf("peak allocated %d MiB, eager compile %d MiB; want 430 (the eager compile's backward 388 plus the 10 MiB placeholder and the 32 MiB workspace) and 394", rep.PeakAllocated/mib, eager.PeakAllocated/mib)
	}
	if row := rep.Category("cuda_graph_pool"); row != 0 {
		// every block of the pool is in use at the peak: x2's gradient's
		// placeholder 10, the workspace 32, h0 40, x1 10, h1's gradient 40,
		// both weights' gradients 16 + 16
		t.Errorf("breakdown row cuda_graph_pool %d, want 0 (the pool holds no free block at the peak)", row)
	}

	// Limit the allocator to 490 MiB (a toy card of 990 MiB with a 500 MiB
	// context, given for every runtime as gpu(context=) gives it: the H100's
	// current-stack context is the H200's measured 766.8 MiB): the
	// step's foreach temporaries are one 16 MiB tensor per weight
	// (core.Optimizer.StepTemporary). With 442 MiB reserved, no free block
	// of 16 MiB cached (the compute stream's free segments, mse's gradient
	// and the loss's small segment, hold 12 MiB), each takes a new segment
	// (458, 474, 490 MiB); the fourth, layers.1.down.weight's, finds none
	// either, the free segments go back (478 MiB) and 12 MiB is free on the
	// card. The graph pool keeps its 164 MiB, 100 of them free blocks,
	// which PyTorch's message counts as allocated "in private pools":
	// 330 + 48 + 100 allocated, 478 - 378 - 100 unallocated.
	p.Device = p.Device.WithContext(500 * mib)
	p.Device.Memory = 990 * mib
	o := evalPlan(t, p).OOM
	want := "Tried to allocate 16.00 MiB. GPU 0 has a total capacity of 990.00 MiB of which 12.00 MiB is free. " +
		"Including non-PyTorch memory, this process has 978.00 MiB memory in use. Of the allocated memory 478.00 MiB is allocated by PyTorch, " +
		"with 100.00 MiB allocated in private pools (e.g., CUDA Graphs), and 0 bytes is reserved by PyTorch but unallocated."
	if o == nil || !strings.Contains(o.Message, want) {
		t.Errorf("OOM %+v, want %q", o, want)
	}
}

// TestCUDAGraphModes: the modes that replay CUDA graphs, and where memsh
// refuses them.
func TestCUDAGraphModes(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		blocks bool
		par    core.Parallelism
		accum  int64
		graphs bool
		err    string
	}{
		{"default", true, core.Parallelism{}, 1, false, ""},
		{"max-autotune-no-cudagraphs", true, core.Parallelism{}, 1, false, ""},
		{"max-autotune", true, core.Parallelism{}, 1, true, ""},
		{"reduce-overhead", true, core.Parallelism{}, 1, true, ""},
		{"reduce-overhead", false, core.Parallelism{}, 1, false, "compile=False compiles nothing"},
		{"reduce-overhead", true, core.Parallelism{DP: 8, FSDP: true}, 1, true, "not with a parallel= layout"},
		{"reduce-overhead", true, core.Parallelism{}, 4, true, "not with grad_accum > 1"},
		{"fast", true, core.Parallelism{}, 1, false, `unknown compile_mode "fast"`},
	} {
		p := distPlan(t, linearStack(2, 64, 256), "fp32", tc.par)
		p.Compile, p.GradAccum = core.Compile{Blocks: tc.blocks, Mode: tc.mode}, tc.accum
		err := p.Validate()
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s (compile %v, %+v, grad_accum %d): error %v, want %q", tc.mode, tc.blocks, tc.par, tc.accum, err, tc.err)
		}
		if got := p.Compile.CUDAGraphs(); got != tc.graphs {
			t.Errorf("%s (compile %v): CUDAGraphs() %v, want %v", tc.mode, tc.blocks, got, tc.graphs)
		}
	}
}
