package nn

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// KVCompressor is DeepSeek-V4's key-value compressor (compressor of a
// DeepseekV4Attention, modeling_deepseek_v4.py at transformers 5.25.0),
// which adds one compressed entry per Rate tokens to a layer's keys:
//
//	kv, gate = kv_proj(x), gate_proj(x)             # [T, w]: w = head_dim, or 2 x head_dim with Overlap
//	windows of Rate tokens: softmax(gate + position_bias, over the window, fp32) * kv, summed
//	entry = rope(kv_norm(sum))                      # [B, S / Rate, head_dim], kv_norm kept fp32
//
// Heavily compressed attention (HCA, DeepseekV4HCACompressor: rate
// compress_rates["heavily_compressed_attention"], 128 in the
// checkpoints) attends to every causally visible entry. Compressed sparse
// attention (CSA, DeepseekV4CSACompressor: rate 4) overlaps its windows
// (Overlap: each entry pools the previous window's first half-width
// series and its own second, 2 x Rate slots of [B, S / Rate, 2 Rate,
// head_dim] laid out anew) and keeps only the Indexer's top entries per
// query (a block bias of -inf elsewhere). position_bias is kept in fp32
// (_keep_in_fp32_modules_strict), so in a 16-bit model the gate and its
// softmax are fp32.
type KVCompressor struct {
	Rate    int64 // compress rate
	HeadDim int64
	Overlap bool
	Indexer *V4Indexer // CSA's lightning indexer; nil for HCA
}

// V4Indexer is CSA's lightning indexer (DeepseekV4Indexer): its own
// overlapping compressor at HeadDim, its queries from the q latent
// (q_b_proj), scores relu(q . k) weighted per head by weights_proj and the
// top TopK entries per query. It runs with autograd on, but no gradient
// reaches it (its output is the top-k indices): what its ops save lives
// until it returns, beside its locals, and then dies with its graph; its
// weights get no gradient (core.Builder.DeadGraph).
type V4Indexer struct {
	Heads   int64 // index_n_heads
	HeadDim int64 // index_head_dim
	TopK    int64 // index_topk
}

func (c *KVCompressor) width() int64 {
	if c.Overlap {
		return 2 * c.HeadDim
	}
	return c.HeadDim
}

// entries is the number of compressed entries a forward of seq tokens
// makes: one per complete window.
func (c *KVCompressor) entries(seq int64) int64 { return seq / c.Rate }

// params counts kv_proj, gate_proj, position_bias and kv_norm, and the
// indexer's (its compressor's, q_b_proj and weights_proj).
func (c *KVCompressor) params(dim, qLora int64) int64 {
	w := c.width()
	n := 2*dim*w + c.Rate*w + c.HeadDim
	if ix := c.Indexer; ix != nil {
		n += 2*dim*2*ix.HeadDim + c.Rate*2*ix.HeadDim + ix.HeadDim + qLora*ix.Heads*ix.HeadDim + dim*ix.Heads
	}
	return n
}

func (c *KVCompressor) summary() string {
	if ix := c.Indexer; ix != nil {
		return fmt.Sprintf("compressed sparse (one entry per %d tokens, overlapping; indexer %d heads x %d, top %d)", c.Rate, ix.Heads, ix.HeadDim, ix.TopK)
	}
	return fmt.Sprintf("heavily compressed (one entry per %d tokens)", c.Rate)
}

func (c *KVCompressor) validate(path string, ropeDim int64) error {
	if err := core.Positive(path, "compress rate", c.Rate); err != nil {
		return err
	}
	if ix := c.Indexer; ix != nil {
		for _, f := range []struct {
			name string
			n    int64
		}{{"indexer heads", ix.Heads}, {"indexer head dim", ix.HeadDim}, {"indexer top-k", ix.TopK}} {
			if err := core.Positive(path, f.name, f.n); err != nil {
				return err
			}
		}
		if ix.HeadDim < ropeDim {
			return units.Errorf(path, "the indexer head dim (%d) is less than the rope dim (%d) its rope rotates", ix.HeadDim, ropeDim)
		}
	}
	return nil
}

// lower runs the compressor on the layer's input x [B, S, dim] (and the q
// latent qr for the indexer): the compressed entries [B, S / Rate,
// head_dim] and the block bias [B, 1, S, S / Rate] the attention's mask
// joins (no gradient). With no complete window it returns NoValue for
// both (the projections still run).
func (c *KVCompressor) lower(b *core.Builder, x, qr core.Value, dim, qLora, ropeDim, batch, seq int64) (core.Value, core.Value) {
	defer b.Scope("compressor")()
	dt := b.Dtype(x)
	n := c.entries(seq)
	comp, locals := compressWindows(b, x, dim, c.HeadDim, ropeDim, c.Rate, c.Overlap, batch, n)
	// The forward's locals (the projections, the laid-out windows, the
	// rotary's cos and sin) live until it returns, after its indexer.
	defer b.KeepAlive("compressor_locals", locals...)
	if n == 0 {
		if ix := c.Indexer; ix != nil {
			ix.idleParams(b, dim, qLora, c.Rate)
		}
		return core.NoValue, core.NoValue
	}
	var ins []core.Value
	width := n
	if ix := c.Indexer; ix != nil {
		ins = append(ins, ix.lower(b, x, qr, dim, qLora, ropeDim, c.Rate, batch, seq))
		width = n + 1 // new_full(.., compressed_len + 1), scattered, then sliced
	}
	i := b.AddOp("block_bias", "block_bias", ins)
	bias := b.Out(i, "block_bias", []int64{batch, 1, seq, width}, dt, "the compressed entries each query may see (0) or not (-inf)")
	b.Val(bias).Grad = false
	b.Op(i).NoGradB = true
	return comp, bias
}

// compressWindows lowers the pooling shared by the compressors and the
// indexer's: kv_proj and gate_proj over x, windows of rate tokens
// softmax-pooled, kv_norm, rope at the windows' positions. It returns
// [B, n, headDim] in x's dtype (NoValue when n is 0) and the forward's
// locals that live until it returns (kv, gate, the biased gate, the
// laid-out windows, the rotary's cos and sin).
func compressWindows(b *core.Builder, x core.Value, dim, headDim, ropeDim, rate int64, overlap bool, batch, n int64) (core.Value, []core.Value) {
	dt := b.Dtype(x)
	w := headDim
	if overlap {
		w = 2 * headDim
	}
	kv := b.Linear("kv_proj", core.RoleK, x, dim, w, false)
	gate := b.Linear("gate_proj", core.RoleK, x, dim, w, false)
	pb := fp32Param(b, "position_bias", []int64{rate, w}, core.RoleNorm)
	if n == 0 {
		// No complete window: neither the pooling nor kv_norm runs, but
		// the module holds their parameters whatever the sequence
		// (DeepseekV4Compressor's named_parameters()); no gradient
		// reaches them.
		norm := func() int32 {
			defer b.Scope("kv_norm")()
			return fp32Param(b, "weight", []int64{headDim}, core.RoleNorm)
		}()
		b.P.Params[pb].Trainable, b.P.Params[norm].Trainable = false, false
		return core.NoValue, []core.Value{kv, gate}
	}
	gdt := units.FP32 // gate + the fp32 position_bias
	win := []int64{batch, n, rate, w}
	gi := b.AddOp("add", "gate_bias", []core.Value{gate}, pb)
	g := b.Out(gi, "gate_biased", win, gdt, "the gate plus position_bias (fp32)")
	locals := []core.Value{kv, gate, g}
	kvw := kv
	slots := rate
	if overlap {
		// new_kv zeros and new_gate -inf [B, n, 2 rate, head_dim], the
		// two series copied into their halves (CopySlices: nothing saved).
		slots = 2 * rate
		lay := []int64{batch, n, slots, headDim}
		kvw = b.Ew("copy_slices", "new_kv", []core.Value{kv}, lay, dt, "each window's two series laid out side by side (zeros, then slices copied in)")
		g = b.Ew("copy_slices", "new_gate", []core.Value{g}, lay, gdt, "the gates laid out alike (-inf, then slices copied in)")
		locals = append(locals, kvw, g)
	}
	pooled := []int64{batch, n, slots, headDim}
	sm := b.AddOp("softmax", "window_softmax", []core.Value{g})
	p := b.Out(sm, "window_weights", pooled, units.FP32, "softmax over each window (fp32, saved)")
	b.Save(sm, p)
	pc := b.Cast(p, dt, "the window weights in the kv's dtype")
	m := b.AddOp("mul", "weighted", []core.Value{kvw, pc})
	prod := b.Out(m, "weighted", pooled, dt, "kv times the window weights")
	b.Save(m, kvw, pc)
	b.Op(m).Flops = float64(core.Numel(pooled))
	sum := b.Ew("sum", "pooled", []core.Value{prod}, []int64{batch, n, headDim}, dt, "one entry per window")
	normed := keptNorm(b, "kv_norm", sum, headDim)
	// The compressor's rotary at the windows' positions: cos and sin
	// [B, n, rope / 2], new every call.
	// positions = arange(n) * rate + first_window_position: an int64
	// local.
	pi := b.AddOp("arange", "positions", nil)
	pos := b.Out(pi, "positions", []int64{n}, units.INT64, "the windows' positions (a local of the forward)")
	b.Op(pi).NoGradB = true
	tables := positionTables(b, "rotary_emb", dt, batch, n, ropeDim)
	return v4Rope(b, "compressed", normed, tables, n, ropeDim, batch), append(locals, append(tables, pos)...)
}

// positionTables are a rotary_emb's cos and sin for rows x n positions,
// [rows, n, rope / 2] in dt, made by this call.
func positionTables(b *core.Builder, module string, dt units.DType, rows, n, ropeDim int64) []core.Value {
	i := b.AddOp("rope_tables", module, nil)
	cos := b.Out(i, "cos", []int64{rows, n, ropeDim / 2}, dt, "cos at the positions of this call")
	sin := b.Out(i, "sin", []int64{rows, n, ropeDim / 2}, dt, "sin at the positions of this call")
	b.Val(cos).Grad, b.Val(sin).Grad = false, false
	b.Op(i).NoGradB = true
	return []core.Value{cos, sin}
}

// lower runs the indexer as a dead graph (V4Indexer's doc): its top-k
// indices [B, S, k] int64.
func (ix *V4Indexer) lower(b *core.Builder, x, qr core.Value, dim, qLora, ropeDim, rate, batch, seq int64) core.Value {
	defer b.DeadGraph("indexer_graph")() // recorded, but no gradient reaches it
	defer b.Scope("indexer")()
	n := seq / rate
	h, d := ix.Heads, ix.HeadDim
	ckv, locals := compressWindows(b, x, dim, d, ropeDim, rate, true, batch, n)
	q := b.Linear("q_b_proj", core.RoleLinear, qr, qLora, h*d, false)
	tables := positionTables(b, "rotary_emb", b.Dtype(q), 1, seq, ropeDim)
	q = v4Rope(b, "q", q, tables, seq, ropeDim, 1)
	sum := ix.score(b, x, q, ckv, dim, batch, seq, n)
	mi := b.AddOp("masked_fill", "masked_index_scores", []core.Value{sum})
	masked := b.Out(mi, "masked_index_scores", []int64{batch, seq, n}, units.FP32, "index scores with future entries at -inf")
	future := b.Out(mi, "future_mask", []int64{batch, seq, n}, units.BOOL, "the entries past each query's causal threshold (saved by masked_fill)")
	b.Save(mi, future)
	k := min(ix.TopK, n)
	tk := b.AddOp("topk", "topk", []core.Value{masked})
	b.Out(tk, "topk_values", []int64{batch, seq, k}, units.FP32, "top-k index scores (dropped)")
	idx := b.Out(tk, "topk_indices", []int64{batch, seq, k}, units.INT64, "the top-k entries per query")
	b.Save(tk, idx)
	valid := b.Ew("where", "valid_indices", []core.Value{idx}, []int64{batch, seq, k}, units.INT64, "picks past the causal threshold replaced by -1")
	// The forward's locals live until it returns: its compressor's, the
	// rotary's cos and sin, q and the compressed keys.
	b.KeepAlive("indexer_locals", append(locals, append(tables, q, ckv)...)...)
	return valid
}

// idleParams registers the indexer's parameters where it does not run (no
// complete window: lower returns before it), as named_parameters() holds
// them whatever the sequence: kv_proj and gate_proj (2 x head_dim wide,
// the overlapping windows), position_bias and kv_norm kept fp32,
// q_b_proj and scorer.weights_proj, none with a gradient.
func (ix *V4Indexer) idleParams(b *core.Builder, dim, qLora, rate int64) {
	defer b.DeadGraph("indexer_graph")()
	defer b.Scope("indexer")()
	w := 2 * ix.HeadDim
	weight := func(path string, shape []int64, role core.Role) {
		for _, s := range strings.Split(path, ".") {
			defer b.Scope(s)()
		}
		b.Param("weight", shape, role)
	}
	weight("kv_proj", []int64{w, dim}, core.RoleK)
	weight("gate_proj", []int64{w, dim}, core.RoleK)
	fp32Param(b, "position_bias", []int64{rate, w}, core.RoleNorm)
	func() { defer b.Scope("kv_norm")(); fp32Param(b, "weight", []int64{ix.HeadDim}, core.RoleNorm) }()
	weight("q_b_proj", []int64{ix.Heads * ix.HeadDim, qLora}, core.RoleLinear)
	weight("scorer.weights_proj", []int64{ix.Heads, dim}, core.RoleLinear)
}

// score is DeepseekV4IndexerScorer (scorer): relu(q.float() @
// k.float()^T) * head_dim^-0.5, weighted per head by weights_proj(x) *
// heads^-0.5 and summed over the heads: [B, S, n] fp32.
func (ix *V4Indexer) score(b *core.Builder, x, q, ckv core.Value, dim, batch, seq, n int64) core.Value {
	defer b.Scope("scorer")()
	h, d := ix.Heads, ix.HeadDim
	qf := b.Cast(q, units.FP32, "q.float()")
	kf := b.Cast(ckv, units.FP32, "the compressed keys .float()")
	plane := []int64{batch, seq, h, n}
	mm := b.AddOp("matmul", "scores", []core.Value{qf, kf})
	scores := b.Out(mm, "scores", plane, units.FP32, "indexer scores, every query x entry x index head (fp32)")
	b.Op(mm).Flops = 2 * float64(batch*seq) * float64(h) * float64(n) * float64(d)
	qb, kb := qf, kf
	if batch > 1 {
		// [B, S, h, d] @ [B, 1, d, n]: matmul folds (B, S) by reshape,
		// which copies q (a transposed view of the rope's head-major
		// output) and the keys expanded over the queries when B > 1; bmm
		// keeps both copies.
		qb = b.Out(mm, "q_folded", []int64{batch * seq, h, d}, units.FP32, "q folded for bmm (matmul's reshape of a transposed view copies)")
		kb = b.Out(mm, "keys_expanded", []int64{batch * seq, d, n}, units.FP32, "the compressed keys expanded to every query (matmul's reshape copies)")
	}
	b.Save(mm, qb, kb)
	relu := b.Unary("relu", scores, false, true)
	scaled := b.Ew("mul", "scaled_scores", []core.Value{relu}, plane, units.FP32, "relu(scores) * softmax_scale")
	wts := b.Linear("weights_proj", core.RoleLinear, x, dim, h, false)
	wf := b.Cast(wts, units.FP32, "weights_proj(x).float()")
	wsc := b.Ew("mul", "weights", []core.Value{wf}, core.WithLast(b.Shape(wf), h), units.FP32, "weights * heads^-0.5")
	prod := b.Mul("weighted_scores", scaled, wsc)
	return b.Ew("sum", "index_scores", []core.Value{prod}, []int64{batch, seq, n}, units.FP32, "index scores per query and entry")
}
