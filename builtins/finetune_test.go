package builtins

import "testing"

func TestFinetuneBuiltins(t *testing.T) {
	runPreludeCases(t, `
m = model("tiny", embedding(1000, 64), mlp(64, 256), vocab = 1000)
p = train(m, seq = 128, precision = "bf16", gpu = "A100-80GB")
o = offload(optimizer = "cpu", activations = "cpu")
`, []evalCase{
		{expr: `o`, want: `offload(optimizer="cpu", activations="cpu")`},
		{expr: `o.params`, want: `None`},
		{expr: `offload(optimizer = "disk")`, err: `offload: unknown optimizer tier "disk" (known: cpu, nvme)`},
		{expr: `offload(params = 1)`, err: "offload: params must be None or a tier name (got int)"},
		// optimizer offload is ZeRO-Offload, through ZeRO only; on one GPU, zero=2: 18 B per parameter on the
		// host (fp32 master, two moments, fp32 grads, the bf16 staging copy) and the pinned bf16
		// temp_grad_buffer_for_cpu_offload of the largest parameter (the 1000 x 64 embedding), fp32 grads
		// down and bf16 params up
		{expr: `p.replace(offload = offload(optimizer = "cpu"))`, err: "runs through its ZeRO optimizer only"},
		{expr: `simulate(p.replace(parallel = parallel(zero = 2), offload = offload(optimizer = "cpu"))).host_memory == 18 * m.params + 2 * 1000 * 64`, want: "True"},
		{expr: `simulate(p.replace(parallel = parallel(zero = 2), offload = offload(optimizer = "cpu"))).traffic["pcie"] == 6 * m.params`, want: "True"},
		{expr: `simulate(p.replace(parallel = parallel(zero = 2), offload = o, host_memory = 1 * MiB))`, err: "offload needs"},
		{expr: `simulate(p.replace(freeze = ["embed"])).trainable_params == m.params - 64000`, want: "True"},
		{expr: `p.replace(freeze = [""])`, err: "freeze names must not be empty"},
		{expr: `p.replace(loss_chunks = 4).loss_chunks`, want: "4"},
		{expr: `p.replace(loss_chunks = -1)`, err: "loss_chunks must be positive"},
		{expr: `p.replace(loss_chunks = ("torchtitan", 4)).loss_chunks`, want: `("torchtitan", 4)`},
		{expr: `p.replace(loss_chunks = ("torchtitan", 0))`, err: `loss_chunks: a tuple is ("torchtitan", n): torchtitan's ChunkedLossWrapper with num_chunks n (its default 8), n a positive number (got 0)`},
		{expr: `p.replace(loss_chunks = ("liger", 4))`, err: `(got "liger" first)`},
		{expr: `p.replace(loss_chunks = ("torchtitan",))`, err: `(got ("torchtitan",), a tuple of 1)`},
		{expr: `simulate(p.replace(loss_chunks = ("torchtitan", 3)))`, err: "128 tokens a micro-batch do not split in 3 equal chunks"},
		{expr: `simulate(p.replace(loss_chunks = ("torchtitan", 4))).peak_allocated < simulate(p).peak_allocated`, want: "True"},
		{expr: `p.replace(quant = "nf4")`, err: "needs a frozen base"},
		{expr: `p.replace(quant_lm_head = True)`, err: "quant_lm_head=True needs quant="},
		{expr: `p.replace(quant_lm_head = 1)`, err: "quant_lm_head must be True or False"},
		{expr: `p.replace(quant = "nf4", freeze = ["all"], quant_from = fp16).quant_from`, want: "fp16"},
		{expr: `p.replace(tokens_per_batch = 64)`, err: "tokens_per_batch must hold at least one sequence"},
		// doc_tokens as the packed row's documents one by one: tokens_per_batch is their sum
		{expr: `simulate(p.replace(doc_tokens = [100, 156])).saved_activations == simulate(p.replace(tokens_per_batch = 256)).saved_activations`, want: "True"},
		{expr: `simulate(p.replace(doc_tokens = [100, 156])).saved_activations == simulate(p).saved_activations`, want: "False"},
		{expr: `p.replace(doc_tokens = [100, 0])`, err: "doc_tokens: every document's length must be positive (got 0)"},
		{expr: `p.replace(doc_tokens = [])`, err: "doc_tokens: an empty list of documents"},
		{expr: `p.replace(doc_tokens = ["a"])`, err: "doc_tokens element"},
		{expr: `simulate(train(model("a", embedding(1000, 64), attention(64, 4, impl = "sdpa"), vocab = 1000), seq = 64, doc_tokens = [64, 64], gpu = "A100-80GB"))`,
			err: "tokens_per_batch packs documents into one row, which needs flash attention's varlen kernel"},
		{expr: `simulate(p.replace(tokens_per_batch = 512, doc_tokens = [100, 156]))`, err: "doc_tokens: the documents' lengths sum to 256 tokens, the packed row holds tokens_per_batch=512"},
		{expr: `litgpt("Llama-2-7b-hf").params`, want: "6738415616"},
		{expr: `litgpt("llama-2-7b")`, err: `unknown LitGPT checkpoint "llama-2-7b"`},
		{expr: `litgpt("phi-1_5", adapter = "v3")`, err: `unknown adapter "v3"`},
	})
}
