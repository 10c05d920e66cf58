package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestZeroPrecision: DeepSpeed's ZeRO holds precision(master=) as its
// master partition, a copy even in the parameters' dtype (a small Llama,
// hidden 1,024, 4 layers, on 8 GPUs; its ZeRO-1 partition is ceil(n/8)
// elements), with moments on the GPU in the master's dtype; the dtypes
// DeepSpeed asserts against are refused with a hint.
func TestZeroPrecision(t *testing.T) {
	m := testmodels.Llama(1024, 4, 16, 8, 4096, 32000, "sdpa")
	part := (m.Params() + 7) / 8
	mixed, _ := core.LookupPrecision("bf16-mixed")
	with := func(master, states units.DType) core.Precision {
		p := mixed
		p.Master, p.States = master, states
		return p
	}
	for _, c := range []struct {
		name            string
		prec            core.Precision
		offload         bool
		master, moments int64  // bytes per GPU (fused AdamW: a 4-byte step count with the moments)
		refused         string // the refusal's text, "" when it replays
	}{
		{name: "bf16-mixed: fp32 master and moments", prec: mixed, master: 4 * part, moments: 8*part + 4},
		{name: "bf16 master and moments: bf16_master_weights_and_grads, bf16_optimizer_states", prec: with(units.BF16, units.BF16), master: 2 * part, moments: 4*part + 4},
		{name: "bf16 master, fp32 moments offloaded", prec: with(units.BF16, units.FP32), offload: true, master: 2 * part, moments: 8*part + 4},
		{name: "bf16 master, fp32 moments on the GPU", prec: with(units.BF16, units.FP32), refused: "needs ZeRO-Offload"},
		{name: "bf16 moments, fp32 master", prec: with(units.FP32, units.BF16), refused: "bf16_optimizer_states requires bf16_master_weights_and_grads"},
		{name: "fp16 master of a bf16 model", prec: with(units.FP16, units.FP16), refused: "this one holds bf16 parameters"},
		{name: "an int8 master", prec: with(units.INT8, units.FP32), refused: "fp32, bf16 or fp16"},
	} {
		p := testmodels.LlamaPlan(m, 1, 512, "bf16-mixed", "none", "H100-80GB")
		p.Precision = c.prec
		p.Optimizer.Impl = "fused"
		p.Parallel = core.Parallelism{DP: 8, Zero: 1}
		if c.offload {
			p.Offload = &core.Offload{Optimizer: "cpu"}
		}
		r, err := Evaluate(p, core.Options{})
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s: %v, want the refusal %q", c.name, err, c.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.States.Master != c.master || r.States.Optimizer != c.moments {
			t.Errorf("%s: master %d B, moments %d B, want %d and %d", c.name, r.States.Master, r.States.Optimizer, c.master, c.moments)
		}
	}
}

// TestZeroPrecisionNote: a pure named policy under ZeRO says which
// DeepSpeed runs sit beside it; a DeepSpeed policy, ZeRO-Offload (fp32
// master and moments on the host) and DDP say nothing.
func TestZeroPrecisionNote(t *testing.T) {
	m := testmodels.Llama(1024, 4, 16, 8, 4096, 32000, "sdpa")
	for _, c := range []struct {
		prec    string
		zero    int
		offload bool
		want    string
	}{
		{"bf16", 2, false, `precision("bf16-mixed", master="bf16", optimizer_states="bf16")`},
		{"fp32", 3, false, `precision("fp32", master="fp32") counts it`},
		{"fp16", 1, false, `its fp16 mode is precision="fp16-mixed"`},
		{"bf16", 2, true, ""},
		{"bf16-mixed", 3, false, ""},
		{"bf16", 0, false, ""},
	} {
		p := testmodels.LlamaPlan(m, 1, 512, c.prec, "none", "H100-80GB")
		p.Parallel = core.Parallelism{DP: 8, Zero: c.zero}
		if c.offload {
			p.Offload = &core.Offload{Optimizer: "cpu"}
		}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "zero= with precision=") {
				got = n
			}
		}
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s zero=%d offload=%v: note %q, want one with %q", c.prec, c.zero, c.offload, got, c.want)
		}
	}
}

// TestZeroOffloadCPUStepBF16: DeepSpeedCPUAdam steps the host partition
// in the master's dtype: with bf16_master_weights_and_grads and
// bf16_optimizer_states it streams 18 bytes an element (read the bf16
// parameter and gradient, write the parameter: 6; read and write two bf16
// moments: 8; the copy into the 16-bit staging partition: 2 + 2) where
// DeepSpeed's bf16 mode streams 34 (fp32: 12 + 16 + 4 + 2), over the same
// elements: the master's bytes count them in the master's dtype.
func TestZeroOffloadCPUStepBF16(t *testing.T) {
	m := testmodels.Llama(1024, 4, 16, 8, 4096, 32000, "sdpa")
	step := func(prec core.Precision) float64 {
		p := testmodels.LlamaPlan(m, 1, 512, "bf16-mixed", "none", "H100-80GB")
		p.Precision = prec
		p.Parallel = core.Parallelism{DP: 8, Zero: 2}
		p.Offload = &core.Offload{Optimizer: "cpu"}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return stepShare(r, "cpu_optimizer")
	}
	mixed, _ := core.LookupPrecision("bf16-mixed")
	low := mixed
	low.Master, low.States = units.BF16, units.BF16
	fp32, bf16 := step(mixed), step(low)
	if fp32 <= 0 || !within(bf16/fp32, 18.0/34, 1e-9) {
		t.Errorf("cpu_optimizer %g s with a bf16 master and moments, %g s in DeepSpeed's bf16 mode: ratio %g, want 18/34", bf16, fp32, bf16/fp32)
	}
}
