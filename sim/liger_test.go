package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestLigerChunkRows: the kernel's chunk size, inc_factor = ceil(V/H),
// chunk_size = next_power_of_2(ceil(BT/inc_factor)); the first row is
// the example in the kernel's own comment (BT = 4096*4, V = 32000,
// H = 4096: inc_factor 8, chunk_size 2048).
func TestLigerChunkRows(t *testing.T) {
	for _, tc := range []struct{ bt, h, v, want int64 }{
		{16384, 4096, 32000, 2048},
		{4096, 4096, 128256, 128}, // inc 32 (31.3 up), 128
		{32768, 4096, 128256, 1024},
		{2048, 512, 32000, 64}, // inc 63, ceil(2048/63) = 33 -> 64
		{1, 4096, 128256, 1},
	} {
		if got := core.LigerChunkRows(tc.bt, tc.h, tc.v); got != tc.want {
			t.Errorf("BT %d, H %d, V %d: chunk %d, want %d", tc.bt, tc.h, tc.v, got, tc.want)
		}
	}
}

// opEventCase is what one op allocates and frees in one phase of the
// steady step (opEvents).
type opEventCase struct {
	op    string
	phase replay.Phase
	want  []int64
}

// checkOpEvents checks each case against the trace.
func checkOpEvents(t *testing.T, tr *replay.Trace, cases []opEventCase) {
	t.Helper()
	for _, tc := range cases {
		if got := opEvents(tr, tc.op, tc.phase); !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.op, tc.phase, got, tc.want)
		}
	}
}

// opEvents lists what op does in phase: "+" size for an allocation, "-"
// size for a free.
func opEvents(tr *replay.Trace, op string, phase replay.Phase) []int64 {
	var out []int64
	for _, e := range tr.SteadyEvents() {
		if e.Op != op || e.Phase != phase {
			continue
		}
		switch e.Action {
		case "alloc":
			out = append(out, e.Size)
		case "free_completed":
			out = append(out, -e.Size)
		}
	}
	return out
}

// TestLigerFusedLinearCE counts Liger's fused linear cross-entropy by
// hand (sim/core/liger.go) on a small Llama: 2 x 1,024 tokens (BT =
// 2,048), hidden 512, a 32,000-word vocabulary, so chunks of 64 tokens
// (TestLigerChunkRows), 32 of them:
//
//   - a logits chunk is 64 x 32,000: L = 4,096,000 bytes in bf16;
//   - grad_input is BT x H in the input's dtype: 2,097,152 bytes in bf16,
//     4,194,304 in fp32 (bf16-mixed: the final norm's output is fp32);
//   - grad_weight is V x H in the weight's dtype: 32,768,000 bytes in
//     bf16, 65,536,000 in fp32;
//   - the setup also makes loss_1d (BT fp32, 8,192), the target mask (BT
//     bool, 2,048), the padded labels (2 x 1,025 int64, 16,400) and the
//     shifted ones (2,048 int64, 16,384);
//   - chunk 1's logits are made before chunk 0's are dropped (with
//     0.4.0's scaled copy, chunk 0's gradient copy too); under autocast
//     the matmul first casts the fp32 input chunk to bf16 (64 x 512,
//     65,536 bytes), dropped after it;
//   - grad_logits @ weight is 64 x 512 (65,536 bytes in bf16), copied and
//     dropped;
//   - the weight's gradient: from 0.6.2 a bf16 weight's V x H product and
//     its fp32 copy (32,768,000 and 65,536,000) per chunk; 0.8.1's fp32
//     accumulator with bf16 logits takes addmm(out_dtype=fp32), which
//     casts the fp32 input chunk to bf16 first (65,536); 0.6.2 to 0.8.0
//     run mm on the autocast bf16 operands and copy the product to fp32;
//     0.5.3 and 0.4.0 add with addmm in place;
//   - the backward frees the saved gradients and makes the input's and
//     lm_head's gradients of the same sizes in their place.
func TestLigerFusedLinearCE(t *testing.T) {
	const l16 = 4_096_000
	setup16 := []int64{2_097_152, 32_768_000, 8192, 2048, 16_400, 16_384}
	setup32 := []int64{4_194_304, 65_536_000, 8192, 2048, 16_400, 16_384}
	for _, tc := range []struct {
		version, precision string
		setup, logits1     []int64
		gradWeight         []int64 // chunk 0's allocations and frees
		backward           []int64
	}{
		{"liger", "bf16", setup16, []int64{l16, -l16}, []int64{32_768_000, 65_536_000, -32_768_000, -65_536_000}, []int64{-2_097_152, -32_768_000, 2_097_152, 32_768_000, -4}},
		{"liger", "bf16-mixed", setup32, []int64{65_536, l16, -l16, -65_536}, []int64{65_536, -65_536}, []int64{-4_194_304, -65_536_000, 4_194_304, 65_536_000, -4}},
		{"liger-0.6.2", "bf16-mixed", setup32, []int64{65_536, l16, -l16, -65_536}, []int64{32_768_000, 65_536_000, -32_768_000, -65_536_000}, []int64{-4_194_304, -65_536_000, 4_194_304, 65_536_000, -4}},
		{"liger-0.5.3", "bf16", setup16, []int64{l16, -l16}, nil, []int64{-2_097_152, -32_768_000, 2_097_152, 32_768_000, -4}},
		{"liger-0.4.0", "bf16", setup16, []int64{l16, -l16, -l16}, nil, []int64{-2_097_152, -32_768_000, 2_097_152, 32_768_000, -4}},
	} {
		m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
		p := testmodels.LlamaPlan(m, 2, 1024, tc.precision, "none", "H100-80GB")
		p.FusedLoss = tc.version
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		name := tc.version + " " + tc.precision
		check := func(op string, phase replay.Phase, want []int64) {
			t.Helper()
			if got := opEvents(r.Trace, op, phase); !slices.Equal(got, want) {
				t.Errorf("%s: %s %v: %v, want %v", name, op, phase, got, want)
			}
		}
		check("loss.fused_linear_cross_entropy_setup", replay.PhaseForward, tc.setup)
		logits0 := []int64{l16}
		if tc.precision == "bf16-mixed" {
			logits0 = []int64{65_536, l16, -65_536}
		}
		check("loss.logits_0", replay.PhaseForward, logits0)
		check("loss.logits_1", replay.PhaseForward, tc.logits1)
		check("loss.grad_input_0", replay.PhaseForward, []int64{65_536, -65_536})
		check("loss.grad_weight_0", replay.PhaseForward, tc.gradWeight)
		check("loss.fused_linear_cross_entropy", replay.PhaseBackward, tc.backward)
		if n := len(opEvents(r.Trace, "loss.logits_31", replay.PhaseForward)); n == 0 {
			t.Errorf("%s: no 32nd chunk", name)
		}
		if n := len(opEvents(r.Trace, "loss.logits_32", replay.PhaseForward)); n != 0 {
			t.Errorf("%s: a 33rd chunk", name)
		}
	}
}

// TestLigerFrozenHead: with lm_head frozen (LoRA elsewhere) the kernel
// makes no grad_weight and adds none; the input's gradient stays.
func TestLigerFrozenHead(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
	p.FusedLoss = "liger"
	p.Freeze = []string{"lm_head"}
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := opEvents(r.Trace, "loss.fused_linear_cross_entropy_setup", replay.PhaseForward), []int64{2_097_152, 8192, 2048, 16_400, 16_384}; !slices.Equal(got, want) {
		t.Errorf("setup %v, want %v", got, want)
	}
	if got := opEvents(r.Trace, "loss.grad_weight_0", replay.PhaseForward); len(got) != 0 {
		t.Errorf("a frozen head's chunk adds a weight gradient: %v", got)
	}
	if got, want := opEvents(r.Trace, "loss.fused_linear_cross_entropy", replay.PhaseBackward), []int64{-2_097_152, 2_097_152, -4}; !slices.Equal(got, want) {
		t.Errorf("backward %v, want %v", got, want)
	}
}

// TestLigerSavesLogits: against the eager head and loss on the same
// plan, Liger keeps no logits: the eager forward holds at least the bf16
// logits and their fp32 log-probabilities (2,048 x 32,000 x 6 bytes) more
// at its peak than Liger's two chunks.
func TestLigerSavesLogits(t *testing.T) {
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	peak := func(fused string) int64 {
		p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
		p.FusedLoss = fused
		return evalPlan(t, p).PeakAllocated
	}
	eager, liger := peak(""), peak("liger-0.5.3")
	if eager-liger < 2048*32000*6-2*4_096_000 {
		t.Errorf("eager peak %d, Liger %d: Liger saves %d, want at least the logits' %d", eager, liger, eager-liger, 2048*32000*6-2*4_096_000)
	}
}
