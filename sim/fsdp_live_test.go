package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// fsdpLive is one line of testdata/fsdp_live.jsonl (tools/oracle/fsdp_live.py).
type fsdpLive struct {
	Name                string
	DP, TP              int64
	ReshardAfterForward bool `json:"reshard_after_forward"`
	Checkpoint          string
	Mixed               bool
	Batch, Seq          int64
	Model               struct {
		Dim, Layers, Heads int64
		KVHeads            int64 `json:"kv_heads"`
		FFN, Vocab         int64
	}
	Setup, Peak, End int64
	AtPeak           map[string]int64 `json:"at_peak"`
	PhasePeak        map[string]int64 `json:"phase_peak"`
	Torch            string
}

func readFSDPLive(t *testing.T) []fsdpLive { return readJSONL[fsdpLive](t, "fsdp_live.jsonl") }

func fsdpLivePlan(t *testing.T, c *fsdpLive) *core.Plan {
	t.Helper()
	m := testmodels.Llama(c.Model.Dim, c.Model.Layers, c.Model.Heads, c.Model.KVHeads, c.Model.FFN, c.Model.Vocab, "sdpa")
	prec, ckpt := "fp32", "none"
	if c.Mixed {
		prec = "bf16-mixed"
	}
	if c.Checkpoint == "full" {
		ckpt = "full"
	}
	p := testmodels.LlamaPlan(m, c.Batch, c.Seq, prec, ckpt, "H100-80GB")
	rt, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	p.Runtime = rt
	p.Parallel = core.Parallelism{DP: c.DP, TP: c.TP, FSDP: true, NoReshard: !c.ReshardAfterForward}
	if c.Mixed {
		p.Parallel.FSDPParamDType, p.Parallel.FSDPReduceDType = units.BF16, units.FP32
	}
	if c.TP > 1 {
		p.Parallel.SequenceParallel, p.Parallel.TPRuntime, p.Parallel.LossParallel = true, "torch", "torch"
	}
	return p
}

// liveKind sorts what is live at a peak into kinds both sides name:
// states (parameter shards, AdamW's moments, the batch, buffers), FSDP2's
// unsharded parameters (with the flat all-gather buffers they are copied
// out of), its reduce-scatter buffers (input in reduce_dtype and the new
// sharded gradients), and the rest: activations, gradients and
// temporaries of the step.
var liveKinds = []string{"states", "unsharded", "reduce-scatter", "activations"}

func torchKind(k string) string {
	switch {
	case k == "param" || k == "optimizer" || k == "optimizer step" || k == "batch" || k == "buffer":
		return "states"
	case strings.HasPrefix(k, "unsharded param") || k == "fsdp all-gather output":
		return "unsharded"
	case k == "fsdp reduce-scatter":
		return "reduce-scatter"
	}
	return "activations"
}

func memshKind(e replay.TraceEvent) string {
	switch {
	case e.Phase == replay.PhaseSetup || strings.HasSuffix(e.Tensor, " exp_avg") || strings.HasSuffix(e.Tensor, " exp_avg_sq"):
		return "states"
	case strings.HasSuffix(e.Tensor, "unsharded parameters") || strings.HasSuffix(e.Tensor, "all-gather output"):
		return "unsharded"
	case strings.HasSuffix(e.Tensor, "reduce-scatter input") || strings.HasSuffix(e.Tensor, "sharded grads"):
		return "reduce-scatter"
	}
	return "activations"
}

// steadyPeak is the most requested bytes live at once in the trace's
// steady step (requested, not rounded to the allocator's 512-byte
// blocks: the CPU allocates what is asked), and what is live then by kind.
func steadyPeak(tr *replay.Trace) (peak int64, at map[string]int64, phases map[string]int64) {
	phases = map[string]int64{}
	live := map[int64]replay.TraceEvent{}
	var now int64
	for i, e := range tr.Events {
		switch e.Action {
		case "alloc":
			live[e.Addr] = e
			now += e.Size
		case "free_requested", "free_completed":
			if l, ok := live[e.Addr]; ok {
				delete(live, e.Addr)
				now -= l.Size
			}
		default:
			continue
		}
		if i >= tr.Steady && e.Action == "alloc" {
			ph := e.Phase
			if ph == replay.PhaseRecompute {
				ph = replay.PhaseBackward
			}
			phases[ph.String()] = max(phases[ph.String()], now)
		}
		if i >= tr.Steady && now > peak {
			peak = now
			at = map[string]int64{}
			for _, l := range live {
				at[memshKind(l)] += l.Size
			}
		}
	}
	return peak, at, phases
}

// fsdpLiveOpen pins memsh's steady peak (requested bytes) for each case of
// testdata/fsdp_live.jsonl while it differs from torch's: an open
// difference, not a tolerance. A change of memsh's FSDP2 or TP replay that
// moves one fails here, and the table and TestFSDPLiveAgainstTorch's
// comment say then what moved and why.
var fsdpLiveOpen = map[string]int64{
	"fsdp4":           13451524,
	"fsdp4_noreshard": 13651720,
	"fsdp4_full":      12799236,
	"fsdp4_fp32":      18901252,
	"fsdp2_tp2":       9686148,
	"fsdp2_tp2_full":  9324676,
}

// TestFSDPLiveAgainstTorch holds memsh's replay of FSDP2 and FSDP2 x TP
// (DTensor with sequence parallelism and loss_parallel, torchtitan's
// parallelize_llama) against the live bytes torch 2.15 allocates for one
// rank through the same steady step on the CPU
// (tools/oracle/fsdp_live.py: a tiny torchtitan Llama, dim 256, 2 layers,
// 8 heads, 4 KV heads, FFN 512, vocabulary 1,024, batch 2 x 64, on a fake
// process group of 4 ranks; requested bytes on both sides, no 512-byte
// rounding).
//
// Exact, asserted: each rank's fp32 parameter shards and AdamW's moments
// (FSDP2's dim-0 shards, and under TP its 2-D DTensor shards); what else
// the states hold at the peak but two named terms memsh does not model,
// AdamW's step counters (a 4-byte tensor per parameter: host tensors on
// CUDA, where foreach AdamW without capturable keeps them on the CPU) and
// torchtitan's freqs_cis buffer (complex64 [seq, head_dim / 2], 8 KiB
// here); and the harness's own bookkeeping (every storage the step makes
// is freed by its end).
//
// What the test found and memsh now does (each was a difference of the
// peak): torch's loss_parallel lowered no labels (core/loss_parallel.go);
// FSDP2 keeps each unit's reduce-scatter input until the next unit's
// post_backward (or the backward's end), and copies a backward prefetch
// out only in the prefetched unit's own pre-backward, before a checkpoint
// inside it recomputes (replay/gather.go reduceScatter, prefetchBackward).
// The peaks were -3.9 % (fsdp4), -10.1 % (full checkpointing), +7.6 %
// (fp32), -4.8 % (TP) and -9.4 % (TP with full checkpointing) before.
//
// Open (December 2026), the peaks pinned in fsdpLiveOpen, with the
// unsharded parameters and the reduce-scatter buffers at the peak equal
// to torch's in every case that reshards (asserted):
//   - fsdp4 -0.5 %, fp32 -0.0 %, TP -0.1 %: the two named state terms
//     (8,276 B), and in activations memsh 66 KB under, 5 KB and 1 KB over;
//   - full checkpointing -2.5 % and -1.5 % (TP): torch's peak is inside the
//     first block's recomputed RMSNorm backward, nn.RMSNorm's composite on
//     the CPU (fp32 pow, mul and div temporaries; it keeps x * rsqrt in
//     fp32 for the weight's gradient where memsh lowers transformers'
//     order, cast to bf16 before the weight): 325 KB and 131 KB of
//     activations, not yet attributed op by op;
//   - reshard_after_forward=False +2.4 %: memsh's peak is the loss's
//     forward, where it still holds the last block's all-gather output
//     (1.18 MB): the root's post-forward frees it when the model's forward
//     returns, before torchtitan's loss, which runs outside the model;
//     memsh frees it after the loss, as transformers' models, whose
//     forward computes the loss, do;
//   - the forward (not the step's peak here): FSDP2 all-gathers each unit
//     in its own pre-forward unless set_modules_to_forward_prefetch asks
//     (torchtitan does not), and memsh now does the same; while it
//     gathered the next unit at the first op of the unit before, its
//     forward peaks with full checkpointing were +9.4 and +4.8 % of
//     torch's, and without that they are -2.5 and -1.0 %
//     (TestTorchtitan2D's comment says which rows moved).
//
// The CPU's kernels (SDPA's flash kernel for the CPU, RMSNorm's composite)
// are not CUDA's: a difference in what a kernel saves is the runtime's
// ("cpu" here), not FSDP's.
func TestFSDPLiveAgainstTorch(t *testing.T) {
	cases := readFSDPLive(t)
	if len(cases) != len(fsdpLiveOpen) {
		t.Errorf("%d cases in testdata/fsdp_live.jsonl, %d pinned", len(cases), len(fsdpLiveOpen))
	}
	for _, c := range cases {
		p := fsdpLivePlan(t, &c)
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if c.End != c.Setup {
			t.Errorf("%s: the harness ends the step with %d B live, began it with %d", c.Name, c.End, c.Setup)
		}
		if got := c.AtPeak["param"]; got != r.States.Params {
			t.Errorf("%s: parameter shards %d B, torch %d", c.Name, r.States.Params, got)
		}
		if got := c.AtPeak["optimizer"]; got != r.States.Optimizer {
			t.Errorf("%s: AdamW state %d B, torch %d", c.Name, r.States.Optimizer, got)
		}
		peak, at, phases := steadyPeak(r.Trace)
		torchAt := map[string]int64{}
		for k, b := range c.AtPeak {
			torchAt[torchKind(k)] += b
		}
		if named := torchAt["states"] - c.AtPeak["optimizer step"] - c.AtPeak["buffer"]; named != at["states"] {
			t.Errorf("%s: states and batch at the peak %d B, torch %d less its step counters and freqs_cis", c.Name, at["states"], named)
		}
		t.Logf("%s: peak memsh %d B, torch %d B (%+.1f %%)", c.Name, peak, c.Peak, 100*(float64(peak)/float64(c.Peak)-1))
		for _, ph := range []string{"forward", "backward", "optimizer"} {
			t.Logf("  %-9s peak memsh %9d  torch %9d", ph, phases[ph], c.PhasePeak[ph])
		}
		// The forward gathers each unit in its own pre-forward, as FSDP2
		// does: gathering the next one a unit early put these peaks 4.8
		// and 9.4 % over torch's with full checkpointing.
		if d := float64(phases["forward"])/float64(c.PhasePeak["forward"]) - 1; math.Abs(d) > 0.04 {
			t.Errorf("%s: forward peak %d B, torch %d B (%+.1f %%, goal 4 %%)", c.Name, phases["forward"], c.PhasePeak["forward"], 100*d)
		}
		for _, k := range liveKinds {
			t.Logf("  %-15s memsh %9d  torch %9d", k, at[k], torchAt[k])
		}
		// Where the units reshard after forward, FSDP2's own buffers at
		// the peak are torch's to the byte (noreshard's peak is in the
		// loss's forward, where memsh still holds the last all-gather
		// output: open, above).
		for _, k := range []string{"unsharded", "reduce-scatter"} {
			if c.ReshardAfterForward && at[k] != torchAt[k] {
				t.Errorf("%s: %s at the peak %d B, torch %d", c.Name, k, at[k], torchAt[k])
			}
		}
		if want, ok := fsdpLiveOpen[c.Name]; !ok || peak != want {
			t.Errorf("%s: memsh's peak is %d B, pinned %d (torch %d): say what moved", c.Name, peak, want, c.Peak)
		}
	}
}
