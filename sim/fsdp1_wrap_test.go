package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// FSDP1's construction, hand-counted (replay/fsdp1_wrap.go): two
// bias-free linears 1000 -> 4096 -> 1000 in bf16 on 2 ranks, one
// FlatParameter (the root unit) of 8,192,000 elements. Each weight is
// 4,096,000 elements, 8,192,000 B; the flat parameter 16,384,000 B; this
// rank's shard 8,192,000 B.
//
// The wrap allocates, in order: both weights moved to the GPU
// (_move_module_to_device); with sync_module_states one broadcast bucket
// of both (16,384,000 B, under 250 MiB, so one flattened copy), freed
// when the broadcast finishes; the FlatParameter (torch.cat); the shard
// (_get_shard's clone); then set_() frees the FlatParameter, CPUOffload
// frees the shard (moved to the host), and the weights go when
// _init_param_handle_from_module returns.
//
// The segments it leaves (sim/alloc: a request of 1-10 MiB from a
// 20 MiB segment, a larger one rounded up to 2 MiB): both weights share
// one 20 MiB segment (2 x 8,192,000 B <= 20,971,520 B); the bucket gets a
// 16 MiB segment (16,384,000 B rounded up to 16,777,216 B) that the
// FlatParameter then reuses; the shard a second 20 MiB segment:
// 58,720,256 B reserved, with or without the bucket and the offload. The
// 393,216 B the 16 MiB segment has over 16,384,000 B is under 1 MiB, too
// little to split off, so the bucket's and the FlatParameter's blocks
// are the whole segment, as memory_allocated counts them.
func TestFSDP1Wrap(t *testing.T) {
	const w, flat, shard = 8_192_000, 16_777_216, 8_192_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		name    string
		sync    bool
		offload bool
		steps   []int64 // the allocated bytes' changes, in order
		kept    int64   // allocated after the wrap
	}{
		{"wrap", false, false, []int64{w, w, flat, shard, -flat, -w, -w}, shard},
		{"sync_module_states", true, false, []int64{w, w, flat, -flat, flat, shard, -flat, -w, -w}, shard},
		{"CPU offload", false, true, []int64{w, w, flat, shard, -flat, -shard, -w, -w}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: c.sync})
			if c.offload {
				plan.Offload = &core.Offload{Params: "cpu"}
			}
			r, err := Evaluate(plan, core.Options{Timeline: true})
			if err != nil {
				t.Fatal(err)
			}
			var steps []int64
			var prev, reserved int64
			for _, pt := range r.Timeline {
				if pt.Phase != replay.PhaseSetup || len(steps) == len(c.steps) {
					break
				}
				if d := pt.Allocated - prev; d != 0 {
					steps = append(steps, d)
				}
				prev, reserved = pt.Allocated, pt.Reserved
			}
			if !slices.Equal(steps, c.steps) {
				t.Errorf("the wrap allocates %v, want %v", steps, c.steps)
			}
			if prev != c.kept {
				t.Errorf("%d B allocated after the wrap, want %d", prev, c.kept)
			}
			if reserved != 58_720_256 {
				t.Errorf("%d B reserved after the wrap, want 58,720,256 (two 20 MiB segments and one of 16 MiB)", reserved)
			}
		})
	}
}

// sync_module_states' buckets, hand-counted: nine bias-free linears
// alternating 5120 -> 10240 and 10240 -> 5120 in bf16 on 2 ranks, each
// weight 52,428,800 elements, w = 104,857,600 B (100 MiB), one root unit.
// broadcast_coalesced closes a bucket once it reaches 250 MiB: three
// buckets of three weights, each flattened into a 300 MiB copy
// (314,572,800 B). At most two are in flight, so the first is freed
// before the third is made; the other two go when the broadcast ends.
// Then the FlatParameter (9 w = 943,718,400 B), its shard (half of it),
// and the frees. Every size is a multiple of 2 MiB: each block is its
// request.
func TestFSDP1WrapBroadcastBuckets(t *testing.T) {
	const w, bucket, flat = 104_857_600, 314_572_800, 943_718_400
	var layers []core.Layer
	for i := range 9 {
		in, out := int64(5120), int64(10240)
		if i%2 == 1 {
			in, out = out, in
		}
		layers = append(layers, &nn.Linear{In: in, Out: out})
	}
	m := &core.Model{Name: "nine", Layers: layers, Loss: "mse"}
	plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: true})
	r, err := Evaluate(plan, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{w, w, w, w, w, w, w, w, w, bucket, bucket, -bucket, bucket, -bucket, -bucket, flat, flat / 2, -flat, -w, -w, -w, -w, -w, -w, -w, -w, -w}
	var steps []int64
	var prev int64
	for _, pt := range r.Timeline {
		if pt.Phase != replay.PhaseSetup || len(steps) == len(want) {
			break
		}
		if d := pt.Allocated - prev; d != 0 {
			steps = append(steps, d)
		}
		prev = pt.Allocated
	}
	if !slices.Equal(steps, want) {
		t.Errorf("the wrap allocates %v, want %v", steps, want)
	}
	// The wrap's own peak, 9 w + the FlatParameter + its shard, is not
	// the step's (train.py resets the peaks after it): an evaluation step,
	// the shard and the all-gathered FlatParameter, stays below it.
	eval := *plan
	eval.Phase = core.Eval
	e, err := Evaluate(&eval, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if wrapPeak := int64(9*w + flat + flat/2); e.PeakAllocated >= wrapPeak || e.PeakAt.Phase == replay.PhaseSetup {
		t.Errorf("evaluation: peak allocated %d B in %s, the wrap's own %d B: the step's peak starts after the wrap", e.PeakAllocated, e.PeakAt.Phase, wrapPeak)
	}
}

// What ProcessGroupNCCL's record_stream holds in the wrap, hand-counted on
// TestFSDP1Wrap's two linears with sync_module_states: on a runtime that
// records a collective's input on the NCCL stream (torch 2.2 to 2.7:
// cuda-2.6) the broadcast bucket's block, freed when broadcast_coalesced
// returns, waits for the broadcast until the host next waits for the
// device, so the FlatParameter's torch.cat cannot take its 16 MiB segment
// and gets one of its own: 20 + 16 + 16 + 20 MiB = 75,497,472 B reserved
// after the wrap, against 58,720,256 B when the cat reuses it (runtime
// "cuda", which stashes instead) or when nothing is broadcast. Allocated
// memory is the same in all three: the bucket's bytes leave it at the free.
func TestFSDP1WrapNCCLHold(t *testing.T) {
	const shard = 8_192_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		runtime  string
		sync     bool
		reserved int64
	}{
		{"cuda-2.6", true, 75_497_472},
		{"cuda", true, 58_720_256},
		{"cuda-2.6", false, 58_720_256},
	} {
		plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: c.sync})
		plan.Runtime, _ = core.LookupRuntime(c.runtime)
		r, err := Evaluate(plan, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		var prev, reserved int64
		for _, pt := range r.Timeline {
			if pt.Phase != replay.PhaseSetup || pt.Op != "model" {
				break
			}
			prev, reserved = pt.Allocated, pt.Reserved
		}
		if prev != shard || reserved != c.reserved {
			t.Errorf("%s, sync_module_states %v: %d B allocated and %d B reserved after the wrap, want %d and %d", c.runtime, c.sync, prev, reserved, shard, c.reserved)
		}
	}
}

// Module buffers in the wrap, hand-counted: a one-layer Llama (hidden 64,
// 4 heads of 16, MLP 128, vocabulary 100) in bf16 on 2 ranks whose rotary
// tables (nn/rope_cache.go) cover 256 positions in fp32, 16,384 B each.
// FSDP1 wraps layers.0 first: _move_module_to_device moves its parameters
// (two norms of 128 B, q, k, v and o of 8,192 B, gate, up and down of
// 16,384 B: 82,176 B) and then its buffers, the two tables; with
// sync_module_states, _sync_module_params_and_buffers lists the buffers
// before the parameters and broadcast_coalesced buckets them by dtype
// (compute_bucket_assignment_by_size): an fp32 bucket of both tables
// (32,768 B, flattened as it holds two tensors) and a bf16 bucket of the
// nine parameters (82,176 B), taken in the order of their first tensor,
// both in flight, freed when the broadcast ends. The tables stay: 32,768 B
// of buffers, moved once (not also before the wrap).
func TestFSDP1WrapBuffers(t *testing.T) {
	m := ropeCached(testmodels.Llama(64, 1, 4, 4, 128, 100, "sdpa"), 256, units.FP32)
	plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: true})
	r, err := Evaluate(plan, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []int64 // from the first table to the FlatParameter
	for _, e := range r.Trace.Events {
		if e.Phase != replay.PhaseSetup || !strings.HasPrefix(e.Tensor, "layers.0") {
			continue
		}
		on := len(got) > 0 || strings.Contains(e.Tensor, "rotary_emb")
		if !on || strings.Contains(e.Tensor, "FlatParameter") {
			if len(got) > 0 {
				break
			}
			continue
		}
		switch e.Action {
		case "alloc":
			got = append(got, e.Size)
		case "free_requested", "free_completed":
			got = append(got, -e.Size)
		}
	}
	want := []int64{16_384, 16_384, 32_768, 82_176, -32_768, -82_176}
	if !slices.Equal(got, want) {
		t.Errorf("layers.0's tables and broadcast: %v, want %v", got, want)
	}
	if r.States.Buffers != 32_768 {
		t.Errorf("%d B of buffers, want 32,768", r.States.Buffers)
	}
}

// The order of the wrap: FSDP's auto-wrap (_recursive_wrap) wraps a
// module's children before the module, so on a one-layer Llama with LoRA
// on q and each adapter its own unit (Answer.AI's policy) the units are
// built as lora_A, lora_B, then layers.0, then the root: the first tensor
// each moves to the GPU is, in order, lora_A's weight, lora_B's, the
// layer's first parameter, the embedding.
func TestFSDP1WrapOrder(t *testing.T) {
	m := testmodels.Llama(64, 1, 4, 4, 128, 100, "sdpa")
	plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, AdapterUnits: true})
	plan.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q"}}
	r, err := Evaluate(plan, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string // the unit of each tensor the wrap moves, once a unit
	for _, e := range r.Trace.Events {
		if e.Phase != replay.PhaseSetup || e.Action != "alloc" || !strings.HasSuffix(e.Tensor, ".weight (wrap)") {
			continue
		}
		u := "root"
		switch {
		case strings.Contains(e.Tensor, "lora_A"):
			u = "lora_A"
		case strings.Contains(e.Tensor, "lora_B"):
			u = "lora_B"
		case strings.HasPrefix(e.Tensor, "layers.0."):
			u = "layers.0"
		}
		if len(got) == 0 || got[len(got)-1] != u {
			got = append(got, u)
		}
	}
	if want := []string{"lora_A", "lora_B", "layers.0", "root"}; !slices.Equal(got, want) {
		t.Errorf("the wrap builds %v, want %v", got, want)
	}
}

// The quant_state's round trip on rank 0 (replay/fsdp1_wrap.go
// quantRoundTrip), hand-counted on a one-layer Llama (hidden 64) in
// bitsandbytes nf4 with double quantization, stored in bf16, LoRA on q,
// sync_module_states: q_proj's 4,096 weights have 64 blocks of 64, so a
// 64 B quantized absmax, a 4 B absmax of absmax (one block of 256) and a
// 4 B offset, and a 64 B code table. The loading makes all four; peft
// moves the first three to the host (freed on the GPU, their segment
// cached), and the wrap's Params4bit.to brings them back just before
// q_proj's codes move; the code table never leaves. o_proj, which has no
// adapter, keeps its quant_state: made once, never freed.
func TestFSDP1WrapQuantRoundTrip(t *testing.T) {
	m := testmodels.Llama(64, 1, 4, 4, 128, 100, "sdpa")
	plan := distPlan(t, m, "bf16", core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1, SyncStates: true})
	plan.Quant, plan.QuantStorage = "nf4-dq", units.BF16
	plan.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q"}}
	r, err := Evaluate(plan, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		proj string
		want []int64 // its quant_state's allocations and frees, and its codes' move (0)
	}{
		{"q_proj", []int64{64, 4, 4, 64, -64, -4, -4, 64, 4, 4, 0}},
		{"o_proj", []int64{64, 4, 4, 64, 0}},
	} {
		var got []int64
		for _, e := range r.Trace.Events {
			if e.Phase != replay.PhaseSetup || !strings.HasPrefix(e.Tensor, "layers.0.self_attn."+c.proj+".weight") {
				continue
			}
			switch {
			case strings.HasSuffix(e.Tensor, "(wrap)"):
				if e.Action == "alloc" {
					got = append(got, 0)
				}
			case e.Action == "alloc":
				got = append(got, e.Size)
			default:
				got = append(got, -e.Size)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.proj, got, c.want)
		}
	}
}
