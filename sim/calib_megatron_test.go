package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// megatronGPT is the "Llama2 7B" GPTModel of calibration.md B6 (Megatron-LM
// PR #482, tools/get_training_info): legacy Megatron GPT with the flags the
// tool supports (--bf16 --use-flash-attn --use-distributed-optimizer
// --swiglu) and Llama-2-7B sizes, so Megatron's defaults for the rest: 32
// layers of hidden 4096 and 32 heads, LayerNorm and linear biases, learned
// absolute positions (2048), the GPT-2 vocabulary of 50,257 padded to a
// multiple of 128*tp, output layer tied to the word embeddings, dropout
// 0.1 on the embeddings, attention and hidden states, and the SwiGLU
// hidden size Megatron derives, int(4h*2/3 / 64)*64 = 10,880. The tool's
// README prints this model as 6,642,245,632 parameters at tp=2.
func megatronGPT(tp int64) *core.Model {
	h := int64(4096)
	vocab := core.PadVocab(50257, tp)
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: h, Bias: true},
			&nn.Attention{Name: "self_attention", Dim: h, Heads: 32, QKVBias: true, OutBias: true, Impl: "flash", Causal: true, Dropout: 0.1, FusedQKV: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: h, Bias: true},
			&nn.MLP{Name: "mlp", Dim: h, Hidden: 10880, Act: "swiglu", Bias: true, Dropout: 0.1},
		}}},
	}}
	return &core.Model{Name: "megatron-gpt-7b", Layers: []core.Layer{
		&nn.Embedding{Name: "word_embeddings", Rows: vocab, Dim: h},
		&nn.AddEmbedding{Name: "position_embeddings", Rows: 2048, Dim: h, MaxSeq: 2048},
		&nn.Dropout{Name: "embedding_dropout", P: 0.1},
		&core.Repeat{Name: "layers", Layer: block, N: 32},
		&nn.Norm{Name: "final_layernorm", Dim: h, Bias: true},
	}, Vocab: vocab, TieEmbeddings: true}
}

// TestMegatronCalibration reproduces calibration.md B6: Megatron-LM's
// memory-analysis tool, measured torch.cuda.max_memory_allocated() on 8 x
// H800 (80 GB: an H100 with NVLink cut to 400 GB/s) after several
// iterations; bf16, flash attention, distributed optimizer, SwiGLU; seq
// 2048 (the tool's example script; the table does not say). The table's
// "GB" are GiB: Megatron's report_memory divides by 1024*1024 and the
// tool's per-layer figures are MiB (1320 "MB" per layer at b=4 is 41.25
// bytes per sbh element only in MiB).
//
// memsh lowers the step as current Megatron runs it (Megatron-Core with
// Transformer Engine's fused kernels, core/megatron_kernels.go) and lands
// 6-8 % below every row. The 2023 code the rows were measured with held
// three things more, all in the sources:
//   - the legacy flash-attention path (megatron/model/transformer.py,
//     ParallelAttention.forward) copies the kernel's output to [s, b, h]
//     with rearrange(...).contiguous() for the dense layer, which keeps
//     that copy while the kernel keeps its own output: 2*s*b*h/tp bytes
//     per layer and micro-batch in flight;
//   - its ParallelMLP ran --swiglu eagerly (the same file at cfbf55d, the
//     last commit before September 2023: swiglu(x) = F.silu(x[0]) * x[1]
//     on the chunks of the fc1 output), which also keeps silu(x[0]):
//     2*s*b*ffn/tp bytes per layer and micro-batch in flight, where
//     today's fused SwiGLU keeps only the fc1 output;
//   - _VocabParallelCrossEntropy then subtracted the max out of place
//     (vocab_parallel_logits = vocab_parallel_logits - logits_max...; now
//     an in-place -=), so the loss held an extra fp32 copy of the logits,
//     4 bytes per logit, on the stage with the loss.
//
// The terms are computed below from the shapes (not fitted): with them
// every row lands within 1 %, which is what the test asserts; the figure
// of today's kernels is logged.
func TestMegatronCalibration(t *testing.T) {
	const gib = 1 << 30
	for _, row := range []struct {
		mbs, gbs, dp, pp, tp int64
		measured             float64 // GiB
	}{
		{2, 2048, 8, 1, 1, 69.1},
		{4, 512, 4, 1, 2, 55.7},
		{2, 2048, 4, 2, 1, 49.8},
		{4, 128, 1, 1, 8, 28.8},
	} {
		m := megatronGPT(row.tp)
		micro := row.gbs / (row.mbs * row.dp)
		p := distPlan(t, m, "megatron", core.Parallelism{DP: row.dp, TP: row.tp, PP: row.pp, DistributedOptimizer: true, MicroBatches: micro})
		p.Batch, p.Seq, p.GradAccum = row.mbs, 2048, micro
		rep := evalPlan(t, p)
		got := float64(rep.PeakAllocated) / gib
		t.Logf("dp=%d pp=%d tp=%d mbs=%d: %.2f GiB with today's kernels, measured %.1f GiB (%+.1f %%)", row.dp, row.pp, row.tp, row.mbs, got, row.measured, 100*(got/row.measured-1))
		// The 2023 legacy terms on the fullest stage (the first).
		layers := int64(32) / row.pp
		inflight := min(row.pp, micro)
		rearrange := inflight * layers * 2 * 2048 * row.mbs * 4096 / row.tp
		swiglu := inflight * layers * 2 * 2048 * row.mbs * 10880 / row.tp
		var ce int64
		if row.pp == 1 {
			ce = 4 * 2048 * row.mbs * core.PadVocab(50257, row.tp) / row.tp
		}
		legacy := got + float64(rearrange+swiglu+ce)/gib
		if d := (legacy - row.measured) / row.measured; math.Abs(d) > 0.01 {
			t.Errorf("dp=%d pp=%d tp=%d mbs=%d: %.2f GiB with the 2023 terms, measured %.1f GiB (%+.1f %%)", row.dp, row.pp, row.tp, row.mbs, legacy, row.measured, 100*d)
		}
	}
}
