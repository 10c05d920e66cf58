package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// maskBuffer registers GPT-Neo's per-layer causal mask (Attention.MaskBuffer;
// GPTNeoSelfAttention.__init__, models/gpt_neo/modeling_gpt_neo.py at
// transformers 5.25.0): torch.tril of a [max_positions, max_positions]
// bool matrix viewed [1, 1, P, P], XORed with its band below window_size
// in local layers, registered with persistent=False. It moves to the
// device with the model, one a layer, under eager and flash alike. Its
// _attn then runs
//
//	attn_weights = matmul(query.to(fp32), key.to(fp32).transpose(-1, -2))   # no scaling
//	attn_weights = torch.where(bias[:, :, k-q:k, :k], attn_weights, finfo.min)
//	attn_weights = attn_weights + attention_mask
//	softmax(attn_weights, -1).to(value.dtype)
//
// where saves its condition, a view of the buffer: the harness
// (tools/oracle/hf_block_saved.py) counts that storage once a layer
// among the saved tensors; memsh counts it with the buffers.
func (a *Attention) maskBuffer(b *core.Builder) {
	p := a.MaskBuffer
	b.Buffer("bias", []int64{1, 1, p, p}, units.BOOL,
		"GPT-Neo's causal (or local: banded) mask of max_position_embeddings a side, a non-persistent buffer of every layer")
}
