package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// DeepSpeed's low-precision master weights, measured. Source:
// deepspeedai/DeepSpeedExamples training/bf16_master_weight (README.md,
// train.py, configs/baseline.json and bf16_full.json at 45b4b715), the
// figures the DeepSpeed blog blogs/core_api_update/README.md repeats:
// 4 x H100, ZeRO-3, SimpleTransformerModel at hidden 4,096, 32 layers, 32
// heads, vocabulary 50,257 (GPT-2's tokenizer, --use_real_data), sequence
// 512, batch 1, every block checkpointed (torch.utils.checkpoint,
// use_reentrant=False), reduce_bucket_size 5e7,
// stage3_param_persistence_threshold 0, AdamW (DeepSpeed's FusedAdam).
//
//	baseline (bf16, fp32 master and moments):   allocated 25.74 GB, peak 31.38 GB
//	bf16_master_weights_and_grads + bf16_optimizer_states: 16.17 GB, 18.93 GB
//
// train.py prints torch.cuda.memory_allocated() after the last step
// ("allocated") and max_memory_allocated() ("peak"), in GiB (bytes /
// 1024^3, format_memory). memsh's allocated is what its replay holds at
// the end of the step (the blocks in use, Trace.Requested); it leaves out
// the loop's own `logits` (train.py keeps the last step's [1, 512,
// 50,257] bf16 logits alive: 51,463,168 B) and `loss`, which memsh does
// not replay (keep_logits frees them before the step). memsh lands at
// 25.71 and 16.13 GiB (-0.1 %, -0.3 %): the bf16 run's master partition
// is a clone of the bf16 one (core/zero_precision.go; were it aliased, as
// stage3.py's comment intends, 12.9 GiB). Peaks: 31.35 GiB (-0.1 %) in
// the step of the first ZeRO-3 sub-group (1e9 partition elements: its
// gradients flattened in bf16, 1.86 GiB, cast to fp32, 3.73 GiB), and
// 18.01 GiB (-4.9 %) for the bf16 run, whose step makes no second copy.
// Not replayed there: the torch_autocast section (layer_norm, softmax and
// the loss in fp32 over the bf16 model), overlap_comm's buffers, the
// logits the loop keeps into the next forward.
//
// The README's step times, 0.6016 s and 0.6427 s (train.py's time.time()
// around forward, backward and step, averaged after 5 warm-up steps),
// are a gap memsh keeps open (issue 20): it prices the step at 0.104 and
// 0.096 s (-83 %, -85 %), the GEMMs of one 512-token sequence per GPU,
// ZeRO-3's gathers and reductions by their bytes and the optimizer by
// its traffic. At this size the step is the host's: with
// stage3_param_persistence_threshold 0 ZeRO-3 fetches and releases every
// module through its Python hooks (195 modules a pass, three passes with
// the recompute) and reduces through 137 buckets of 5e7 elements, none
// of which memsh times; and the bf16 run's torch_autocast casts (the
// measured run is 7 % slower, memsh's 8 % faster for its lighter
// optimizer) are not replayed.
// go test ./sim -run TestCalibDeepSpeedBF16Master -v prints the figures.
func TestCalibDeepSpeedBF16Master(t *testing.T) {
	m := simpleTransformer()
	if got := m.Params(); got != 6_858_007_633 {
		t.Fatalf("SimpleTransformerModel has %d parameters, want 6,858,007,633 (README: 6.86 billion)", got)
	}
	const gib = 1 << 30
	full, _ := core.LookupPrecision("bf16-mixed")
	full.Master, full.States = units.BF16, units.BF16
	for _, c := range []struct {
		name            string
		prec            string
		lowPrecision    bool
		allocated, peak float64 // GiB, measured
		boundA, boundP  float64 // memsh's distance, a fraction
		step            float64 // seconds, measured
	}{
		{"baseline (fp32 master and moments)", "bf16-mixed", false, 25.74, 31.38, 0.005, 0.01, 0.6016},
		{"bf16 master, grads and optimizer states", "bf16-mixed", true, 16.17, 18.93, 0.005, 0.06, 0.6427},
	} {
		p := testmodels.LlamaPlan(m, 1, 512, c.prec, "full", "H100-80GB")
		if c.lowPrecision {
			p.Precision = full
		}
		p.Optimizer.Impl = "fused"
		p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 4}
		p.Parallel = core.Parallelism{DP: 4, Zero: 3,
			ReduceBucketSize:          core.ZeroSize{N: 50_000_000, Set: true},
			ParamPersistenceThreshold: core.ZeroSize{N: 0, Set: true}}
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		var end int64
		for _, b := range r.Trace.Requested {
			end += b
		}
		a, pk := float64(end)/gib, float64(r.PeakAllocated)/gib
		t.Logf("%s: allocated after the step %.2f GiB (measured %.2f, %+.1f %%), peak %.2f GiB (measured %.2f, %+.1f %%), master %d B",
			c.name, a, c.allocated, 100*(a/c.allocated-1), pk, c.peak, 100*(pk/c.peak-1), r.States.Master)
		if !within(a, c.allocated, c.boundA) {
			t.Errorf("%s: allocated after the step %.3f GiB, measured %.2f", c.name, a, c.allocated)
		}
		if !within(pk, c.peak, c.boundP) {
			t.Errorf("%s: peak %.3f GiB, measured %.2f", c.name, pk, c.peak)
		}
		st := r.Time.StepSeconds
		t.Logf("%s: step %.3f s (measured %.4f, %+.0f %%; the host's ZeRO-3 hooks not timed)", c.name, st, c.step, 100*(st/c.step-1))
		if st > c.step || st < c.step/8 {
			t.Errorf("%s: step %.3f s, measured %.4f: the gap the comment above explains has moved", c.name, st, c.step)
		}
		// The master partition: a clone in bf16 (2 B a partition element), fp32 otherwise.
		part := (m.Params() + 3) / 4
		want := 4 * part
		if c.lowPrecision {
			want = 2 * part
		}
		if !within(float64(r.States.Master), float64(want), 1e-6) {
			t.Errorf("%s: master partition %d B, want %d", c.name, r.States.Master, want)
		}
	}
}

// simpleTransformer is DeepSpeedExamples' SimpleTransformerModel
// (training/bf16_master_weight/train.py at 45b4b715) at the README's
// size: token and learned position embeddings, 32 post-norm blocks of
// nn.MultiheadAttention (fused in_proj with bias, out_proj with bias; its
// need_weights=True default runs the explicit softmax) and a GELU MLP,
// each block checkpointed, and output_proj with a bias. No final norm.
func simpleTransformer() *core.Model {
	const h, vocab = 4096, 50257
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &nn.Attention{Name: "attention", Dim: h, Heads: 32, QKVBias: true, OutBias: true, Impl: "eager", FusedQKV: true}},
		&nn.Norm{Name: "norm1", Dim: h, Bias: true},
		&core.Residual{Layer: &nn.MLP{Name: "ff", Dim: h, Hidden: 4 * h, Act: "gelu", Bias: true}},
		&nn.Norm{Name: "norm2", Dim: h, Bias: true},
	}}
	return &core.Model{
		Name: "SimpleTransformerModel",
		Layers: []core.Layer{
			&nn.Embedding{Name: "embedding", Rows: vocab, Dim: h},
			&nn.AddEmbedding{Name: "pos_embedding", Rows: 512, Dim: h, MaxSeq: 512},
			&core.Repeat{Name: "layers", Layer: block, N: 32},
		},
		Vocab: vocab, Loss: "cross_entropy", HeadBias: true, HeadName: "output_proj",
	}
}
