package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// Saved-activation bytes measured by shared/oracle (PyTorch 1.13 on CPU,
// saved_tensors_hooks, storages deduplicated, class "activation" including
// the block input), step 2 of each case. Produced by:
//
//	/usr/bin/python3 shared/oracle/measure.py --suite korthikanti   (gpt2, drop=native)
//	/usr/bin/python3 shared/oracle/measure.py --suite llama
//	/usr/bin/python3 shared/oracle/measure.py --suite ckpt          (reentrant rows)
//	/usr/bin/python3 shared/oracle/measure.py --suite amp
//	/usr/bin/python3 shared/oracle/measure.py --suite stack
//
// (results in shared/oracle/results/*.jsonl, field steps[1].saved.activation.bytes).
type oracleCase struct {
	kind              string // gpt2 | llama
	s, b, h, a, kv, f int64
	layers            int64
	dtype             string // fp32 | bf16 | amp_bf16
	ckpt              string
	params            int64
	saved             int64
	paramCast         int64
}

var oracleCases = []oracleCase{
	{kind: "gpt2", s: 128, b: 4, h: 256, a: 4, dtype: "bf16", params: 789760, saved: 5771272},
	{kind: "gpt2", s: 128, b: 4, h: 256, a: 4, dtype: "fp32", params: 789760, saved: 11018248},
	{kind: "gpt2", s: 256, b: 2, h: 512, a: 8, dtype: "bf16", params: 3152384, saved: 14159880},
	{kind: "gpt2", s: 256, b: 2, h: 512, a: 8, dtype: "fp32", params: 3152384, saved: 26746888},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "bf16", params: 7087872, saved: 58204168},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "fp32", params: 7087872, saved: 108544008},
	{kind: "gpt2", s: 1024, b: 1, h: 1024, a: 16, dtype: "bf16", params: 12596224, saved: 119545864},
	{kind: "gpt2", s: 1024, b: 1, h: 1024, a: 16, dtype: "fp32", params: 12596224, saved: 220217352},
	{kind: "gpt2", s: 2048, b: 1, h: 1024, a: 16, dtype: "bf16", params: 12596224, saved: 406863880},
	{kind: "gpt2", s: 2048, b: 1, h: 1024, a: 16, dtype: "fp32", params: 12596224, saved: 742424584},
	{kind: "llama", s: 256, b: 2, h: 512, a: 8, kv: 8, f: 1376, dtype: "bf16", params: 3163136, saved: 20320264},
	{kind: "llama", s: 256, b: 2, h: 512, a: 8, kv: 8, f: 1376, dtype: "fp32", params: 3163136, saved: 28053512},
	{kind: "llama", s: 256, b: 2, h: 512, a: 8, kv: 2, f: 1376, dtype: "bf16", params: 2769920, saved: 20320264},
	{kind: "llama", s: 256, b: 2, h: 512, a: 8, kv: 2, f: 1376, dtype: "fp32", params: 2769920, saved: 28053512},
	{kind: "llama", s: 1024, b: 1, h: 1024, a: 16, kv: 16, f: 2816, dtype: "bf16", params: 12847104, saved: 157294600},
	{kind: "llama", s: 1024, b: 1, h: 1024, a: 16, kv: 16, f: 2816, dtype: "fp32", params: 12847104, saved: 163586056},
	{kind: "llama", s: 1024, b: 1, h: 1024, a: 16, kv: 4, f: 2816, dtype: "bf16", params: 11274240, saved: 157294600},
	{kind: "llama", s: 1024, b: 1, h: 1024, a: 16, kv: 4, f: 2816, dtype: "fp32", params: 11274240, saved: 163586056},
	// checkpointing (reentrant: the checkpoint saves its input, which the hooks see)
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "bf16", ckpt: "full", params: 7087872, saved: 1572864},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "bf16", ckpt: "selective", params: 7087872, saved: 26746880},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "fp32", ckpt: "full", params: 7087872, saved: 3145728},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "fp32", ckpt: "selective", params: 7087872, saved: 51920896},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "bf16", params: 6292992, saved: 79699976},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "bf16", ckpt: "full", params: 6292992, saved: 1572864},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "bf16", ckpt: "selective", params: 6292992, saved: 41951232},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "fp32", params: 6292992, saved: 96477192},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "fp32", ckpt: "selective", params: 6292992, saved: 71311360},
	// autocast (CPU): activations, and the bf16 weight copies saved for backward
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, dtype: "amp_bf16", params: 7087872, saved: 61358088, paramCast: 14155776},
	{kind: "llama", s: 512, b: 2, h: 768, a: 12, kv: 4, f: 2048, dtype: "amp_bf16", params: 6292992, saved: 87564296, paramCast: 12582912},
	// stacks of blocks
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, layers: 4, dtype: "bf16", params: 28351488, saved: 232816672},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, layers: 4, dtype: "bf16", ckpt: "full", params: 28351488, saved: 6291456},
	{kind: "gpt2", s: 512, b: 2, h: 768, a: 12, layers: 4, dtype: "bf16", ckpt: "selective", params: 28351488, saved: 106987520},
}

// oracleBlock builds the blocks of shared/oracle/measure.py.
func oracleBlock(c oracleCase) core.Layer {
	if c.kind == "gpt2" {
		return &core.Sequential{Layers: []core.Layer{
			&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
				&nn.Norm{Name: "ln_1", Dim: c.h, Bias: true},
				&nn.Attention{Dim: c.h, Heads: c.a, QKVBias: true, OutBias: true, Impl: "eager", Causal: true, Dropout: 0.1, FusedQKV: true},
			}}},
			&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
				&nn.Norm{Name: "ln_2", Dim: c.h, Bias: true},
				&nn.MLP{Dim: c.h, Hidden: 4 * c.h, Act: "gelu", Bias: true, Dropout: 0.1},
			}}},
		}}
	}
	return &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: c.h, RMS: true},
			&nn.Attention{Dim: c.h, Heads: c.a, KVHeads: c.kv, Impl: "eager", Causal: true, Rope: true, SoftmaxFP32: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: c.h, RMS: true},
			&nn.MLP{Dim: c.h, Hidden: c.f, Act: "swiglu"},
		}}},
	}}
}

func oraclePlan(t testing.TB, c oracleCase) *core.Plan {
	n := c.layers
	if n == 0 {
		n = 1
	}
	m := &core.Model{Name: c.kind, Layers: []core.Layer{&core.Repeat{Layer: oracleBlock(c), N: n}}, Loss: "none", InputGrad: true}
	prec := map[string]string{"fp32": "fp32", "bf16": "bf16", "amp_bf16": "bf16-mixed"}[c.dtype]
	p, err := core.LookupPrecision(prec)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := core.ParseCheckpoint(c.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cpu-1.13")
	return &core.Plan{
		Model: m, Batch: c.b, Seq: c.s, GradAccum: 1, Members: 1, Precision: p,
		Optimizer: core.Optimizer{Kind: core.AdamW, Impl: "for-loop"}, Checkpoint: ck, Runtime: rt,
		Device: hw.Device{Name: "cpu", Memory: 1 << 40},
	}
}

func TestOracleSavedActivations(t *testing.T) {
	for _, c := range oracleCases {
		plan := oraclePlan(t, c)
		rep, err := Evaluate(plan, core.Options{})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if got := plan.Model.Params(); got != c.params {
			t.Errorf("%s s=%d b=%d h=%d %s: params %d, oracle %d", c.kind, c.s, c.b, c.h, c.dtype, got, c.params)
		}
		if rep.SavedWeightCopies != c.paramCast {
			t.Errorf("%s %s: saved weight copies %d, oracle %d", c.kind, c.dtype, rep.SavedWeightCopies, c.paramCast)
		}
		got := rep.SavedActivations
		diff := float64(got-c.saved) / float64(c.saved)
		if got != c.saved {
			t.Errorf("%s s=%d b=%d h=%d a=%d kv=%d layers=%d %s ckpt=%q: saved %d, oracle %d (%+.2f%%)",
				c.kind, c.s, c.b, c.h, c.a, c.kv, c.layers, c.dtype, c.ckpt, got, c.saved, 100*diff)
		}
	}
}
