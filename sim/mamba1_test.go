package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// mambaTiny is sim/testdata/hf/mamba-tiny.json with num_hidden_layers set,
// built for transformers version ("" = the default).
func mambaTiny(t *testing.T, layers int, attn, version string) *core.Model {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal(readHF(t, "mamba-tiny.json"), &raw); err != nil {
		t.Fatal(err)
	}
	raw["num_hidden_layers"] = layers
	js, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(js, hf.Options{Attn: attn, Transformers: version})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// What one MambaBlock (the norm and a MambaMixer) keeps for backward when
// transformers trains MambaForCausalLM without the mamba_ssm kernels
// (the PyTorch path), as tools/oracle/mamba1.py measures it on the CPU
// (torch 2.15.0): the storages autograd still holds when backward starts
// ("kept"), a 2-layer model minus a 1-layer one
// (sim/testdata/hf/mamba-tiny.json: hidden 32, inner 64, state 4, dt
// rank 2, conv 4), 16 tokens a sample:
//
//	python mamba1.py ../../sim/testdata/hf/mamba-tiny.json {1,2} BATCH 16 {float32,bfloat16}
//
// under transformers 4.57.1 and 5.14.0 (slow_forward), 5.15.0, 5.17.0 and
// 5.25.0 (mamba_selective_scan). The bf16 block of one sample before
// 5.15, counted by hand from slow_forward: the norm (its fp32 input copy
// 2,048, rsqrt 64, normalized 1,024), in_proj's input 1,024 and output
// 4,096 (kept by conv1d through its view), the conv output 64 x 19 x 2 =
// 2,432 (silu keeps it), u 2,048 (x_proj reads it transposed: a view for
// one sample), x_proj's output 320, dt_proj's output 2,048 (softplus) and
// softplus's 2,048, exp(A_log) and A 1,024 each, discrete_A and
// discrete_B 16,384 each (fp32 [1, 64, 16, 4]), B and u in fp32 256 and
// 4,096, the zero state 512, 15 fp32 states 15,360, 16 bf16 state copies
// 8,192, the skip sum, silu(z) and the gated output 2,048 each: 86,528.
// Two samples add the copies the linears make of their transposed inputs.
// From 5.15 the scan takes D.float(): the skip's product keeps that copy
// (64 x 4 = 256 bytes) and the skip sum the gated product keeps is fp32
// (+2,048 a sample); in fp32 nothing changes. 5.25.0 computes
// -exp(A_log.float()) twice (MambaMixer.forward for mamba_inner_fn, which
// returns None without the kernels, and mamba_scan_forward): the first
// exp's saved output (1,024 bytes) dies with the mixer's forward, so
// autograd packs 1,024 bytes more a block but keeps the same.
func TestMambaSlowSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		version string
		prec    string
		batch   int64
		want    int64
	}{
		{"4.57.1", "fp32", 1, 96_704},
		{"4.57.1", "fp32", 2, 199_552},
		{"4.57.1", "bf16", 1, 86_528},
		{"4.57.1", "bf16", 2, 175_104},
		{"5.14.0", "bf16", 1, 86_528},
		{"5.14.0", "bf16", 2, 175_104},
		{"5.15.0", "bf16", 1, 88_832},
		{"5.15.0", "bf16", 2, 179_456},
		{"5.25.0", "fp32", 1, 96_704},
		{"5.25.0", "fp32", 2, 199_552},
		{"5.25.0", "bf16", 1, 88_832},
		{"5.25.0", "bf16", 2, 179_456},
	} {
		var saved [2]int64
		for l := range saved {
			p := tinyPlan(t, mambaTiny(t, l+1, "eager", tc.version))
			var err error
			if p.Precision, err = core.LookupPrecision(tc.prec); err != nil {
				t.Fatal(err)
			}
			p.Batch, p.Seq = tc.batch, 16
			saved[l] = evalPlan(t, p).SavedActivations
		}
		if got := saved[1] - saved[0]; got != tc.want {
			t.Errorf("transformers %s, %s, batch %d: a block saves %d bytes, transformers %d (%+.2f %%)", tc.version, tc.prec, tc.batch, got, tc.want, 100*float64(got-tc.want)/float64(tc.want))
		}
	}
}

// With the mamba_ssm kernels transformers trains a MambaMixer through
// mamba_inner_fn (MambaInnerFn.forward, mamba_ssm
// selective_scan_interface.py: save_for_backward, checkpoint_lvl 1, so no
// conv output and no delta). One bf16 block of the tiny config, 2
// samples of 16 tokens (T = 32), counted by hand: the norm 4,096 + 128 +
// 2,048 and in_proj's input 2,048; xz made contiguous 32 x 128 x 2 =
// 8,192; exp(A_log) and A 1,024 each; x_dbl 32 x 10 x 2 = 640; B and C
// 256 each; the chunk states 2 x 64 x 1 x 8 x 4 = 4,096; the scan output
// 4,096; D.float() and dt_proj.bias.float() 256 each (copies of bf16
// parameters): 28,416, a third of what slow_forward keeps at batch 1.
// (Not checked on PyTorch: the kernels need a GPU.)
func TestMambaFusedSavesAsMambaInnerFn(t *testing.T) {
	var saved [2]int64
	for l := range saved {
		p := tinyPlan(t, mambaTiny(t, l+1, "sdpa", ""))
		p.Batch, p.Seq = 2, 16
		saved[l] = evalPlan(t, p).SavedActivations
	}
	if got := saved[1] - saved[0]; got != 28_416 {
		t.Errorf("a fused block saves %d bytes, want 28,416", got)
	}
}

// Bad Mamba configs get an error naming the key.
func TestMambaConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		key  string
		val  any
		attn string
		want string
	}{
		{"use_mambapy", true, "eager", "use_mambapy"},
		{"time_step_rank", "many", "sdpa", "time_step_rank"},
		{"expand", -1, "sdpa", "expand"},
		{"state_size", 0, "sdpa", "state_size"},
	} {
		var raw map[string]any
		if err := json.Unmarshal(readHF(t, "mamba-tiny.json"), &raw); err != nil {
			t.Fatal(err)
		}
		raw[tc.key] = tc.val
		js, err := json.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := hf.FromConfig(js, tc.attn); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%v: %v", tc.key, tc.val, err)
		}
	}
}
