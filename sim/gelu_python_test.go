package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestPythonGELUSaves: transformers' GELUs written as Python arithmetic
// run several eager kernels and save several tensors of the input's size
// (nn/gelu_python.go). Measured on the CPU (torch 2.15, transformers
// 5.24: ACT2FN[name] on a 4 x 1000 fp32 input that requires grad,
// counting aten ops under a TorchDispatchMode and the storages
// saved_tensors_hooks sees):
//
//	gelu, gelu_pytorch_tanh  1 op  1 saved   (aten::gelu)
//	gelu_new, gelu_accurate  8 ops 4 saved   (mul pow mul add mul tanh add mul)
//	gelu_fast                9 ops 7 saved   (mul mul mul mul add mul tanh add mul)
//	gelu_python              5 ops 3 saved   (mul div erf add mul)
//	quick_gelu               3 ops 2 saved   (mul sigmoid mul)
func TestPythonGELUSaves(t *testing.T) {
	for _, tc := range []struct {
		fn         string
		ops, saved int
	}{
		{"gelu", 1, 1}, {"gelu_new", 8, 4}, {"gelu_fast", 9, 7}, {"gelu_python", 5, 3}, {"quick_gelu", 3, 2},
	} {
		m := &core.Model{Name: "act", Loss: "mse", Layers: []core.Layer{
			&nn.Linear{Name: "fc1", In: 16, Out: 64},
			&nn.Act{Name: "act", Fn: tc.fn},
			&nn.Linear{Name: "fc2", In: 64, Out: 16},
		}}
		p := tinyPlan(t, m)
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		ops, saved, between := 0, map[core.Value]bool{}, false
		for _, op := range prog.Ops { // the activation's ops lie between fc1 and fc2
			if op.Name == "fc1" || op.Name == "fc2" {
				between = op.Name == "fc1"
				continue
			}
			if !between {
				continue
			}
			ops++
			for _, v := range op.Saved {
				if got, want := prog.Values[v].Bytes, int64(2*64*64); got != want {
					t.Errorf("%s: %s saves %s of %d B, want the input's size %d B", tc.fn, op.Name, prog.Values[v].Name, got, want)
				}
				saved[v] = true
			}
		}
		if ops != tc.ops || len(saved) != tc.saved {
			t.Errorf("%s: %d kernels saving %d tensors, measured %d and %d", tc.fn, ops, len(saved), tc.ops, tc.saved)
		}
	}
}
