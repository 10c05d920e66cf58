package sim

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// fsdp1Prefetch is one line of testdata/fsdp1_prefetch.jsonl
// (tools/oracle/fsdp1_prefetch.py).
type fsdp1Prefetch struct {
	BackwardPrefetch string `json:"backward_prefetch"`
	Checkpoint       string
	ShardingStrategy string `json:"sharding_strategy"`
	ForwardPrefetch  bool   `json:"forward_prefetch"`
	DP, Batch, Seq   int64
	Model            struct {
		Dim, Layers, Heads int64
		KVHeads            int64 `json:"kv_heads"`
		FFN, Vocab         int64
	}
	Events []string
	Torch  string
}

// fsdp1Events is the steady step's FSDP1 unit events of memsh's trace in
// the oracle's words: "<phase> gather|reshard|reduce <unit>", a unit's
// unsharded FlatParameter allocated (gather) and freed (reshard), its
// reduce-scatter's output allocated (reduce).
func fsdp1Events(tr *replay.Trace) []string {
	var out []string
	for _, e := range tr.Events[tr.Steady:] {
		unit, _, _ := strings.Cut(e.Tensor, " ")
		var what string
		switch {
		case strings.HasSuffix(e.Tensor, " unsharded flat parameter") && e.Action == "alloc":
			what = "gather"
		case strings.HasSuffix(e.Tensor, " unsharded flat parameter") && e.Action == "free_requested":
			what = "reshard"
		case strings.HasSuffix(e.Tensor, " reduce-scatter output") && e.Action == "alloc":
			what = "reduce"
		default:
			continue
		}
		ph := e.Phase
		if ph == replay.PhaseRecompute {
			ph = replay.PhaseBackward
		}
		out = append(out, ph.String()+" "+what+" "+unit)
	}
	return out
}

// TestFSDP1BackwardPrefetchAsTorch holds memsh's FSDP1 to the order in
// which torch 2.15's FullyShardedDataParallel unshards, reshards and
// reduce-scatters its units through a steady step, under each
// backward_prefetch (tools/oracle/fsdp1_prefetch.py: a tiny torchtitan
// Llama, 3 layers, each block a unit, on a fake process group of 4
// ranks; without and with full checkpointing, and under SHARD_GRAD_OP,
// parallel(reshard_after_forward=False), whose units stay gathered from
// the forward to their backward in every mode; and forward_prefetch=True,
// parallel(fsdp_forward_prefetch=True), with and without checkpointing:
// each unit gathers the next in its pre-forward, and in the backward a
// unit reshards and reduce-scatters only after the next unit's backward):
//   - "pre" (BACKWARD_PRE): layers.1 is gathered before layers.2's
//     backward runs, so two layers are unsharded at once (with the root);
//   - "post" (BACKWARD_POST): layers.2 reshards, layers.1 is gathered,
//     then layers.2's gradient is reduce-scattered;
//   - "none": each layer is gathered by its own pre-backward hook.
//
// The Hugging Face Trainer passes "none" unless its fsdp_config says
// otherwise (importers/hf.go); memsh had replayed BACKWARD_PRE for every
// FSDP1 plan, one layer's unsharded parameters too many through the
// backward: on this model the peak allocated under "pre" is one layer's
// unsharded FlatParameter (1,180,672 B) above "none"'s (16,808,448 and
// 15,627,776 B; "post" 16,608,256 B).
func TestFSDP1BackwardPrefetchAsTorch(t *testing.T) {
	cases := readJSONL[fsdp1Prefetch](t, "fsdp1_prefetch.jsonl")
	if len(cases) != 15 {
		t.Fatalf("%d cases in testdata/fsdp1_prefetch.jsonl, want 3 modes x (2 checkpointings + SHARD_GRAD_OP + forward_prefetch with 2 checkpointings)", len(cases))
	}
	peaks, unit := map[string]int64{}, int64(0)
	for _, c := range cases {
		live := fsdpLive{DP: c.DP, TP: 1, ReshardAfterForward: c.ShardingStrategy != "shard_grad_op", Checkpoint: c.Checkpoint, Mixed: true, Batch: c.Batch, Seq: c.Seq}
		live.Model = c.Model
		p := fsdpLivePlan(t, &live)
		p.Parallel.FSDPVersion, p.Parallel.BackwardPrefetch, p.Parallel.ForwardPrefetch = 1, c.BackwardPrefetch, c.ForwardPrefetch
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatalf("%s, checkpoint %s: %v", c.BackwardPrefetch, c.Checkpoint, err)
		}
		if diff := cmp.Diff(c.Events, fsdp1Events(r.Trace)); diff != "" {
			t.Errorf("backward_prefetch %s, checkpoint %s, %s, forward_prefetch %v: FSDP1's unit events differ from torch %s (-torch +memsh):\n%s",
				c.BackwardPrefetch, c.Checkpoint, c.ShardingStrategy, c.ForwardPrefetch, c.Torch, diff)
		}
		if c.Checkpoint == "none" && c.ShardingStrategy == "full_shard" && !c.ForwardPrefetch {
			peaks[c.BackwardPrefetch] = r.PeakAllocated
			for _, e := range r.Trace.Events {
				if e.Tensor == "layers.1 unsharded flat parameter" {
					unit = e.Size
				}
			}
		}
	}
	t.Logf("peaks allocated: pre %d B, post %d B, none %d B; a layer's unsharded FlatParameter %d B", peaks["pre"], peaks["post"], peaks["none"], unit)
	if unit == 0 || peaks["pre"]-peaks["none"] != unit {
		t.Errorf("BACKWARD_PRE's peak %d B, none's %d B: want one layer's unsharded FlatParameter (%d B) apart", peaks["pre"], peaks["none"], unit)
	}
}
