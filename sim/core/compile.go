package core

import "fmt"

// Compile is torch.compile as training recipes apply it: each repeated
// block compiled on its own (torchtune's compile_model, torchtitan's
// apply_compile: torch.compile per TransformerBlock), and the loss
// function compiled (torchtune's compile_loss). A compiled graph runs
// through AOTAutograd: its forward and backward are partitioned by
// min_cut_rematerialization_partition (partition.go), and Inductor fuses
// chains of pointwise ops into kernels that keep no intermediates.
type Compile struct {
	Blocks bool
	Loss   bool
	// Mode is torch.compile's mode= (cudagraphs.go): "" or "default",
	// "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs".
	Mode string
}

// On reports whether anything is compiled.
func (c Compile) On() bool { return c.Blocks || c.Loss }

// String is the form train(compile=...) takes: True, "blocks", "loss" or False.
func (c Compile) String() string {
	switch {
	case c.Blocks && c.Loss:
		return "True"
	case c.Blocks:
		return `"blocks"`
	case c.Loss:
		return `"loss"`
	}
	return "False"
}

// ParseCompile reads compile="blocks" or "loss".
func ParseCompile(s string) (Compile, error) {
	switch s {
	case "blocks":
		return Compile{Blocks: true}, nil
	case "loss":
		return Compile{Loss: true}, nil
	case "all":
		return Compile{Blocks: true, Loss: true}, nil
	}
	return Compile{}, fmt.Errorf("unknown compile %q (known: True, False, \"blocks\", \"loss\")", s)
}

// Graph is a range of ops compiled as one graph.
type Graph struct {
	Name       string
	First, End int32 // ops [First, End)
}

// beginGraph opens a compiled graph when on (and none is open); the
// returned func closes it.
func (b *Builder) beginGraph(name string, on bool) func() {
	if !on || b.graph || b.Eval {
		return func() {}
	}
	b.graph = true
	g := Graph{Name: b.Name(name), First: int32(len(b.P.Ops))}
	return func() {
		g.End = int32(len(b.P.Ops))
		if g.End > g.First {
			b.P.Graphs = append(b.P.Graphs, g)
		}
		b.graph = false
	}
}

// OpenBlock opens what repeated block b.block runs under: its own
// checkpoint policy (enterBlock), its compiled graph (compile=True or
// "blocks") and its checkpoint region when the policy picks the block.
// The returned func closes all three.
func (b *Builder) OpenBlock() func() {
	outer := b.enterBlock(b.block)
	closeGraph := b.beginGraph("block", b.compile.Blocks)
	closeRegion := func() {}
	if b.Ckpt.block(b.block) {
		closeRegion = b.PolicyRegion("block")
	}
	b.block++
	return func() {
		closeRegion()
		closeGraph()
		b.leaveBlock(outer)
	}
}

// LossGraph opens the loss's compiled graph (compile=True or "loss").
func (b *Builder) LossGraph(name string) func() { return b.beginGraph(name, b.compile.Loss) }

// Op classes as AOTAutograd's partitioner sees the aten ops each lowered
// kind stands for (torch/_functorch/partitioners.py, get_default_op_list,
// torch 2.15): recomputable ops (pointwise, views, reductions, casts,
// indexing) are fusible, random ops are fusible but never recomputed, and
// everything else (matmuls, attention kernels, collectives, custom
// kernels) is neither.
var recomputableKinds = map[string]bool{
	"add": true, "mul": true, "div": true, "cast": true, "pow": true, "mean": true, "rsqrt": true,
	"softmax": true, "layer_norm": true, "mask": true, "rope": true, "repeat_kv": true, "contiguous": true,
	"cross_entropy": true, "mse_loss": true, "sum": true, "scale": true, "view": true, "slice": true,
	"index": true, "gather": true, "embedding": true,
	"gelu": true, "relu": true, "silu": true, "tanh": true, "sigmoid": true, "exp": true, "neg": true, "erf": true,
	// float8 casts (float8.go): abs, clamp, aten.amax (rowwise). Tensorwise
	// amax is aten.max.default, off the allowlist, but Inductor lowers it
	// as a reduction that fuses its pointwise producer, and it is a
	// reduction the partitioner bans anyway (banned below): counted here.
	"abs": true, "clamp": true, "amax": true, "max": true,
}

// randomKinds are fusible but banned from recomputation (native_dropout).
var randomKinds = map[string]bool{"dropout": true}

// computeIntensiveKinds are never recomputed, even when the memory budget
// lifts the allowlist (the partitioner's compute_intensive_ops: mm, bmm,
// addmm, convolution, the flash and efficient attention kernels).
var computeIntensiveKinds = map[string]bool{"matmul": true, "grouped_matmul": true, "attention": true, "conv1d": true}

// customKinds are kernels outside aten (bitsandbytes' int8 quantization and matmul and 4-bit
// dequantization): never recomputed (is_non_builtin_to_include).
var customKinds = map[string]bool{"int8_matmul": true, "int8_vectorwise_quant": true, "dequantize": true}

func recomputable(op *OpInfo) bool { return recomputableKinds[op.Kind] }

func fusibleOp(op *OpInfo) bool { return recomputableKinds[op.Kind] || randomKinds[op.Kind] }

// fusibleInto is the partitioner's is_fusible(a, b): a cat takes any
// producer ("memory fusion"); otherwise both must be fusible. a is nil for
// a graph input.
func fusibleInto(a, b *OpInfo) bool {
	if b.Kind == "cat" {
		return true
	}
	return a != nil && fusibleOp(a) && fusibleOp(b)
}
