package sim

import (
	"fmt"
	"math"
	"regexp"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestOOMMeasuredH200 replays two real out-of-memory errors, measured on
// one H200 (sim/testdata/cuda_h200/oom.jsonl, tools/oracle/cuda_oom.py,
// tools/oracle/cuda_run19.sh; torch 2.11, transformers 5.17): transformers
// models built from the configs in testdata/cuda_h200/configs, trained with
// AdamW (foreach, the CUDA default) until step 1 fails. Each figure of the
// message is compared.
//
//   - Llama-3.2-1B, bf16 weights, 64 x 2048: the forward fails in
//     LlamaRMSNorm (modeling_llama.py line 65, hidden_states.pow(2): the
//     fp32 square, [64, 2048, 2048], 1 GiB). The traceback does not name
//     the layer; at 137.00 GiB allocated it is layer 10's input_layernorm
//     (a layer adds 13.27 GiB). memsh lands on the same op with the same
//     allocated bytes once the model holds inputs_embeds through its layer
//     loop (core.Model.HoldsEmbedding: without it, 0.50 GiB less and the
//     failure moved to rope_q). Not reproduced: what the failed forward had
//     cached but not allocated, 1.81 GiB measured after the allocator
//     released its free segments and retried (num_alloc_retries 1), memsh
//     1.10 GiB (how the measured forward's blocks split is not isolated);
//     and the memory outside the allocator, 0.67 GiB from the message
//     (139.48 in use - 137.00 - 1.81) where memsh's H200 context is the
//     0.75 GiB measured after a whole step: with lazy module loading a
//     forward that fails has not yet loaded the backward's and the
//     optimizer's kernels.
//   - Llama-3-8B, fp32 weights and autocast, 1 x 1024: weights, gradients
//     and the moments AdamW makes on step 1 (128.5 GB) fit; the foreach
//     step's torch._foreach_sqrt(exp_avg_sqs) (adam.py line 791) does not,
//     at a 224 MiB tensor (a [14336, 4096] MLP weight's), 134.24 GiB
//     allocated. memsh: the same request at the same allocated bytes;
//     reserved-but-unallocated 4.60 GiB against 4.78 GiB, the context
//     0.75 GiB both.
func TestOOMMeasuredH200(t *testing.T) {
	dev, rt := mustDevice(t, "H200"), mustRuntime(t, "cuda")
	for _, tc := range []struct {
		name, config, precision string
		batch, seq              int64
		phase                   replay.Phase
		op                      string
		message                 string // measured: str(torch.OutOfMemoryError) up to its first hint
		// in use: what the message's "this process has" may differ by
		// (the causes above)
		inUseTol float64 // GiB
	}{
		{"llama-3.2-1b 64x2048", "llama-3.2-1b", "bf16", 64, 2048, replay.PhaseForward, "model.layers.10.input_layernorm.pow",
			"CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 317.12 MiB is free. Including non-PyTorch memory, this process has 139.48 GiB memory in use. Of the allocated memory 137.00 GiB is allocated by PyTorch, and 1.81 GiB is reserved by PyTorch but unallocated.",
			0.7},
		{"llama-3-8b fp32 autocast 1x1024", "llama-3-8b", "bf16-mixed", 1, 1024, replay.PhaseOptimizer, "optimizer.step",
			"CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 27.12 MiB is free. Including non-PyTorch memory, this process has 139.77 GiB memory in use. Of the allocated memory 134.24 GiB is allocated by PyTorch, and 4.78 GiB is reserved by PyTorch but unallocated.",
			0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &core.Plan{Model: hfH200Model(t, tc.config, ""), Batch: tc.batch, Seq: tc.seq, GradAccum: 1, Members: 1, Precision: mustPrecision(t, tc.precision),
				Optimizer: core.Optimizer{Kind: core.AdamW}, Device: dev, Phase: core.Train, Runtime: rt, FirstStep: true}
			o := evalPlan(t, p).OOM
			if o == nil {
				t.Fatal("the step fits; measured: " + tc.message)
			}
			t.Logf("memsh: %s at %s\n%s", o.Alloc.Phase, o.Alloc.Op, o.Message)
			if o.Alloc.Phase != tc.phase || o.Alloc.Op != tc.op {
				t.Errorf("fails in %s at %s, measured in %s at %s", o.Alloc.Phase, o.Alloc.Op, tc.phase, tc.op)
			}
			got, want := oomFigures(t, o.Message), oomFigures(t, tc.message)
			for _, f := range []struct {
				what string
				tol  float64 // GiB; 0: the printed figure itself
			}{{"tried", 0}, {"capacity", 0}, {"allocated", 0}, {"in use", tc.inUseTol}, {"free", tc.inUseTol},
				{"unallocated", tc.inUseTol + 0.05}} {
				d := got[f.what] - want[f.what]
				t.Logf("%-10s memsh %8.2f GiB, measured %8.2f GiB (%+.2f)", f.what, got[f.what], want[f.what], d)
				if math.Abs(d) > f.tol+0.005 {
					t.Errorf("%s: memsh %.2f GiB, measured %.2f GiB", f.what, got[f.what], want[f.what])
				}
			}
		})
	}
}

// oomFigures reads the figures of PyTorch's out-of-memory message, in GiB.
func oomFigures(t *testing.T, msg string) map[string]float64 {
	t.Helper()
	re := regexp.MustCompile(`Tried to allocate (\S+ \S+)\. GPU 0 has a total capacity of (\S+ \S+) of which (\S+ \S+) is free\. ` +
		`Including non-PyTorch memory, this process has (\S+ \S+) memory in use\. Of the allocated memory (\S+ \S+) is allocated by PyTorch, ` +
		`and (\S+ \S+) is reserved by PyTorch but unallocated\.`)
	m := re.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("not PyTorch's message: %s", msg)
	}
	out := map[string]float64{}
	for i, k := range []string{"tried", "capacity", "free", "in use", "allocated", "unallocated"} {
		out[k] = gibOf(t, m[i+1])
	}
	return out
}

// gibOf reads one of the message's sizes ("1.81 GiB", "317.12 MiB") in GiB.
func gibOf(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	var unit string
	if _, err := fmt.Sscanf(s, "%f %s", &v, &unit); err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	scale := map[string]float64{"GiB": 1, "MiB": 1.0 / 1024, "KiB": 1.0 / (1 << 20), "bytes": 1.0 / (1 << 30)}[unit]
	if scale == 0 {
		t.Fatalf("size %q: unit %q", s, unit)
	}
	return v * scale
}
