package core

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// An op's backward (Program.OpNeedsGrad, and so its model FLOPs and its
// backward time) follows what autograd records: an op built under
// torch.no_grad() (Builder.NoGrad: a frozen tower's unread layers, a
// no_grad indexer, a teacher's or a validation forward) has none, whatever
// its input and its weight require; outside it, an input gradient when
// the input requires one, a weight gradient when the weight trains.
func TestOpNeedsGradFollowsAutograd(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		inputGrad, trainable  bool
		noGrad                bool // the op is built under Builder.NoGrad
		reuse                 bool // its weight is the trainable one registered before no_grad (a shared module run again)
		intOut                bool // its only output is int64 (argmax-like)
		wantInput, wantWeight bool
		forwardOnly           bool // model FLOPs: the forward's alone
	}{
		{name: "trainable weight, input requires grad", inputGrad: true, trainable: true, wantInput: true, wantWeight: true},
		{name: "frozen weight, input requires grad", inputGrad: true, wantInput: true},
		{name: "trainable weight, data input", trainable: true, wantWeight: true},
		{name: "frozen weight, data input", forwardOnly: true},
		{name: "no_grad, input requires grad", inputGrad: true, noGrad: true, forwardOnly: true},
		{name: "no_grad, trainable weight registered before", inputGrad: true, trainable: true, noGrad: true, reuse: true, forwardOnly: true},
		{name: "int64 output, input requires grad", inputGrad: true, trainable: true, intOut: true, forwardOnly: true},
	} {
		b := &Builder{P: &Program{Loss: NoValue, Input: NoValue, Labels: NoValue}}
		x := b.input("x", []int64{4, 8}, units.BF16)
		b.Val(x).Grad = tc.inputGrad
		b.Eval = !tc.trainable
		w := b.Param("weight", []int64{8, 8}, RoleLinear)
		b.Eval = false
		dt := units.BF16
		if tc.intOut {
			dt = units.INT64
		}
		var i int32
		func() {
			if tc.noGrad {
				defer b.NoGrad()()
				if tc.reuse {
					defer b.ReuseParams()()
					w = b.Param("weight", []int64{8, 8}, RoleLinear)
				}
			}
			i = b.AddOp("matmul", "proj", []Value{x}, w)
			b.Out(i, "out", []int64{4, 8}, dt, "output")
		}()
		b.Op(i).Flops = 512
		in, wg := b.P.OpNeedsGrad(b.Op(i))
		if in != tc.wantInput || wg != tc.wantWeight {
			t.Errorf("%s: input, weight gradients %v, %v; want %v, %v", tc.name, in, wg, tc.wantInput, tc.wantWeight)
		}
		want := 512.0
		if !tc.forwardOnly {
			want = 1024 // one gradient GEMM besides the forward
			if tc.wantInput && tc.wantWeight {
				want = 1536
			}
		}
		if got := b.P.OpModelFlops(int(i)); got != want {
			t.Errorf("%s: model FLOPs %g, want %g", tc.name, got, want)
		}
	}
}

// lowerErr runs f as a lowering runs it, its LowerError panic an error.
func lowerErr(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = loweringError(r)
		}
	}()
	f()
	return nil
}

// Builder.Save comes after the op's outputs (they say whether autograd
// records the op, and so whether anything is saved): a Save before any
// Out, or an output requiring grad after a Save that saved nothing, is an
// internal error; in order, a recorded op saves and an unrecorded one
// saves nothing.
func TestSaveAfterOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		steps     string // o: an int64 output, O: a float output, s: Save(x)
		eval      bool
		wantErr   string
		wantSaved int
	}{
		{name: "output, then save", steps: "Os", wantSaved: 1},
		{name: "int output, float output, then save", steps: "oOs", wantSaved: 1},
		{name: "int output alone: nothing saved", steps: "os"},
		{name: "save before any output", steps: "sO", wantErr: "saves tensors before it has an output"},
		{name: "save before any output, eval", steps: "sO", eval: true, wantErr: "saves tensors before it has an output"},
		{name: "save after an int output, before a float one", steps: "osO", wantErr: "saved tensors before its output"},
		{name: "eval: nothing saved, no output requires grad", steps: "osO", eval: true},
	} {
		b := &Builder{P: &Program{Loss: NoValue, Input: NoValue, Labels: NoValue}, Eval: tc.eval}
		x := b.input("x", []int64{4}, units.FP32)
		b.Val(x).Grad = true
		i := b.AddOp("mul", "op", []Value{x})
		err := lowerErr(func() {
			for _, s := range tc.steps {
				switch s {
				case 'o':
					b.Out(i, "ids", []int64{4}, units.INT64, "ids")
				case 'O':
					b.Out(i, "out", []int64{4}, units.FP32, "out")
				case 's':
					b.Save(i, x)
				}
			}
		})
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), "internal error") || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want an internal error %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && len(b.Op(i).Saved) != tc.wantSaved:
			t.Errorf("%s: saved %d tensors, want %d", tc.name, len(b.Op(i).Saved), tc.wantSaved)
		}
	}
}
