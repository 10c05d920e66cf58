package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// TestMambaSaves counts what Jamba's Mamba mixer keeps, by hand from
// JambaMambaMixer.cuda_kernels_forward and mamba_ssm's SelectiveScanFn
// (nn/mamba.go): dim 64, inner 128, state 8, dt rank 16, bf16, every
// weight trainable, one sample. Per token: in_proj's input 64*2 and
// output 256*2 (the conv keeps it through its view), u 128*2 (the scan;
// x_proj reads it transposed, a view with one sample), the three inner
// RMS norms (fp32 slices (16+8+8)*4, rstd 3*4, normalised (16+8+8)*2),
// dt_proj's input 16*2, the scan's copies of delta and z 2*128*2, of B
// and C 2*8*2, its output before the gate 128*2, the gated output 128*2
// (out_proj reads it transposed, a view too): 2,188 bytes. With two
// samples x_proj keeps a contiguous copy of u (+128*2) and out_proj one of
// the gated output (in its place): 2,444. The views and copies are
// F.linear's on a transposed 3-D input, measured in MambaMixer's
// slow_forward (tools/oracle/mamba1.py, TestMambaSlowSavesAsTransformers).
// Fixed: A (fp32 128*8), D and the dt bias in fp32 (2*128*4) and the
// chunk states, 128*2*8 fp32 per 2,048 tokens and sample.
func TestMambaSaves(t *testing.T) {
	m := &nn.Mamba{Dim: 64, Inner: 128, State: 8, DTRank: 16, ConvK: 4, ConvBias: true}
	for _, batch := range []int64{1, 2} {
		perToken := map[int64]int64{1: 2188, 2: 2444}[batch]
		for _, seq := range []int64{64, 2048, 4096} {
			chunks := (seq + 2047) / 2048
			want := batch*seq*perToken + 128*8*4 + 2*128*4 + batch*chunks*128*2*8*4
			p := layerPlan(t, m, 64, seq, "bf16")
			p.Batch = batch
			if r := evalPlan(t, p); r.SavedActivations != want {
				t.Errorf("batch %d, seq %d: saved %d bytes, want %d", batch, seq, r.SavedActivations, want)
			}
		}
	}
	// in_proj 64*256, conv1d 128*4 + 128, x_proj 128*32, dt_proj 16*128 +
	// 128, A_log 128*8, D 128, out_proj 128*64, norms 16+8+8
	if want := int64(64*256 + 128*4 + 128 + 128*32 + 16*128 + 128 + 128*8 + 128 + 128*64 + 32); m.Params() != want {
		t.Errorf("params %d, want %d", m.Params(), want)
	}
}

// TestJambaLayers: Jamba-1.5-Mini's 32 layers are 4 attention (i % 8 ==
// 4) and 28 Mamba mixers, 16 MoE (i % 2 == 1) and 16 MLP feed-forwards,
// and a LoRA step on one H100 replays.
func TestJambaLayers(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "ai21-jamba-1.5-mini.json"), "flash")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		switch l.Kind() {
		case "attention", "mamba", "moe", "mlp":
			count[l.Kind()]++
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	var rep *core.Repeat
	var find func(l core.Layer)
	find = func(l core.Layer) {
		if r, ok := l.(*core.Repeat); ok {
			rep = r
		}
		for _, c := range l.Children() {
			find(c)
		}
	}
	for _, l := range m.Layers {
		find(l)
	}
	if rep == nil || len(rep.Blocks) != 32 {
		t.Fatalf("want a stack of 32 differing blocks, got %v", rep)
	}
	for _, blk := range rep.Blocks {
		walk(blk)
	}
	for kind, want := range map[string]int{"attention": 4, "mamba": 28, "moe": 16, "mlp": 16} {
		if count[kind] != want {
			t.Errorf("%d %s layers, want %d", count[kind], kind, want)
		}
	}
	dev, _ := hw.LookupDevice("H100-80GB")
	prec, _ := core.LookupPrecision("bf16")
	rt, _ := core.LookupRuntime("cuda")
	ck, _ := core.ParseCheckpoint("full")
	p := &core.Plan{Model: m, Batch: 1, Seq: 4096, GradAccum: 1, Members: 1, Precision: prec, Runtime: rt,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train,
		LoRA: &core.LoRA{Rank: 16, Alpha: 16, Targets: []string{"all-linear"}}, Quant: "nf4"}
	r := evalPlan(t, p)
	if r.PeakAllocated <= 0 || r.Params != 51_570_323_328 {
		t.Errorf("peak %d bytes, %d params", r.PeakAllocated, r.Params)
	}
	t.Logf("Jamba-1.5-Mini QLoRA, 4K tokens: peak %.2f GiB", float64(r.PeakAllocated)/(1<<30))
}
