package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

func TestQuantStorage(t *testing.T) {
	for _, tc := range []struct {
		scheme string
		shape  []int64
		want   int64
	}{
		// 4096x4096: 8,388,608 B of codes; 262,144 fp32 absmax; 16-value table
		{"nf4", []int64{4096, 4096}, 8_388_608 + 1_048_576 + 64},
		// absmax as uint8 (262,144 B), 1,024 fp32 second-level absmax, the offset
		{"nf4-dq", []int64{4096, 4096}, 8_388_608 + 262_144 + 4_096 + 4 + 64},
		// odd sizes: (n+1)/2 codes, blocks rounded up
		{"nf4", []int64{3, 43}, 65 + 3*4 + 64},
		// int8: the row-major codes and SCB, an fp32 scale per row
		{"int8", []int64{11008, 4096}, 11008*4096 + 11008*4},
		// row-major (bitsandbytes 0.45 on): 100 x 70 codes, 100 fp32 scales
		{"int8", []int64{100, 70}, 100*70 + 400},
	} {
		if got := core.QuantBytes(tc.scheme, tc.shape); got != tc.want {
			t.Errorf("%s %v: %d bytes, want %d", tc.scheme, tc.shape, got, tc.want)
		}
	}
}

// tinyLM: embedding(1000, 256), up 256->512 (gelu), down 512->256, head.
func tinyLM() *core.Model {
	return &core.Model{Name: "tiny", Vocab: 1000, Layers: []core.Layer{
		&nn.Embedding{Name: "embed", Rows: 1000, Dim: 256},
		&nn.Linear{Name: "up", In: 256, Out: 512, Role: core.RoleUp},
		&nn.Act{Fn: "gelu"},
		&nn.Linear{Name: "down", In: 512, Out: 256, Role: core.RoleDown},
	}}
}

// deepLM: embedding(vocab, 256), n residual gelu MLP blocks, fp32 logits.
func deepLM(vocab, n int64) *core.Model {
	return &core.Model{Name: "deep", Vocab: vocab, LogitsFP32: true, Layers: []core.Layer{
		&nn.Embedding{Name: "embed", Rows: vocab, Dim: 256},
		&core.Repeat{Name: "layers", N: n, Layer: &core.Residual{Layer: &nn.MLP{Dim: 256, Hidden: 1024, Act: "gelu"}}},
	}}
}

func tinyPlan(t *testing.T, m *core.Model) *core.Plan {
	t.Helper()
	prec, err := core.LookupPrecision("bf16")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return &core.Plan{Model: m, Batch: 1, Seq: 64, GradAccum: 1, Members: 1, Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Device: dev}
}

func TestQuantLinear(t *testing.T) {
	base := tinyPlan(t, tinyLM())
	base.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}}
	plain, err := Evaluate(base, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := *base
	q.Quant = "nf4"
	nf4, err := Evaluate(&q, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// up and down quantized (131,072 weights each: 65,536 B codes, 2,048
	// fp32 absmax, the code table); embed and lm_head stay bf16.
	want := int64(2*1000*256*2+2*(65_536+8_192+64)) + (4*256+512*4)*4 // + the LoRA adapter (fp32: PEFT's autocast_adapter_dtype)
	if nf4.States.Params != want {
		t.Errorf("nf4 params %d B, want %d", nf4.States.Params, want)
	}
	// MatMul4Bit keeps down's input (the gelu output, 64x512 bf16) for
	// backward; a frozen nn.Linear keeps nothing. up's input (the
	// embedding output) needs no grad, so nothing more is kept.
	if d := nf4.SavedActivations - plain.SavedActivations; d != 64*512*2 {
		t.Errorf("nf4 saves %d B more than bf16, want %d", d, 64*512*2)
	}
	// the dequantized bf16 weight of up (256x512) exists in forward
	if nf4.Largest.Bytes < 512*256*2 {
		t.Errorf("largest allocation %d B, want at least the dequantized weight", nf4.Largest.Bytes)
	}
	q.LoRA = nil
	if _, err := Evaluate(&q, core.Options{}); err == nil || !strings.Contains(err.Error(), "needs a frozen base") {
		t.Errorf("quant without lora or freeze: %v", err)
	}
}

func TestFreeze(t *testing.T) {
	for _, tc := range []struct {
		freeze []string
		want   int64 // trainable params
	}{
		{nil, 1000*256 + 256*512 + 512*256 + 256*1000},
		{[]string{"embed"}, 256*512 + 512*256 + 256*1000},
		{[]string{"up", "lm_head"}, 1000*256 + 512*256},
		{[]string{"all"}, 0},
	} {
		p := tinyPlan(t, tinyLM())
		p.Freeze = tc.freeze
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.TrainableParams != tc.want {
			t.Errorf("freeze=%v: %d trainable, want %d", tc.freeze, r.TrainableParams, tc.want)
		}
		// AdamW bf16: two moments per trainable weight
		if r.States.Optimizer != 4*tc.want {
			t.Errorf("freeze=%v: optimizer state %d, want %d", tc.freeze, r.States.Optimizer, 4*tc.want)
		}
	}
	if !core.PathPrefix("layers.1", "layers.1.attn.q_proj.weight") || core.PathPrefix("layers.1", "layers.10.attn.q_proj.weight") {
		t.Error("pathPrefix must cut at dots")
	}
	// A name that is neither a role nor a module path of any parameter is
	// refused (freeze=["layerz"] froze nothing: a full fine-tune's step),
	// one of a list too.
	for _, bad := range [][]string{{"layerz"}, {"embed", "lm_haed"}, {"emb"}} {
		p := tinyPlan(t, tinyLM())
		p.Freeze = bad
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "which is neither a role nor a module path of any parameter of the model") {
			t.Errorf("freeze=%v: %v", bad, err)
		}
	}
}

func TestChunkLengths(t *testing.T) {
	for _, tc := range []struct {
		o    core.HeadLoss
		seq  int64
		want []int64
	}{
		{core.HeadLoss{ChunkTokens: 128}, 300, []int64{128, 128, 44}},
		{core.HeadLoss{Chunks: 8}, 1000, []int64{125, 125, 125, 125, 125, 125, 125, 125}},
		{core.HeadLoss{Chunks: 3}, 10, []int64{4, 4, 2}},
	} {
		got := tc.o.ChunkLengths(tc.seq)
		if len(got) != len(tc.want) {
			t.Fatalf("%+v seq %d: %v, want %v", tc.o, tc.seq, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%+v seq %d: %v, want %v", tc.o, tc.seq, got, tc.want)
			}
		}
	}
}

func TestLossChunks(t *testing.T) {
	p := tinyPlan(t, deepLM(8000, 1))
	p.Seq = 2048
	full, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.LossChunks = 4
	chunked, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// unchunked, the largest tensor is a whole-sequence vocab tensor
	// (2048 x 8000 fp32 for the loss); chunked, one chunk's (512 tokens).
	if full.Largest.Bytes != 2048*8000*4 {
		t.Errorf("unchunked largest %d (%s), want %d", full.Largest.Bytes, full.Largest.Tensor, 2048*8000*4)
	}
	if chunked.Largest.Bytes != 512*8000*4 {
		t.Errorf("chunked largest %d (%s), want %d", chunked.Largest.Bytes, chunked.Largest.Tensor, 512*8000*4)
	}
	if chunked.PeakAllocated >= full.PeakAllocated {
		t.Errorf("chunked peak %d >= unchunked %d", chunked.PeakAllocated, full.PeakAllocated)
	}
}

func TestOffload(t *testing.T) {
	const n = 1000*256 + 256*512 + 512*256 + 256*1000 // params
	base := tinyPlan(t, tinyLM())
	plain, err := Evaluate(base, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := *base
	// DeepSpeed offloads the optimizer through ZeRO only: without zero=
	// the plan is refused, with a hint naming the stage to add.
	p.Offload = &core.Offload{Optimizer: "cpu"}
	if _, err := Evaluate(&p, core.Options{}); err == nil || !strings.Contains(err.Error(), "ZeRO optimizer only") {
		t.Errorf("offload(optimizer=\"cpu\") without zero=: %v, want the refusal", err)
	}
	// One GPU, ZeRO-2 at dp=1 (replay/shard_offload.go), DeepSpeed's bf16
	// (bf16-mixed: bf16 parameters, fp32 master and moments): host: fp32 master
	// + two fp32 moments + fp32 grads + the bf16 staging copy, 18 B, and
	// the pinned bf16 temp_grad_buffer_for_cpu_offload of the largest
	// parameter (1000 x 256); PCIe: fp32 grads down, bf16 params up, 6 B.
	if p.Precision, err = core.LookupPrecision("bf16-mixed"); err != nil {
		t.Fatal(err)
	}
	p.Parallel = core.Parallelism{Zero: 2}
	opt, err := Evaluate(&p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(18*n + 2*1000*256); opt.HostMemory != want {
		t.Errorf("optimizer offload host %d, want %d", opt.HostMemory, want)
	}
	if opt.Traffic.PCIe != 6*n {
		t.Errorf("optimizer offload pcie %d, want %d", opt.Traffic.PCIe, 6*n)
	}
	p.Parallel = base.Parallel
	if opt.Category("optimizer") != 0 || plain.Category("optimizer") == 0 {
		t.Errorf("optimizer state on the device: %d (plain %d)", opt.Category("optimizer"), plain.Category("optimizer"))
	}
	deep := tinyPlan(t, deepLM(1000, 8))
	deep.Seq = 4096
	deepPlain, err := Evaluate(deep, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deep.Offload = &core.Offload{Activations: "cpu"}
	act, err := Evaluate(deep, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Offloaded: each layer's MLP input [4096, 256] bf16 (2 MiB), up
	// projection output and GELU output [4096, 1024] bf16 (2 x 8 MiB):
	// 8 x 18 MiB = 150,994,944 B, each a power of two already, so the
	// pinned blocks hold exactly that and PCIe carries it both ways. What
	// stays on the device: the batch (int64 ids and labels), nll_loss's
	// 0-dim fp32 total_weight (under min_offload_size), and what the head
	// and the loss save, as torchtune leaves them (the output projection
	// under NoOpManager, the loss outside the context): lm_head's input
	// (2 MiB) and the fp32 logits [4096, 1000] (16,384,000 B).
	const offloaded = 8 * 18 << 20
	if act.HostMemory != offloaded || act.Traffic.PCIe != 2*offloaded {
		t.Errorf("activation offload host %d, pcie %d, want %d and twice that", act.HostMemory, act.Traffic.PCIe, offloaded)
	}
	if kept := deepPlain.SavedActivations - 2*4096*8 - 4 - 2<<20 - 4096*1000*4; kept != offloaded {
		t.Errorf("the saved activations but the batch, total_weight, the head's input and the logits are %d, want the %d offloaded", kept, offloaded)
	}
	if act.PeakAllocated >= deepPlain.PeakAllocated {
		t.Errorf("activation offload peak %d >= plain %d", act.PeakAllocated, deepPlain.PeakAllocated)
	}
	// DeepSpeed offloads parameters with ZeRO-3 only (offload_param):
	// without zero= the plan is refused, with the stage to add.
	p.Offload = &core.Offload{Params: "cpu", Optimizer: "cpu"}
	if _, err := Evaluate(&p, core.Options{}); err == nil || !strings.Contains(err.Error(), "ZeRO stage 3 only") {
		t.Errorf("offload(params=\"cpu\") without zero=: %v, want the refusal", err)
	}
	// One GPU, ZeRO-3 at dp=1 (replay/shard_offload.go): host: the bf16
	// parameter partition (pinned), fp32 master and two fp32 moments, the
	// fp32 gradient partition and stage 3's bf16 gradient partition
	// (grad_partitions_flat_buffer, pinned): 2 + 12 + 4 + 2 = 20 B (no
	// staging copy at stage 3).
	p.Parallel = core.Parallelism{Zero: 3}
	par, err := Evaluate(&p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if par.HostMemory != 20*n || hostShare(par, "fp32 gradients") != 4*n || hostShare(par, "bf16 gradient buffers (pinned)") != 2*n {
		t.Errorf("param offload host %d, want %d, 4 B of them fp32 gradients and 2 B bf16 gradient buffers (%v)", par.HostMemory, 20*n, par.HostBreakdown)
	}
	p.Parallel = base.Parallel
	p.Offload = &core.Offload{Optimizer: "cpu"}
	p.Parallel = core.Parallelism{Zero: 2}
	p.HostMemory = 1 << 20
	if _, err := Evaluate(&p, core.Options{}); err == nil || !strings.Contains(err.Error(), "offload needs") {
		t.Errorf("host memory too small: %v", err)
	}
	p.Offload = &core.Offload{Optimizer: "disk"}
	if _, err := Evaluate(&p, core.Options{}); err == nil || !strings.Contains(err.Error(), `unknown optimizer tier "disk"`) {
		t.Errorf("bad tier: %v", err)
	}
}

func TestPagedUnderPressure(t *testing.T) {
	p := tinyPlan(t, tinyLM())
	p.Optimizer = core.Optimizer{Kind: core.PagedAdamW}
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000*256 + 256*512 + 512*256 + 256*1000
	if r.States.Optimizer != 8*n || r.HostMemory != 0 {
		t.Fatalf("paged state %d host %d, want %d on the device", r.States.Optimizer, r.HostMemory, 8*n)
	}
	// a device with room for the step but not for the paged state
	p.Device.Memory = r.DeviceUsed - 4*n
	r2, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Fits || r2.HostMemory != 4*n || len(r2.Notes) == 0 {
		t.Errorf("fits=%v host=%d notes=%v: want the state half paged out", r2.Fits, r2.HostMemory, r2.Notes)
	}
}

func TestPacking(t *testing.T) {
	block := func(impl string) *core.Model {
		return &core.Model{Name: "packed", Vocab: 1000, Layers: []core.Layer{
			&nn.Embedding{Name: "embed", Rows: 1000, Dim: 256},
			&core.Repeat{Name: "layers", N: 2, Layer: &core.Residual{Layer: &nn.Attention{Dim: 256, Heads: 4, Impl: impl, Causal: true}}},
		}}
	}
	p := tinyPlan(t, block("flash"))
	p.Batch, p.Seq = 4, 512
	padded, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 3 documents' worth of real tokens packed into one row of 1536
	p.TokensPerBatch = 1536
	packed, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	one := *p
	one.Batch, one.Seq, one.TokensPerBatch = 1, 1536, 0
	row, err := Evaluate(&one, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if packed.SavedActivations != row.SavedActivations || packed.SavedActivations >= padded.SavedActivations {
		t.Errorf("packed saves %d, one row of 1536 %d, padded 4 x 512 %d", packed.SavedActivations, row.SavedActivations, padded.SavedActivations)
	}
	p.Model = block("sdpa")
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "needs flash attention's varlen kernel") {
		t.Errorf("packed sdpa: %v", err)
	}
}

// TestQuantInt8 counts bitsandbytes 0.50.2's MatMul8bitLt by hand on
// tinyLM (64 tokens; up 256 -> 512 with a LoRA adapter, down 512 -> 256,
// both int8): down's forward in bf16 quantizes its input (the gelu output,
// 64 x 512): CA int8 32,768 and SCA fp32 256, beside A.to(fp16) 65,536,
// the outlier test's abs 65,536 and bool mask 32,768, dropped at once;
// then the int32 GEMM result 64 x 256 x 4 = 65,536 and the fp16
// dequantized one 32,768 beside the bf16 output 32,768; CA and SCA go
// after it. In fp16 no input copy is made and the dequantized fp16
// result is the output. The backward copies CB to bf16 (256 x 512 x 2 =
// 262,144) with its fp32 scale column (1,024). Under Lightning (LitGPT's
// models) int8 runs in fp16 only, as BitsandbytesPrecision refuses any
// other dtype.
func TestQuantInt8(t *testing.T) {
	p := tinyPlan(t, tinyLM())
	p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}}
	p.Quant = "int8"
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	// up 512x256 and down 256x512: the int8 codes + fp32 SCB per row
	want := int64(2*1000*256*2) + (512*256 + 512*4) + (256*512 + 256*4) + (4*256+512*4)*4 // fp32 adapters over bf16
	if r.States.Params != want {
		t.Errorf("int8 params %d, want %d", r.States.Params, want)
	}
	for _, tc := range []struct {
		op    string
		phase replay.Phase
		want  []int64
	}{
		{"down.quant_input", replay.PhaseForward, []int64{32_768, 256, 65_536, 65_536, 32_768, -65_536, -65_536, -32_768}},
		{"down", replay.PhaseForward, []int64{32_768, 65_536, 32_768, -65_536, -32_768, -32_768, -256}},
		{"down", replay.PhaseBackward, []int64{262_144, 1_024}},
	} {
		got := opEvents(r.Trace, tc.op, tc.phase)
		if tc.phase == replay.PhaseBackward && len(got) >= 2 {
			got = got[:2] // the workspaces first; the gradients and frees follow
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.op, tc.phase, got, tc.want)
		}
	}
	prec, err := core.LookupPrecision("fp16")
	if err != nil {
		t.Fatal(err)
	}
	p.Precision = prec
	r, err = Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := opEvents(r.Trace, "down", replay.PhaseForward), []int64{32_768, 65_536, -65_536, -32_768, -256}; !slices.Equal(got, want) {
		t.Errorf("fp16 down forward: %v, want %v", got, want)
	}
	bf16, err := core.LookupPrecision("bf16")
	if err != nil {
		t.Fatal(err)
	}
	p.Precision = bf16
	p.Model.NativeLoRA = true // a LitGPT model, run by Lightning
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), `quant="int8" runs in fp16 under Lightning's BitsandbytesPrecision`) {
		t.Errorf("int8 in bf16 under Lightning: %v", err)
	}
}

// Model FLOPs count the backward a step needs (core/model_flops.go): a
// frozen weight's gradient GEMM is not counted, its input-gradient GEMM
// is. tinyLM at 64 tokens: up and down are 2 x 64 x 256 x 512 =
// 16,777,216 FLOPs forward each, lm_head 2 x 64 x 256 x 1000 =
// 32,768,000. Freezing up (its input, the trainable embedding's output,
// still needs a gradient) drops one GEMM of up's forward; freezing lm_head
// one of its; both, both. Nothing else changes: every other op's inputs
// need the same gradients.
func TestModelFlopsFrozen(t *testing.T) {
	const up, head = 2 * 64 * 256 * 512, 2 * 64 * 256 * 1000
	model := func(freeze ...string) float64 {
		p := tinyPlan(t, tinyLM())
		p.Freeze = freeze
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r.FLOPs.Model
	}
	full := model()
	for _, c := range []struct {
		freeze []string
		less   float64
	}{
		{[]string{"up"}, up},
		{[]string{"lm_head"}, head},
		{[]string{"up", "lm_head"}, up + head},
	} {
		if got := full - model(c.freeze...); got != c.less {
			t.Errorf("freeze=%v: model FLOPs %v less than full training, want %v", c.freeze, got, c.less)
		}
	}
}
