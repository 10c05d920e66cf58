package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// TestLossLabelsAsTransformers: the int64 tensors transformers' causal-LM
// loss makes to shift the labels (core's loss_labels.go), each with its
// bytes, the phase it is made in and the phase it is freed in, against
// what tools/oracle/loss_labels.py saw on the CPU (transformers 5.25.0,
// torch 2.15.0, a one-layer llama-gqa-tiny.json at 16 tokens):
//
//	/work/venv-t/bin/python tools/oracle/loss_labels.py sim/testdata/hf/llama-gqa-tiny.json {1,2} 16
//
// batch 1: constant_pad_nd [1, 17], 136 B, saved, freed in the backward;
// batch 2: constant_pad_nd [2, 17], 272 B, freed in the forward, and clone
// [2, 16], 256 B, saved, freed in the backward (the other int64 storages
// it saw, the rotary positions' arange and add, are the model's, not the
// loss's). Before 4.49 the loss copies labels[..., 1:] beside the logits'
// shift copy (ForCausalLMLoss of the 4.46.0 and 4.48.0 wheels,
// hf.padLabelsSince): a view at batch 1, [2, 15] int64 at batch 2 (read
// from the source, not measured: no such wheel here). And a model whose
// labels come shifted (torchtitan's, Megatron's loaders) makes none.
func TestLossLabelsAsTransformers(t *testing.T) {
	cfg := ropeConfig(t, "llama-gqa-tiny.json", 1, nil)
	for _, tc := range []struct {
		release string
		batch   int64
		pad     bool // Model.PadLabels as hf_config sets it (release "": 5.25.0, then turned off)
		want    []string
	}{
		{"5.25.0", 1, true, []string{"labels_padded 136 forward-backward"}},
		{"5.25.0", 2, true, []string{"labels_padded 272 forward-forward", "shift_labels 256 forward-backward"}},
		{"4.48.0", 1, false, nil},
		{"4.48.0", 2, false, []string{"shift_labels 240 forward-backward"}},
		{"", 2, true, nil},
	} {
		release := tc.release
		if release == "" {
			release = "5.25.0"
		}
		m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "sdpa", Transformers: release})
		if err != nil {
			t.Fatal(err)
		}
		if m.PadLabels != tc.pad {
			t.Errorf("%s: PadLabels %v, want %v", release, m.PadLabels, tc.pad)
		}
		if tc.release == "" {
			m.PadLabels = false // labels shifted by the loader
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), tc.batch, 16
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := labelTensors(r.Trace); !slices.Equal(got, tc.want) {
			t.Errorf("transformers %s (pad %v), batch %d: the loss's label tensors %q, want %q", release, m.PadLabels, tc.batch, got, tc.want)
		}
	}
}

// labelTensors lists the loss's shifted or padded labels in tr's steady
// step: "name bytes made-freed" by phase.
func labelTensors(tr *replay.Trace) []string {
	made := map[string]string{}
	var out []string
	for _, e := range tr.SteadyEvents() {
		name := e.Tensor[strings.LastIndex(e.Tensor, ".")+1:]
		if !strings.HasPrefix(e.Tensor, "loss.") || (name != "labels_padded" && name != "shift_labels") {
			continue
		}
		switch e.Action {
		case "alloc":
			made[e.Tensor] = fmt.Sprintf("%s %d %s", name, e.Size, e.Phase)
		case "free_completed":
			out = append(out, made[e.Tensor]+"-"+e.Phase.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestMegatronLossLabels: Megatron-Core's vocabulary-parallel losses read
// the batch's labels, [batch, seq] int64 (get_batch; the dataset shifted
// them), through labels.transpose(0, 1).contiguous()
// (LanguageModule.compute_language_model_loss): a [seq, batch] copy at a
// batch over 1, made in the loss's forward and freed when the function
// returns, in the forward (vocab_parallel_cross_entropy saves its own
// masked_target, Transformer Engine's kernel none); a view at batch 1.
// Read from Megatron-Core's source, not measured.
func TestMegatronLossLabels(t *testing.T) {
	cfg := ropeConfig(t, "llama-gqa-tiny.json", 1, nil)
	for _, tc := range []struct {
		loss  string // Parallelism.LossParallel: "" Megatron's, or its fused or Transformer Engine's
		batch int64
		want  []string
	}{
		{"", 1, []string{"labels 128 setup-after"}},
		{"", 2, []string{"labels 256 setup-after", "labels_transposed 256 forward-forward"}},
		{core.MegatronFusedCE, 2, []string{"labels 256 setup-after", "labels_transposed 256 forward-forward"}},
		{core.TEParallelCE, 2, []string{"labels 256 setup-after", "labels_transposed 256 forward-forward"}},
	} {
		p := hfOraclePlan(t, cfg, hf.Options{Attn: "sdpa"}, "bf16")
		p.Batch, p.Seq = tc.batch, 16
		p.Parallel = core.Parallelism{TP: 2, LossParallel: tc.loss}
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := megatronLabelTensors(r.Trace); !slices.Equal(got, tc.want) {
			t.Errorf("loss %q, batch %d: the labels %q, want %q", tc.loss, tc.batch, got, tc.want)
		}
	}
}

// megatronLabelTensors lists the batch's labels and their transposed copy
// in tr's steady step: "name bytes made-freed" by phase, "after" for one
// alive at the step's end.
func megatronLabelTensors(tr *replay.Trace) []string {
	made := map[string]string{}
	for _, e := range tr.SteadyEvents() {
		if e.Tensor != "labels" && e.Tensor != "loss.labels_transposed" {
			continue
		}
		name := e.Tensor[strings.LastIndex(e.Tensor, ".")+1:]
		switch e.Action {
		case "alloc":
			made[e.Tensor] = fmt.Sprintf("%s %d %s", name, e.Size, e.Phase)
		case "free_completed":
			made[e.Tensor] += "-" + e.Phase.String()
		}
	}
	var out []string
	for _, v := range made {
		if strings.Count(v, "-") == 0 {
			v += "-after"
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}
