package sim

import "slices"

// The forward program: what a model's layers lower to for one micro-batch.
// The replay (replay.go) turns it into a timeline of allocations and frees.

// Category is where a tensor's bytes go in a report's breakdown.
type Category uint8

const (
	CatParams      Category = iota // parameters and their low-precision working copies
	CatGrads                       // parameter gradients
	CatOptimizer                   // optimizer state and master weights
	CatActivations                 // forward tensors (held for backward or in flight)
	CatTemporaries                 // activation gradients, workspaces, optimizer temporaries
	CatComm                        // communication buffers (gathers, buckets)
	numCategories
)

var categoryNames = [numCategories]string{"params", "grads", "optimizer", "activations", "temporaries", "comm"}

func (c Category) String() string { return categoryNames[c] }

// CategoryNames lists the categories in report order.
func CategoryNames() []string { return categoryNames[:] }

// Value is a forward tensor (one storage) in a program.
type Value int32

const noValue Value = -1

// valueInfo describes one storage produced in the forward.
type valueInfo struct {
	name     string  // module path and tensor name, "layers.3.attn.q"
	shape    []int64 // logical shape
	dtype    DType
	bytes    int64
	grad     bool     // requires grad (a gradient of this size exists in backward)
	cat      Category // CatActivations, or CatParams for weight copies
	producer int32    // op index, -1 for the program input
	why      string   // why it exists, for r.largest
	cached   bool     // held until the end of the forward (autocast weight cache)
}

// paramInfo is one parameter tensor (per rank, after sharding).
type paramInfo struct {
	name      string
	shape     []int64
	numel     int64 // elements held by this rank
	fullNumel int64 // elements in the unsharded tensor
	trainable bool
	role      string // q k v o gate up down lm_head embed norm router expert ...
	tiedTo    int32  // index of the parameter this one shares storage with, or -1
	quant     string // bitsandbytes scheme of a quantized frozen weight (quant.go), "" when stored in the params dtype
}

// opInfo is one forward op.
type opInfo struct {
	name    string // "layers.3.attn.q_proj"
	kind    string // "matmul", "softmax", "scatter", ...
	in      []Value
	out     []Value
	saved   []Value // storages autograd keeps for this op's backward
	params  []int32 // parameters read (their grads are produced in backward)
	workF   int64   // transient workspace in forward
	workB   int64   // transient workspace in backward (beyond input grads)
	flops   float64 // forward FLOPs (backward is costed by op kind)
	bytes   float64 // forward HBM bytes moved
	region  int32   // checkpoint region id, 0 = none
	noGradB bool    // backward produces no input grads (e.g. integer inputs)
}

// program is the lowered forward of one micro-batch.
type program struct {
	values  []valueInfo
	ops     []opInfo
	params  []paramInfo
	buffers []bufferInfo // module buffers (buffers.go), on the device with the parameters
	input   Value
	// inputTransient: the caller drops the input after its last use (a
	// validation batch replaced by its normalised copy; data_batch.go).
	inputTransient bool
	loss           Value
	regions        []region     // checkpoint regions, index = id-1
	tables         []*tableProg // table layers (table.go), set up and stepped by table_replay.go
	held           []Value      // kept alive by the caller until the step ends (a training loop's logits list; chunked_loss.go)
	comm           []commRecord // collectives of one micro-batch (comm.go)
	stage          *stageProg   // pipeline stage: micro-batch copies and their outputs (pipeline.go)
}

// reserve makes room in the program's lists for n more copies of what was
// appended since they held ops, values and params entries (the first copy
// of a repeated block), within the caps on ops and parameter tensors, so
// that a long repeat does not regrow and copy them again and again.
func (p *program) reserve(n int64, ops, values, params int) {
	more := func(have, since, limit int) int {
		return int(min(max(n, 0)*int64(have-since), int64(max(limit-have, 0))))
	}
	p.ops = slices.Grow(p.ops, more(len(p.ops), ops, maxOps))
	p.values = slices.Grow(p.values, more(len(p.values), values, 4*maxOps))
	p.params = slices.Grow(p.params, more(len(p.params), params, maxParamTensors))
}

// region is a contiguous range of ops run under activation checkpointing.
type region struct {
	name       string
	first, end int32 // ops [first, end)
}
