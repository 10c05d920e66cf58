package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// quantStack is two blocks of an up (1024 -> 4096) and a down (4096 ->
// 1024) projection, bias-free: four weights of n = 4,194,304 elements,
// a multiple of torchao's 64 x 256 blocks.
func quantStack() *core.Model {
	block := &core.Sequential{Layers: []core.Layer{
		&nn.Linear{Name: "up", In: 1024, Out: 4096, Role: core.RoleUp},
		&nn.Linear{Name: "down", In: 4096, Out: 1024, Role: core.RoleDown},
	}}
	return &core.Model{Name: "stack", Layers: []core.Layer{&core.Repeat{Layer: block, N: 2}}, Loss: "mse", InputDim: 1024}
}

// qloraPlan is quantStack's base quantized, LoRA rank 8 on both
// projections, pure bf16, under par.
func qloraPlan(t *testing.T, quant string, storage units.DType, par core.Parallelism) *core.Plan {
	p := distPlan(t, quantStack(), "bf16", par)
	p.Quant, p.QuantStorage = quant, storage
	p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"up", "down"}}
	return p
}

// TestQLoRAShardedStates counts each rank's parameters by hand, for a
// weight of n = 4,194,304 elements on 4 ranks:
//
//   - torchao NF4 under FSDP2: the codes (n/2 bytes), the int8 scalers
//     (n/64) and the bf16 factors (n/64/256 of 2 bytes) split 4 ways, the
//     bf16 scaler mean and 16-value table (2 + 32 bytes) whole: 524,288 +
//     16,384 + 128 + 34 = 540,834 bytes;
//   - bitsandbytes nf4 with bf16 storage under FSDP1: the codes as n/4 =
//     1,048,576 bf16 elements in the block's flat parameter, split 4 ways
//     (2 x 1,048,576 x 2 / 4 = 1,048,576 bytes per block), and on every
//     rank the quant_state: fp32 absmax per 64 values (262,144 bytes) and
//     the fp32 code table (64);
//   - the same under ZeRO-3: each weight's codes partitioned on their own,
//     n/4/4 bf16 elements (524,288 bytes), plus the quant_state.
//
// The LoRA adapters (bf16, rank 8: 8 x 1024 + 4096 x 8 and 8 x 4096 +
// 1024 x 8 per block) are sharded too: FSDP2 and ZeRO-3 per tensor,
// FSDP1 one unit per adapter (peft's fsdp_auto_wrap_policy), all four
// ways without padding here; ZeRO-3 also keeps each adapter whole, every
// one being under stage3_param_persistence_threshold.
func TestQLoRAShardedStates(t *testing.T) {
	const n = 1024 * 4096
	lora := int64(2 * 2 * 2 * (8*1024 + 4096*8)) // bf16 bytes of both adapters of both blocks
	for _, tc := range []struct {
		name    string
		quant   string
		storage units.DType
		par     core.Parallelism
		params  int64
	}{
		{"torchao-nf4, fsdp2", "torchao-nf4", units.InvalidDType, core.Parallelism{DP: 4, FSDP: true},
			4*(n/2/4+n/64/4+2*(n/64/256)/4+2+32) + lora/4},
		{"nf4, fsdp1", "nf4", units.BF16, core.Parallelism{DP: 4, FSDP: true, FSDPVersion: 1},
			2*(2*(n/4)*2/4) + 4*(4*n/64+64) + lora/4},
		{"nf4, zero3", "nf4", units.BF16, core.Parallelism{DP: 4, Zero: 3},
			4*((n/4/4)*2+4*n/64+64) + lora/4 + lora},
	} {
		r := evalPlan(t, qloraPlan(t, tc.quant, tc.storage, tc.par))
		if r.States.Params != tc.params {
			t.Errorf("%s: params %d bytes per rank, want %d", tc.name, r.States.Params, tc.params)
		}
	}
}

// TestQLoRAShardingErrors: the quantized layouts that cannot be sharded.
func TestQLoRAShardingErrors(t *testing.T) {
	for _, tc := range []struct {
		quant   string
		storage units.DType
		par     core.Parallelism
		want    string
	}{
		{"nf4", units.InvalidDType, core.Parallelism{DP: 4, FSDP: true, FSDPVersion: 1}, "needs the 4-bit codes in a float storage"},
		{"nf4", units.FP16, core.Parallelism{DP: 4, FSDP: true, FSDPVersion: 1}, `quant_storage="fp16" differs from the parameters' bf16`},
		{"nf4", units.BF16, core.Parallelism{DP: 4, FSDP: true}, "under fully_shard (FSDP2) are not simulated"},
		{"int8", units.InvalidDType, core.Parallelism{DP: 4, Zero: 3}, `quant="int8" cannot be sharded`},
		{"torchao-nf4", units.InvalidDType, core.Parallelism{DP: 4, Zero: 3}, "torchao's NF4 weights shard with FSDP2"},
		{"torchao-nf4", units.BF16, core.Parallelism{DP: 4, FSDP: true}, "quant_storage= is bitsandbytes' bnb_4bit_quant_storage"},
		{"nf4", units.BF16, core.Parallelism{DP: 4, DistributedOptimizer: true}, "not simulated with Megatron's data parallelism"},
	} {
		p := qloraPlan(t, tc.quant, tc.storage, tc.par)
		if tc.quant == "int8" {
			p.Precision.Compute = units.FP16
		}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %s: error %v, want %q", tc.quant, tc.par, err, tc.want)
		}
	}
}
