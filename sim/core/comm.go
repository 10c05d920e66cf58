package core

// commRecord is one collective of a micro-batch, as the lowering meets it.
type CommRecord struct {
	Kind     string // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
	Group    string // tp | cp | ep | pp | dp | edp
	Bytes    int64  // message size: the full tensor reduced, gathered or scattered
	Backward bool
	// Beside is 1 + the index of the op whose backward GEMMs run while
	// this backward collective does (0: none): a column-parallel matmul,
	// or the sequence-parallel all-gather whose readers are those matmuls.
	// Megatron-Core launches the collective asynchronously beside them
	// (sim/timing/comm.go, tpOverlap); whether it overlaps is the time
	// model's to decide.
	Beside int32
	Dgrad  bool // beside the input-gradient GEMM (else the weight-gradient one)
	// UB: overlapped only by Transformer Engine's userbuffers
	// (parallel(tp_comm_overlap=True)), not by Megatron's asynchronous
	// backward. Fprop: beside the forward GEMM of Beside (a forward
	// collective), not its dgrad or wgrad.
	UB, Fprop bool
}
