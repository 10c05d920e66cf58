package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// TestIdleTowerOptimizerState: a parameter the step never reaches gets no
// gradient and, under torch.optim, no optimizer state (replay's
// stateless): AdamW makes a parameter's exp_avg and exp_avg_sq in its
// first step() where p.grad is not None. Without images a vision-language
// model's towers (and Mllama's cross-attention layers) hold weights only;
// Gemma 4's audio tower always does (memsh models no audio input). The
// figures are transformers 5.25.0 and torch 2.15.0 on the CPU, fp32, one
// AdamW step, summed over optimizer.state and the parameters whose grad
// is set after backward:
//
//	/work/venv-t/bin/python tools/oracle/optim_state.py sim/testdata/hf/CONFIG 64
//
// (Gemma 4's image is one 64 x 64 image, gemma4vl_inputs.py's layout; the
// other configs run text only.)
func TestIdleTowerOptimizerState(t *testing.T) {
	for _, tc := range []struct {
		config  string
		params  int64
		im      core.Images
		accum   int64 // micro-batches: the gradients kept between them are those the step makes
		grads   int64 // elements with a gradient
		moments int64 // exp_avg + exp_avg_sq bytes
	}{
		{"gemma4-av-tiny.json", 793_844, core.Images{}, 1, 707_072, 5_656_576},
		{"gemma4-av-tiny.json", 793_844, core.Images{Count: 1, Height: 64, Width: 64}, 1, 735_552, 5_884_416},
		{"qwen2.5-vl-tiny.json", 198_304, core.Images{}, 1, 93_504, 748_032},
		{"qwen2.5-vl-tiny.json", 198_304, core.Images{}, 2, 93_504, 748_032},
		{"mllama-tiny.json", 279_499, core.Images{}, 1, 107_328, 858_624},
		{"gemma3-vl-tiny.json", 194_048, core.Images{}, 1, 165_056, 1_320_448},
		{"qwen3-vl-tiny.json", 290_624, core.Images{}, 1, 130_336, 1_042_688},
		{"llama4-vision-tiny.json", 252_096, core.Images{}, 1, 195_648, 1_565_184},
		{"mistral3-tiny.json", 254_848, core.Images{}, 1, 205_120, 1_640_960},
		{"internvl-tiny.json", 254_688, core.Images{}, 1, 205_376, 1_643_008},
		// LLaVA with images: the last CLIP layer and post_layernorm run but
		// nothing reads them (vision_feature_layer -2), 18 tensors of 8,608
		// elements with grad None (tools/oracle/llava.py
		// ../../sim/testdata/hf/llava-tiny.json --grads 2)
		{"llava-tiny.json", 256_544, core.Images{Count: 2, Height: 56, Width: 56}, 1, 247_936, 1_983_488},
		{"llava-tiny.json", 256_544, core.Images{}, 1, 205_120, 1_640_960},
		// LLaVA-NeXT and LLaVA-OneVision: image_newline gets a gradient
		// with images, none without; OneVision's SigLIP post_layernorm
		// never (tools/oracle/llava_next.py ../../sim/testdata/hf/CONFIG 1
		// HEIGHT WIDTH 64 grads; AdamW keeps 8 bytes an element with one)
		{"llava-next-tiny.json", 256_608, core.Images{Count: 1, Height: 60, Width: 150}, 1, 248_000, 1_984_000},
		{"llava-next-tiny.json", 256_608, core.Images{}, 1, 205_120, 1_640_960},
		{"llava-onevision-tiny.json", 256_768, core.Images{Count: 1, Height: 60, Width: 60}, 1, 256_704, 2_053_632},
		{"llava-onevision-tiny.json", 256_768, core.Images{}, 1, 205_376, 1_643_008},
	} {
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, tc.params, "fp32")
		p.Images, p.GradAccum = tc.im, tc.accum
		st := evalPlan(t, p).States
		if want := 4 * tc.grads; st.Grads != want {
			t.Errorf("%s %v: gradients %d bytes, torch %d", tc.config, tc.im, st.Grads, want)
		}
		if st.Optimizer != tc.moments {
			t.Errorf("%s %v: optimizer state %d bytes, torch %d (%+d)", tc.config, tc.im, st.Optimizer, tc.moments, st.Optimizer-tc.moments)
		}
	}
}

// TestIdleTowerStateLayouts: the rule per data-parallel layout, on the
// tiny Qwen2.5-VL of TestIdleTowerOptimizerState without images (fp32
// AdamW: 748,032 bytes of moments for the 93,504 elements the step
// reaches, 1,586,432 for all 198,304). DDP steps every parameter whole;
// FSDP2's optimizer sees each sharded DTensor and makes state only where
// it has a gradient (every dimension here is even: half each); ZeRO's
// flat fp32 partitions hold state for every trainable parameter, made at
// construction (deepspeed/runtime/zero/stage_1_and_2.py
// initialize_optimizer_states: zero gradients over the whole partition,
// then one step); precision "megatron" gives every main parameter a grad
// from the grad buffer (megatron/core/optimizer/optimizer.py
// _copy_model_grads_to_main_grads). FSDP1's flat parameters: a unit that
// runs steps its whole flat parameter, one that never runs has no state
// (replay/fsdp1_idle.go): the tower's 42,368 elements in its
// Qwen2_5_VLVisionBlock units (each a unit, _no_split_modules) have none,
// its patch embedding and merger share the root's (counted on the meta
// device, transformers 5.25.0).
func TestIdleTowerStateLayouts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		par       core.Parallelism
		precision string
		want      int64
		params    int64 // every weight is held, run or not: 198,304 elements, whole or halved
	}{
		{"ddp", core.Parallelism{DP: 2}, "fp32", 748_032, 4 * 198_304},
		{"fsdp2", core.Parallelism{DP: 2, FSDP: true}, "fp32", 748_032 / 2, 4 * 198_304 / 2},
		{"zero1", core.Parallelism{DP: 2, Zero: 1}, "fp32", 1_586_432 / 2, 4 * 198_304},
		{"fsdp1", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, "fp32", 8 * (198_304 - 42_368) / 2, 4 * 198_304 / 2},
		{"megatron", core.Parallelism{}, "megatron", 1_586_432, 2 * 198_304},
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, tc.precision)
		p.Parallel = tc.par
		st := evalPlan(t, p).States
		if st.Optimizer != tc.want {
			t.Errorf("%s: optimizer state %d bytes, want %d (%+d)", tc.name, st.Optimizer, tc.want, st.Optimizer-tc.want)
		}
		if st.Params != tc.params {
			t.Errorf("%s: parameters %d bytes, want %d", tc.name, st.Params, tc.params)
		}
	}
}

// TestIdleTowerZeROAccumulatedGradients: DeepSpeed ZeRO-1 and ZeRO-2 with
// grad_accum = 2 on the tiny Qwen2.5-VL without images (fp32, DP 2). The
// gradients held from the micro-batch before the replayed one (setup):
// stage 1 leaves them to autograd's param.grad until the accumulation
// boundary, so the vision tower, which no op reaches, has None and only
// the 93,504 elements the step reaches hold one (replay's zero1GradNumel,
// deepspeed/runtime/engine.py allreduce_gradients and
// stage_1_and_2.py reduce_gradients, "if grad_reduc is not None");
// stage 2 keeps grads_in_partition, sized by every parameter overlapping
// the rank's partition, whole, reached or not (copy_grads_in_partition),
// and zeros_like of each of them the step does not reach
// (get_all_grad_tensors; replay/zero_grads.go). The partitions are
// 198,304 / 2 = 99,152 elements; the first rank's, [0, 99,152), holds the
// embedding (19,200, reached) and the tower up to
// visual.blocks.3.mlp.down_proj.weight, which ends at 99,168: 99,168
// elements of grads_in_partition and 79,968 of zeros, more than the second
// rank's 101,184 and 26,880. The flat fp32 optimizer partitions hold state
// for all of them either way (TestIdleTowerStateLayouts).
func TestIdleTowerZeROAccumulatedGradients(t *testing.T) {
	for _, tc := range []struct {
		zero      int
		grads     int64 // States.Grads
		heldGrads int64 // gradient bytes held through setup, each block rounded up to 512 bytes by the caching allocator
	}{
		{1, 4 * 93_504, 377_344},                      // a .grad for every parameter gave 793,216 and 805,888
		{2, 4 * (99_168 + 79_968), 396_800 + 320_000}, // 396,672 and 319,872 bytes, rounded up
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, "fp32")
		p.Parallel, p.GradAccum = core.Parallelism{DP: 2, Zero: tc.zero}, 2
		rep, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var held int64
		for _, pt := range rep.Timeline {
			if pt.Phase == replay.PhaseSetup {
				held = max(held, pt.ByCat[core.CatGrads])
			}
		}
		if rep.States.Grads != tc.grads || held != tc.heldGrads {
			t.Errorf("zero %d: gradients %d bytes, held through setup %d; want %d and %d", tc.zero, rep.States.Grads, held, tc.grads, tc.heldGrads)
		}
		if want := int64(1_586_432 / 2); rep.States.Optimizer != want {
			t.Errorf("zero %d: optimizer state %d bytes, want %d", tc.zero, rep.States.Optimizer, want)
		}
	}
}

// TestIdleTowerStepTemporaries: a foreach step's temporaries are one
// tensor per parameter in the lists torch.optim's _init_group builds of
// the parameters with a gradient (torch/optim/adamw.py, adam.py
// _init_group: "if p.grad is not None"; _multi_tensor_adam's
// torch._foreach_* ops over those lists), so a tower the step does not
// run adds none (replay's stepped). The tiny Qwen2.5-VL without images
// (fp32 AdamW, foreach): 93,504 of its 198,304 elements get a gradient
// (TestIdleTowerOptimizerState), a temporary of 4 bytes each; FSDP2 steps
// their DTensor shards (every dimension even: half); FSDP1 steps the flat
// parameters of the units that run, the root's idle patch embedding and
// merger with them and not the tower's 42,368 elements in
// Qwen2_5_VLVisionBlock units (TestIdleTowerStateLayouts). Before the
// rule every trainable parameter had one: 793,216 bytes on one GPU.
func TestIdleTowerStepTemporaries(t *testing.T) {
	for _, tc := range []struct {
		name string
		par  core.Parallelism
		want int64
	}{
		{"one GPU", core.Parallelism{}, 4 * 93_504},
		{"fsdp2", core.Parallelism{DP: 2, FSDP: true}, 4 * 93_504 / 2},
		{"fsdp1", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, 4 * (198_304 - 42_368) / 2},
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, "fp32")
		p.Parallel = tc.par
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, e := range r.Trace.SteadyEvents() {
			if e.Action == "alloc" && e.Phase == replay.PhaseOptimizer && strings.HasSuffix(e.Tensor, " step temporary") {
				got += e.Size
			}
		}
		if got != tc.want {
			t.Errorf("%s: %d bytes of step temporaries, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
	}
}
