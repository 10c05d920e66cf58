package core

// commRecord is one collective of a micro-batch, as the lowering meets it.
type CommRecord struct {
	Kind     string // all_reduce | all_gather | reduce_scatter | all_to_all | send_recv
	Group    string // tp | cp | ep | pp | dp | edp
	Bytes    int64  // message size: the full tensor reduced, gathered or scattered
	Backward bool
}
