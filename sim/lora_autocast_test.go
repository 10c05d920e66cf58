package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestLoRAAutocastInputCast counts by hand what PEFT's LoRA on tinyLM's up
// (256 -> 512, rank 4, batch 1 x 64) casts and saves under bf16-mixed (fp32
// parameters, bf16 matmuls). Autocast caches only the casts of leaf
// tensors that require grad (cached_cast in aten/src/ATen/autocast_mode.h),
// so the layer's fp32 input, an activation, is cast to bf16 twice: by the
// base linear (a copy its frozen weight's matmul does not save) and by
// lora_A, which saves its own copy (64 x 256 x 2 = 32,768 B). With
// lora_dropout > 0 the dropout runs on the fp32 input (it is on no autocast
// list: an fp32 output, 65,536 B, and a bool mask) and lora_A casts and
// saves dropout's output. Measured on the CPU with torch 2.15, peft 0.21.2
// (tools/oracle/peft_autocast_saved.py): one bf16 [16, 256] input copy
// saved by lora_A, a bf16 copy of the dropout output with dropout 0.1;
// with a trainable base weight, two bf16 copies of the input in two storages.
func TestLoRAAutocastInputCast(t *testing.T) {
	const xBF16 = 64 * 256 * 2
	for _, tc := range []struct {
		name    string
		dropout float64
		loraIn  string // the kind of op whose output lora_A's cast reads
	}{
		{"lora_dropout 0: lora_A casts the layer input again", 0, "embedding"},
		{"lora_dropout 0.1: lora_A casts the fp32 dropout output", 0.1, "dropout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tinyPlan(t, tinyLM())
			prec, err := core.LookupPrecision("bf16-mixed")
			if err != nil {
				t.Fatal(err)
			}
			p.Precision = prec
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Dropout: tc.dropout, Targets: []string{"up"}}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			producer := func(v core.Value) *core.OpInfo {
				if i := prog.Values[v].Producer; i >= 0 {
					return &prog.Ops[i]
				}
				return nil
			}
			var base, loraA *core.OpInfo
			for i := range prog.Ops {
				op := &prog.Ops[i]
				switch {
				case op.Kind == "matmul" && op.Module == "up":
					base = op
				case op.Kind == "matmul" && op.Module == "up.lora.lora_A":
					loraA = op
				case op.Kind == "dropout" && prog.Values[op.In[0]].Dtype != units.FP32:
					t.Errorf("dropout reads %s, want the fp32 layer input", prog.Values[op.In[0]].Dtype.Name())
				}
			}
			if base == nil || loraA == nil {
				t.Fatalf("no up or lora_A matmul (base %v, lora_A %v)", base != nil, loraA != nil)
			}
			if len(loraA.Saved) != 1 {
				t.Fatalf("lora_A saves %d tensors, want 1 (its input copy; the input needs no grad)", len(loraA.Saved))
			}
			s := loraA.Saved[0]
			if s == base.In[0] {
				t.Errorf("lora_A saves the base linear's autocast copy %s, want its own", prog.Values[s].Name)
			}
			v := prog.Values[s]
			if v.Dtype != units.BF16 || v.Bytes != xBF16 {
				t.Errorf("lora_A saves %s %d B, want bf16 %d B", v.Dtype.Name(), v.Bytes, xBF16)
			}
			c := producer(s)
			if c == nil || c.Kind != "cast" || c.Module != "up.lora.lora_A" {
				t.Fatalf("lora_A's saved input is not its own cast")
			}
			if in := producer(c.In[0]); in == nil || in.Kind != tc.loraIn {
				t.Errorf("lora_A's cast reads %s, want %s's output", prog.Values[c.In[0]].Name, tc.loraIn)
			}
			for i := range prog.Ops {
				for _, sv := range prog.Ops[i].Saved {
					if sv == base.In[0] {
						t.Errorf("%s saves the base linear's input copy; its weight is frozen", prog.Ops[i].Name)
					}
				}
			}
		})
	}
}
