package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOAdaptersSharded: with reference "adapters" DPO's reference
// forward runs the policy's own modules with the LoRA adapters disabled
// (TRL's use_adapter(model, None), torchtune's disable_adapter), so under
// FSDP2 each block's pre-forward hook all-gathers its unit again and its
// post-forward reshards it (reshard_after_forward), and ZeRO-3 fetches
// and releases each module again; under no_grad there is no backward for
// that forward, so the backward gathers each unit once. dpoPlan's small
// Llama (2 layers, LoRA on q and v, no checkpointing): per block a
// gather in the policy's forward, one in the reference's, one in the
// backward; the step's all-gather bytes are the weights' three times
// (38,308,352 parameters in bf16 and the adapters' 26,624, gathered with
// their units; the collective counts, as for the other frozen gathers,
// ZeRO-3's small persistent parameters too), but for FSDP2's root unit
// (the embedding, the head and the final norm: 2 x 32,000 x 512 + 512),
// gathered once: it is not resharded after forward.
func TestDPOAdaptersSharded(t *testing.T) {
	const llama, adapters, root = 38_308_352, 26_624, 2*32_000*512 + 512
	for _, tc := range []struct {
		par    core.Parallelism
		tensor string // the gathered tensor of layers.0's down_proj
		once   int64  // parameters gathered once a micro-batch
	}{
		{core.Parallelism{DP: 4, FSDP: true}, "layers.%d unsharded parameters", root},
		{core.Parallelism{DP: 4, Zero: 3}, "layers.%d.mlp.down_proj gathered", 0},
	} {
		p := dpoPlan(core.RefAdapters, core.TRLLogits)
		p.Parallel = tc.par
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		for layer := range 2 {
			name := fmt.Sprintf(tc.tensor, layer)
			counts := map[replay.Phase]int{}
			for _, e := range r.Trace.SteadyEvents() {
				if e.Tensor == name && e.Action == "alloc" {
					counts[e.Phase]++
				}
			}
			if counts[replay.PhaseForward] != 2 || counts[replay.PhaseBackward] != 1 || len(counts) != 2 {
				t.Errorf("%s: %q gathered %v, want 2 in the forward (the policy's, the reference's) and 1 in the backward", tc.par, name, counts)
			}
		}
		if got, want := commBytes(r, "all_gather"), 2*(3*(llama+adapters-tc.once)+tc.once); got != want {
			t.Errorf("%s: all_gather %d bytes, want %d (the weights three times, the root unit once)", tc.par, got, want)
		}
	}
}
