package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestLoRAAdapterDType counts by hand what PEFT's adapter dtype
// (lora(autocast_adapter_dtype=)) changes on tinyLM in bf16, batch 1 x 64,
// rank 4 on up (256 -> 512): A 4 x 256 and B 512 x 4, 3,072 weights.
// PEFT's default keeps them in fp32 (tools/oracle/peft_adapter_dtype.py):
// 4 B each for the weights and their gradients, 2 x 4 B of AdamW state;
// lora_A saves an fp32 copy of its input (64 x 256 x 4 = 65,536 B) where
// bf16 adapters save the input itself (the embedding's output, 32,768 B,
// which nothing else saves: up's base weight is frozen and its input
// needs no gradient), and lora_B saves lora_A's output (64 x 4, 1,024 B in
// fp32, 512 in bf16): 33,280 B more saved. nn.Linear's LoRA adds the update
// to the base output in fp32 and casts the sum back; bitsandbytes' casts
// the update back and adds in bf16 (peft/tuners/lora/bnb.py).
func TestLoRAAdapterDType(t *testing.T) {
	const weights = 4*256 + 512*4
	for _, tc := range []struct {
		name      string
		baseDType bool
		quant     string
		adapterB  int64       // bytes per adapter weight (params, grads; AdamW 2x)
		saved     int64       // saved activations beyond the bf16 adapters'
		sum       units.DType // the dtype of the LoRA sum
	}{
		{"PEFT's default: fp32 adapters", false, "", 4, 33_280, units.FP32},
		{"autocast_adapter_dtype=False", true, "", 2, 0, units.BF16},
		{"nf4 base, fp32 adapters", false, "nf4", 4, 33_280, units.BF16},
		{"nf4 base, bf16 adapters", true, "nf4", 2, 0, units.BF16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := func(base bool) *core.Plan {
				p := tinyPlan(t, tinyLM())
				p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}, BaseDType: base}
				p.Quant = tc.quant
				return p
			}
			p, ref := plan(tc.baseDType), plan(true)
			r, bf := evalPlan(t, p), evalPlan(t, ref)
			if got, want := r.States.Params-bf.States.Params, (tc.adapterB-2)*weights; got != want {
				t.Errorf("params: %d B more than bf16 adapters, want %d", got, want)
			}
			if got, want := r.States.Grads, tc.adapterB*weights; got != want {
				t.Errorf("grads %d B, want %d", got, want)
			}
			if got, want := r.States.Optimizer, 2*tc.adapterB*weights; got != want {
				t.Errorf("AdamW state %d B, want %d", got, want)
			}
			if got := r.SavedActivations - bf.SavedActivations; got != tc.saved {
				t.Errorf("saved %d B more than bf16 adapters, want %d", got, tc.saved)
			}
			// DDP over 2 GPUs: the reducer's one bucket holds the adapters'
			// gradients, in their dtype (3,072 x 4 B fp32, under its 1 MiB
			// first-bucket cap)
			ddp := plan(tc.baseDType)
			ddp.Parallel = core.Parallelism{DP: 2}
			var comm int64
			for _, b := range evalPlan(t, ddp).Breakdown {
				if b.Name == "comm" {
					comm = b.Bytes
				}
			}
			if want := tc.adapterB * weights; comm != want {
				t.Errorf("DDP buckets %d B, want %d", comm, want)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var sums int
			for _, op := range prog.Ops {
				if strings.HasSuffix(op.Name, "lora.lora_sum") {
					sums++
					if dt := prog.Values[op.Out[0]].Dtype; dt != tc.sum {
						t.Errorf("%s in %s, want %s", op.Name, dt.Name(), tc.sum.Name())
					}
				}
			}
			if sums != 1 {
				t.Errorf("%d LoRA sums, want 1", sums)
			}
		})
	}
}
