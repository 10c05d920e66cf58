package core

import "github.com/memsh/memsh/sim/units"

// Quantized frozen base weights, as bitsandbytes stores and runs them
// (Linear4bit / Linear8bitLt, used by Lightning Fabric's
// BitsandbytesPrecision and by transformers' load_in_4bit / load_in_8bit).
// Sources: the 4-bit schemes, bitsandbytes 0.41.1 (commit 18e827d6)
// functional.py quantize_4bit, dequantize_4bit, quantize_blockwise,
// get_4bit_type; autograd/_functions.py MatMul4Bit; nn/modules.py
// Linear4bit. int8, bitsandbytes 0.50.2 (the release of 2026; LLM.int8 was
// rewritten in 0.45 without igemmlt's col32 layouts): autograd/_functions.py
// MatMul8bitLt, backends/cuda/ops.py and backends/default/ops.py
// (int8_vectorwise_quant, int8_mixed_scaled_mm, int8_scaled_mm,
// int8_linear_matmul, int8_mm_dequant), nn/modules.py Int8Params.
//
// Which linears are quantized: every nn.Linear (attention, MLP, the
// experts and router of an MoE whose experts are nn.Linear modules) whose
// weight is frozen: transformers' replace_with_bnb_linear converts every
// nn.Linear but the output head (integrations/bitsandbytes.py,
// get_keys_to_not_convert), so Mixtral's router (an nn.Linear named gate)
// is quantized too. Weights that are parameters rather than nn.Linear
// modules keep their dtype: fused 3-D experts (bitsandbytes issue #1849:
// transformers 5's fused experts are skipped and stay in 16 bit) and
// parameter routers (DeepSeek, gpt-oss, Megatron). lm_head only with Plan.QuantLMHead:
// Lightning's BitsandbytesPrecision patches torch.nn.Linear while the
// model is built, so LitGPT's lm_head is quantized too; transformers keeps
// the output head in 16 bit (get_keys_to_not_convert). Embeddings, norms
// and biases stay in the params dtype.

// QuantSchemes lists the known schemes.
func QuantSchemes() []string { return []string{"nf4", "nf4-dq", "int8", "torchao-nf4"} }

const (
	nf4Block  = 64  // quantize_4bit blocksize (Params4bit default)
	dqBlock   = 256 // compress_statistics: quantize_blockwise(absmax, blocksize=256)
	nf4Code   = 16  // get_4bit_type: 16 fp32 values, a new device tensor per quantized weight
	fp32Bytes = 4
)

// quantStorage is the device storage of one quantized weight of shape
// [out, in]: each entry is one allocation.
//
//	nf4     packed 4-bit codes (n+1)/2 B (uint8), absmax fp32 per 64 values,
//	        the 16-value nf4 code table (fp32)
//	nf4-dq  as nf4 with the absmax quantized to uint8 (1 B per 64 values),
//	        a second-level fp32 absmax per 256 blocks, the fp32 offset
//	        (absmax.mean(), a 0-dim device tensor)
//	int8    LLM.int8 with frozen weights (has_fp16_weights=False): the int8
//	        weight CB, row-major, and SCB, one fp32 scale per row
//	        (Int8Params, int8_vectorwise_quant)
func QuantStorage(scheme string, shape []int64) []StateTensor {
	n := Numel(shape)
	blocks := divUp(n, nf4Block)
	switch scheme {
	case "nf4":
		return []StateTensor{{"nf4 codes", (n + 1) / 2}, {"absmax", fp32Bytes * blocks}, {"nf4 code table", fp32Bytes * nf4Code}}
	case "nf4-dq":
		return []StateTensor{{"nf4 codes", (n + 1) / 2}, {"quantized absmax", blocks},
			{"absmax of absmax", fp32Bytes * divUp(blocks, dqBlock)}, {"absmax offset", fp32Bytes}, {"nf4 code table", fp32Bytes * nf4Code}}
	case "int8":
		rows, cols := shape[0], int64(1)
		if len(shape) > 1 {
			cols = Numel(shape[1:])
		}
		return []StateTensor{{"int8 weight", rows * cols}, {"SCB row scales", fp32Bytes * rows}}
	case "torchao-nf4":
		return torchaoStorage(shape) // quant_shard.go
	}
	return nil
}

func divUp(a, b int64) int64 { return (a + b - 1) / b }

// quantBytes is the total device storage of one quantized weight.
func QuantBytes(scheme string, shape []int64) int64 {
	var n int64
	for _, s := range QuantStorage(scheme, shape) {
		n += s.Bytes
	}
	return n
}

// Quantizes reports whether a frozen linear of this role would be stored
// quantized by the plan (layers that decide their own storage ask it).
func (b *Builder) Quantizes(role Role) bool { return b.quantizes(role) }

// quantizes reports whether a linear of this role is stored quantized
// (decided before its weight is registered: the weight must be frozen).
func (b *Builder) quantizes(role Role) bool {
	ft := b.Ft
	if ft == nil || ft.quant == "" || role == RoleLoRA || role == RoleAdapter || role == RoleConv || role == RoleConvLeaf {
		return false
	}
	if role == RoleLMHead && !ft.quantHead {
		return false
	}
	return true
}

// quantLinear lowers a frozen linear stored quantized. It returns ok=false
// (and adds nothing) when the plan does not quantize this layer, so that
// linear() falls through to the plain nn.Linear lowering.
//
// Forward (MatMul4Bit.forward): dequantize_4bit materialises the whole
// weight in the dtype it was quantized from, .to(A.dtype) copies it to
// the compute dtype when they differ, F.linear runs, both copies are
// freed. The input A is kept for backward (ctx.tensors = (A, B)) whenever
// it requires grad, even though the weight gets no gradient; a plain
// frozen nn.Linear keeps nothing. Backward dequantizes the weight again
// for grad_A (a transient, not saved). nf4-dq first dequantizes the
// absmax to fp32 (dequantize_blockwise), another transient.
//
// int8 (MatMul8bitLt, bitsandbytes 0.50.2, the weight frozen): the input
// A, in its own dtype, is cast to fp16 (a copy unless it is fp16) and
// quantized row-wise (int8_vectorwise_quant: CA int8 and SCA fp32 per
// row; with transformers' llm_int8_threshold of 6.0 the outlier test
// |A| >= 6 makes an fp16 abs and a bool mask of A's size); the copy goes
// when the call returns. int8_linear_matmul writes an int32 result,
// int8_mm_dequant an fp16 one, and .to(A.dtype) the output (the fp16 one
// is the output for an fp16 A). A is kept for backward (ctx.tensors; no
// column-wise CAt while the weight is frozen). The backward copies CB to
// A's dtype and scales it in place (SCB / 127, an fp32 column), then
// grad_output @ CB. Outlier columns depend on the data: memsh takes none
// (their subA, A's columns over the threshold kept for backward, and the
// output's addmm copy are left out; a handful of columns in trained
// models).
func (b *Builder) quantLinear(name string, role Role, x Value, in, out int64, bias bool) (Value, bool) {
	if !b.quantizes(role) {
		return NoValue, false
	}
	defer b.Scope(name)()
	w, params := b.LinearParams(role, in, out, bias)
	if b.P.Params[w].Trainable {
		panic(LowerError{&units.Error{Path: b.Name(""), Msg: "this linear is trainable but quant=" + b.Ft.quant + " stores it quantized: bitsandbytes quantized weights cannot be trained",
			Hint: "freeze it (freeze=[...]) or train adapters (lora=...)"}})
	}
	b.P.Params[w].Quant = b.Ft.quant
	xin := b.Cast(x, b.Prec.Compute, "input cast to the bitsandbytes compute dtype")
	y := b.quantMatmul(w, params, xin, in, out)
	if b.Ft.quant != "int8" {
		// Linear4bit.forward: out = matmul_4bit(...); out.to(inp_dtype)
		y = b.Cast(y, b.Dtype(x), "4-bit linear output cast back to its input's dtype (Linear4bit.forward)")
	}
	return b.quantAdapter(role, x, y, in, out), true
}

// linearParams registers a linear's weight (and bias).
func (b *Builder) LinearParams(role Role, in, out int64, bias bool) (int32, []int32) {
	w := b.Param("weight", []int64{out, in}, role)
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{out}, role))
	}
	return w, params
}

// quantMatmul applies the quantized weight w to xin (already in the
// compute dtype): the ops of one MatMul4Bit or MatMul8bitLt call.
func (b *Builder) quantMatmul(w int32, params []int32, xin Value, in, out int64) Value {
	dt := b.Prec.Compute
	scheme := b.P.Params[w].Quant
	wshape := []int64{out, in}
	n := out * in
	tokens := Rows(b.Shape(xin))
	if scheme == "int8" {
		return b.int8Matmul(params, xin, in, out)
	}
	from := b.Ft.quantFrom
	var stats int64
	if scheme == "nf4-dq" {
		stats = units.FP32.Bytes(divUp(n, nf4Block)) // absmax dequantized to fp32 before the weight
	}
	d := b.AddOp("dequantize", "dequantize_4bit", nil, w)
	wq := b.Out(d, "weight."+from.Name(), wshape, from, "weight dequantized by dequantize_4bit (the dtype it was quantized from)")
	b.Val(wq).Cat, b.Val(wq).Grad = CatTemporaries, false
	b.Op(d).WorkF = stats
	b.Op(d).Bytes = float64(QuantBytes(scheme, wshape) + from.Bytes(n))
	wc := wq
	if from != dt {
		c := b.AddOp("cast", "to_"+dt.Name(), []Value{wq})
		wc = b.Out(c, "weight."+dt.Name(), wshape, dt, "dequantized weight copied to the compute dtype (.to(A.dtype))")
		b.Val(wc).Cat, b.Val(wc).Grad = CatTemporaries, false
		b.Op(c).Bytes += float64(b.Val(wq).Bytes)
	}
	i := b.AddOp("matmul", "", []Value{xin, wc}, params...)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, "output of 4-bit linear "+b.Name(""))
	if b.Grad(xin) && scheme != "torchao-nf4" {
		b.Save(i, xin) // ctx.tensors = (A, B); torchao's linear_nf4 keeps only the weight
	}
	// backward: dequantize_4bit again (plus the fp32 absmax for nf4-dq), .to(grad dtype)
	work := stats + from.Bytes(n)
	if from != dt {
		work += dt.Bytes(n)
	}
	b.Op(i).WorkB = work
	b.Op(i).Flops = 2 * float64(tokens) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(n))
	return y
}

// quantAdapter adds the LoRA branch when the role is targeted; PEFT's
// bnb LoRA layer feeds the adapter the layer's input as it came
// (lora_A(dropout(x)), x before the compute-dtype cast). Unlike
// lora.Linear it casts the update, not the sum, back to the base output's
// dtype (peft/tuners/lora/bnb.py, Linear4bit and Linear8bitLt.forward:
// output = output.to(expected_dtype) without autocast), so the add is in
// the base's dtype.
func (b *Builder) quantAdapter(role Role, x, y Value, in, out int64) Value {
	if !b.adapts(role) {
		return y
	}
	defer b.Scope("lora")()
	u := b.Cast(b.loraUpdate(x, in, out), b.Dtype(y), "the LoRA update cast to the base output's dtype")
	return b.Add("lora_sum", y, u)
}

func QuantDType(scheme string) units.DType {
	if scheme == "int8" {
		return units.INT8
	}
	return units.NF4
}

// IdleLinear registers the parameters of a linear the step does not run
// (an expert no token was routed to: the weights exist, no op reads them)
// as Linear would: the weight quantized when the plan quantizes it, and
// the LoRA adapter when its role is targeted.
func (b *Builder) IdleLinear(name string, role Role, in, out int64, bias bool) {
	defer b.Scope(name)()
	first := len(b.P.Params)
	defer func() {
		for pi := first; pi < len(b.P.Params); pi++ {
			b.P.Params[pi].Unrouted = true
		}
	}()
	w, _ := b.LinearParams(role, in, out, bias)
	if b.quantizes(role) {
		if b.P.Params[w].Trainable {
			panic(LowerError{&units.Error{Path: b.Name(""), Msg: "this linear is trainable but quant=" + b.Ft.quant + " stores it quantized: bitsandbytes quantized weights cannot be trained",
				Hint: "freeze it (freeze=[...]) or train adapters (lora=...)"}})
		}
		b.P.Params[w].Quant = b.Ft.quant
	}
	b.adapterParams(role, in, out)
}

// IdleAdapter registers, inside a linear's scope, the LoRA adapter PEFT
// gives it when its role is targeted, for a linear whose module the
// forward bypasses (it reads the weight itself: Gemma 3n's clamped
// correction_coefs, LongCat-Flash's router classifier): the adapter
// exists, no op reads it, so it never gets a gradient (LongCat's
// classifier adapters' .grad is None after the backward, transformers
// 5.25.0, peft 0.21.2) and torch.optim's AdamW, which makes a
// parameter's state at its first gradient, keeps none for it (replay's
// gradlessParams).
func (b *Builder) IdleAdapter(role Role, in, out int64) {
	b.adapterParams(role, in, out)
}

// adapterParams registers lora_A and lora_B of a linear of role when LoRA
// targets it.
func (b *Builder) adapterParams(role Role, in, out int64) {
	if !b.adapts(role) {
		return
	}
	defer b.Scope("lora")()
	for _, a := range []struct {
		name    string
		in, out int64
	}{{"lora_A", in, b.Lora.Rank}, {"lora_B", b.Lora.Rank, out}} {
		done := b.Scope(a.name)
		b.AdapterParam("weight", []int64{a.out, a.in}, RoleLoRA)
		done()
	}
}

// int8Matmul is MatMul8bitLt's forward of xin by the frozen int8 weight
// (quantLinear's comment): int8_vectorwise_quant, then the int8 GEMM and
// its dequantization into xin's dtype.
func (b *Builder) int8Matmul(params []int32, xin Value, in, out int64) Value {
	dt := b.Dtype(xin)
	tokens := Rows(b.Shape(xin))
	q := b.AddOp("int8_vectorwise_quant", "quant_input", []Value{xin})
	b.Op(q).NoGradB = true
	ca := b.Out(q, "CA", b.Shape(xin), units.INT8, "the input quantized row-wise to int8 (int8_vectorwise_quant)")
	sca := b.Out(q, "SCA", []int64{tokens}, units.FP32, "the input's row scales")
	b.Val(sca).Grad = false
	var work []int64
	if dt != units.FP16 {
		work = append(work, units.FP16.Bytes(tokens*in)) // A.to(torch.float16)
	}
	work = append(work, units.FP16.Bytes(tokens*in), units.BOOL.Bytes(tokens*in)) // A.abs() >= threshold
	b.Op(q).Work = &WorkTensors{F: work}
	for _, w := range work {
		b.Op(q).WorkF += w
	}
	b.Op(q).Syncs = 1 // outliers.any(), argwhere: the host reads them
	i := b.AddOp("int8_matmul", "", []Value{xin, ca, sca}, params...)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, "output of int8 linear "+b.Name(""))
	if b.Grad(xin) {
		b.Save(i, xin) // ctx.tensors = (CAt None, subA, A)
	}
	op := b.Op(i)
	work = []int64{units.INT32.Bytes(tokens * out)} // int8_linear_matmul
	if dt != units.FP16 {
		work = append(work, units.FP16.Bytes(tokens*out)) // int8_mm_dequant's fp16 result, then .to(dtype)
	}
	op.Work = &WorkTensors{F: work}
	for _, w := range work {
		op.WorkF += w
	}
	// backward: CB.to(A.dtype, copy=True), SCB.unsqueeze(1).mul(1/127)
	op.Work.B = []int64{dt.Bytes(out * in), units.FP32.Bytes(out)}
	op.WorkB = op.Work.B[0] + op.Work.B[1]
	op.Flops = 2 * float64(tokens) * float64(in) * float64(out)
	op.Bytes += float64(b.Val(xin).Bytes) + float64(out*in)
	return y
}
