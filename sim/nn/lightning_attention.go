package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// LightningAttention is MiniMax-Text-01's linear attention ("lightning
// attention", MiniMax-01, arXiv:2501.08313) as transformers builds it
// (MiniMaxLightningAttention, the module self_attn of MiniMax's
// linear_attention layers; models/minimax/modeling_minimax.py at
// 5.25.0):
//
//	q, k, v = split(silu(qkv_proj(x)))            # heads x head_dim each, no rotary
//	o = the block loop below                       # a decay per head, slope_rate
//	out_proj(sigmoid(output_gate(x)) * norm(o))    # norm: Llama's RMSNorm, heads x head_dim wide
//
// The loop is plain PyTorch over blocks of block_size positions: each
// block's intra-block scores (q k^T) times the block's causal decay
// diagonal_decay, times v; plus q * query_decay times the running
// [head_dim, head_dim] state; the state then decays by exp(-slope_rate
// x block) and adds (k * key_decay)^T v. The decays are the module's
// buffers (slope_rate, query_decay, key_decay, diagonal_decay), made
// from the layer's index and the heads (get_slope_rate), cast with the
// model.
type LightningAttention struct {
	Name    string
	Dim     int64 // hidden_size
	Heads   int64 // num_attention_heads
	HeadDim int64 // head_dim, else hidden_size / num_attention_heads
	Block   int64 // block_size
}

func (a *LightningAttention) width() int64 { return a.Heads * a.HeadDim }

func (a *LightningAttention) Kind() string           { return "lightning_attention" }
func (a *LightningAttention) Label() string          { return a.Name }
func (a *LightningAttention) DefaultName() string    { return "self_attn" }
func (a *LightningAttention) Children() []core.Layer { return nil }
func (a *LightningAttention) InDim() int64           { return a.Dim }
func (a *LightningAttention) OutDim() int64          { return a.Dim }

// Params: qkv_proj, out_proj and output_gate (no biases) and norm's
// weight; the four decay buffers are no parameters.
func (a *LightningAttention) Params() int64 {
	w := a.width()
	return 3*a.Dim*w + w*a.Dim + a.Dim*w + w
}

func (a *LightningAttention) Summary() string {
	return fmt.Sprintf("dim %d, %d heads of %d, blocks of %d, transformers' torch loop", a.Dim, a.Heads, a.HeadDim, a.Block)
}

func (a *LightningAttention) Validate(path string) error {
	return checkPositive(path, sized{FieldDim, a.Dim}, sized{FieldHeads, a.Heads}, sized{FieldHeadDim, a.HeadDim}, sized{FieldChunk, a.Block})
}

// CheckLayout: tensor and context parallelism are not modelled
// (MiniMaxConfig's tp_plan names the softmax layers' projections only).
func (a *LightningAttention) CheckLayout(path string, par core.Parallelism) error {
	return recurrentLayout(path, par, "lightning attention", "the running state would have to pass between ranks")
}

func (a *LightningAttention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.Dim {
		panic(core.ShapeMismatch(b, "lightning_attention", a.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(a))()
	s := b.Shape(x)
	w := a.width()
	bd := b.Prec.Params
	b.Buffer("slope_rate", []int64{a.Heads, 1, 1}, bd, "each head's decay rate (nn.Buffer, cast with the model)")
	b.Buffer("query_decay", []int64{a.Heads, a.Block, 1}, bd, "exp(-slope_rate x position) over a block (nn.Buffer)")
	b.Buffer("key_decay", []int64{a.Heads, a.Block, 1}, bd, "exp(-slope_rate x (block_size - position)) over a block (nn.Buffer)")
	b.Buffer("diagonal_decay", []int64{1, a.Heads, a.Block, a.Block}, bd, "the causal decay within a block (nn.Buffer)")
	qkv := b.Linear("qkv_proj", core.RoleLinear, x, a.Dim, 3*w, false)
	act := b.Unary("silu", qkv, true, false)
	o := a.blocks(b, act, s)
	normed := b.RmsNorm("norm", o, w)
	gate := b.Linear("output_gate", core.RoleLinear, x, a.Dim, w, false)
	sig := b.Unary("sigmoid", gate, false, true)
	gated := b.Mul("gated", sig, normed)
	return b.Linear("out_proj", core.RoleLinear, gated, w, a.Dim, false)
}

// blocks lowers the loop over blocks of the sequence, from torch.split
// of the activated qkv to the [batch, seq, heads x head_dim] copy that
// norm reads (the blocks' outputs torch.cat'ed, transposed and
// reshaped). What autograd keeps, each block of c positions (the last
// one the sequence's rest), with bh = batch x heads and d = head_dim,
// measured with hf_block_saved.py (sim/minimax_test.go):
//
//   - q k^T's operands: matmul reshapes the 4-D block slices to bh
//     matrices, a copy each of q and of k^T (the slices are strided),
//     unless batch or heads is 1, where the reshape is a view and
//     matmul saves the activated qkv itself, once;
//   - the scores times diagonal_decay ([bh, c, c]) and v (a copy),
//     read by the next matmul;
//   - q * query_decay and the running state ([bh, d, d]) read by the
//     inter-block matmul; in the first block the state is torch.zeros,
//     which needs no gradient, so that matmul keeps the zeros alone;
//   - (k * key_decay)^T and v (copies, or the product itself when the
//     reshape is a view), read by the state's update, and the block's
//     exp(-slope_rate x c) ([heads, 1, 1], the buffers' dtype) that
//     multiplies a state needing a gradient: in every block but the
//     first and the last. The last block's update makes the state the
//     layer returns and the decoder layer drops: what it saves dies
//     with the forward (not kept).
//
// The products save the decay buffers themselves (diagonal_decay,
// query_decay and key_decay, slices of them), which memsh counts with
// the buffers, not as activations.
func (a *LightningAttention) blocks(b *core.Builder, act core.Value, s []int64) core.Value {
	i := b.AddOp("lightning_attention", "lightning_attention", []core.Value{act})
	dt := b.Dtype(act)
	seq := s[len(s)-2]
	batch := core.Rows(s) / max(seq, 1)
	bh, d, h := batch*a.Heads, a.HeadDim, a.Heads
	w := a.width()
	view := batch == 1 || h == 1 // matmul's reshape of a block slice is a view
	n := (seq + a.Block - 1) / a.Block
	var qk, scores, v, qDecayed, states, kDecayed, blockDecays int64
	flops := 0.0
	for blk := int64(0); blk < n; blk++ {
		c := min(a.Block, seq-blk*a.Block)
		flops += 4 * float64(bh*c*d) * float64(c+d)
		scores += c * c
		if !view {
			qk += 2 * c * d
			v += c * d
		}
		if blk > 0 {
			qDecayed += c * d
			states += d * d
		}
		if blk < n-1 {
			kDecayed += c * d
			if !view {
				v += c * d
			}
			if blk > 0 {
				blockDecays++
			}
		}
	}
	o := b.Out(i, "attn_output", core.WithLast(s, w), dt, "the blocks' outputs, concatenated and reshaped for norm")
	specs := []savedSpec{
		{"qk", []int64{bh, qk}, dt, "q and k^T of each block, reshaped (copied) for q k^T"},
		{"decayed_scores", []int64{bh, scores}, dt, "each block's q k^T times diagonal_decay, read with v"},
		{"v", []int64{bh, v}, dt, "v of each block, reshaped (copied) for its two matmuls"},
		{"state0", []int64{bh, d * d}, dt, "the zero state the first block's q * query_decay reads"},
		{"q_decayed", []int64{bh, qDecayed}, dt, "q * query_decay of each block after the first"},
		{"states", []int64{bh, states}, dt, "the running state each block after the first reads"},
		{"k_decayed", []int64{bh, kDecayed}, dt, "(k * key_decay)^T of each block but the last, read by the state's update"},
		{"block_decay", []int64{blockDecays, h}, b.Prec.Params, "exp(-slope_rate x block_size) of each block but the first and the last"},
	}
	var keep []savedSpec
	for _, sp := range specs {
		if core.Numel(sp.shape) > 0 {
			keep = append(keep, sp)
		}
	}
	saved := savedOuts(b, i, keep)
	if view {
		saved = append(saved, act)
	}
	b.Save(i, saved...)
	// The blocks' outputs, [batch, heads, seq, head_dim] together, live
	// until torch.cat copies them; the cat's output then lives until the
	// transposed reshape copies it into attn_output: one such tensor
	// beside the op's output either way. Backward, the gradient of the
	// cat's input likewise.
	all := dt.Bytes(batch * h * seq * d)
	b.Op(i).WorkF = all
	b.Op(i).WorkB = all
	b.Op(i).Flops = flops
	b.Op(i).Bytes += float64(b.Val(act).Bytes) + float64(b.Val(o).Bytes)
	return o
}
