package replay

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// retriesPlan is a small language model's bf16-mixed step on one GPU of
// memory bytes.
func retriesPlan(t *testing.T, memory int64) (*core.Program, *core.Plan) {
	t.Helper()
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &nn.Attention{Name: "self_attn", Dim: 512, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true}},
		&core.Residual{Layer: &nn.MLP{Dim: 512, Hidden: 2048, Act: "swiglu"}},
	}}
	m := &core.Model{Name: "tiny", Vocab: 32000, Loss: "cross_entropy", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 512},
		&core.Repeat{Name: "layers", Layer: block, N: 4},
	}}
	prec, _ := core.LookupPrecision("bf16-mixed")
	dev, _ := hw.LookupDevice("H100-80GB")
	if memory > 0 {
		dev.Memory = memory
	}
	rt, _ := core.LookupRuntime("cuda")
	plan := &core.Plan{Model: m, Batch: 4, Seq: 1024, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Runtime: rt}
	prog, err := plan.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	return prog, plan
}

func runRetries(t *testing.T, memory int64, trace bool) *Report {
	t.Helper()
	prog, plan := retriesPlan(t, memory)
	r, err := Run(prog, plan, core.Options{Trace: trace})
	if err != nil {
		t.Fatal(err)
	}
	return r.Rep
}

// releases counts the requests of a trace that released cached segments
// first: each run of segment_free events (only the release before a
// retry frees a segment) ends at the request that retried.
func releases(tr *Trace) int {
	n, freeing := 0, false
	for _, e := range tr.Events {
		switch e.Action {
		case "segment_free":
			freeing = true
		case "alloc":
			if freeing {
				n++
			}
			freeing = false
		}
	}
	return n
}

// TestAllocRetriesInTheReplay: a step that never reaches the card's limit
// retries nothing, even on a card exactly its size; on a smaller card the
// step reaches it, releases cached segments and retries (the count is the
// trace's releases, each before the retried request); past the OOM the
// count stops.
func TestAllocRetriesInTheReplay(t *testing.T) {
	roomy := runRetries(t, 0, false)
	if roomy.AllocRetries != 0 || !roomy.Fits {
		t.Fatalf("on an H100: %d retries, fits %v; want 0 and a fit", roomy.AllocRetries, roomy.Fits)
	}
	// Exactly the device it uses: the limit is its peak reserved, which
	// no request passes.
	exact := runRetries(t, roomy.DeviceUsed, false)
	if exact.AllocRetries != 0 || !exact.Fits || exact.Headroom != 0 || exact.PeakReserved != roomy.PeakReserved {
		t.Fatalf("on a card of %d B (its device use): %d retries, fits %v, headroom %d, reserved %d; want 0, a fit, 0 and %d",
			roomy.DeviceUsed, exact.AllocRetries, exact.Fits, exact.Headroom, exact.PeakReserved, roomy.PeakReserved)
	}
	// Smaller cards, 2 MiB at a time: the first that makes the step
	// release its cache and still fits.
	var tight *Report
	var memory int64
	for memory = roomy.DeviceUsed - 2<<20; memory > roomy.DeviceUsed/2; memory -= 2 << 20 {
		if rep := runRetries(t, memory, true); rep.AllocRetries > 0 {
			tight = rep
			break
		}
	}
	if tight == nil {
		t.Fatal("no card smaller than the step's device use made it retry")
	}
	if !tight.Fits || tight.OOM != nil {
		t.Fatalf("the first card that makes the step retry (%d B) should still fit after releasing the cache", memory)
	}
	if n := releases(tight.Trace); n != tight.AllocRetries {
		t.Errorf("on %d B: %d retries, but the trace releases cached segments before %d requests", memory, tight.AllocRetries, n)
	}
	if quiet := runRetries(t, memory, false); quiet.AllocRetries != tight.AllocRetries {
		t.Errorf("on %d B: %d retries untraced, %d traced", memory, quiet.AllocRetries, tight.AllocRetries)
	}
	// A card far too small: the OOM's own retry counts, nothing after it.
	small := runRetries(t, roomy.DeviceUsed/2, true)
	if small.OOM == nil || small.AllocRetries < 1 {
		t.Fatalf("on %d B: OOM %v, %d retries; want an OOM and at least its own retry", roomy.DeviceUsed/2, small.OOM != nil, small.AllocRetries)
	}
	before := 0 // requests that released the cache before the OOM
	freeing := false
	for _, e := range small.Trace.Events {
		if e.Action == "oom" {
			break
		}
		switch e.Action {
		case "segment_free":
			freeing = true
		case "alloc":
			if freeing {
				before++
			}
			freeing = false
		}
	}
	t.Logf("roomy %d B; retries %d on %d B; %d on %d B (OOM, %d releases before it)", roomy.DeviceUsed, tight.AllocRetries, memory, small.AllocRetries, roomy.DeviceUsed/2, before)
	if small.AllocRetries != before+1 {
		t.Errorf("on %d B: %d retries, want the %d releases before the OOM and the OOM's own", roomy.DeviceUsed/2, small.AllocRetries, before)
	}
}
