package nn

import "github.com/memsh/memsh/sim/core"

// Expert parallelism (Megatron-LM --expert-model-parallel-size, the
// "alltoall" token dispatcher, megatron/core/transformer/moe/
// token_dispatcher.py; DeepSpeed-MoE likewise): each MoE layer's experts
// are split over ep ranks, experts/ep per rank, and every rank routes its
// own tokens. After the top-k permutation the routed rows go to the ranks
// holding their experts by an all-to-all, and come back by another after
// the experts. With balanced routing a rank sends T*k rows and receives
// T*k rows (ep ranks times T*k/ep each), so the expert inputs keep their
// size; what EP changes is how many experts' weights a rank holds and
// that each rank's experts see ep times the tokens. With a capacity
// factor (token dropping with padding) every expert gets exactly its
// capacity, capacity_factor*T*k/experts rows per rank.
//
// Each all-to-all writes a new tensor (the permuted send buffer is freed
// once sent); its backward is an all-to-all of the gradient. Routing need
// not be balanced: the dispatch's output holds the busiest rank's rows
// (core/expert.go, expert_load), and the combine sends them back. An
// all-to-all ends when its busiest rank has sent and received its rows, so
// each is timed by the larger of its input and output: the busiest rank's
// rows in the dispatch and the combine, forward and backward.

// expertAllToAll exchanges the routed rows x over the EP group into rows
// rows.
func expertAllToAll(b *core.Builder, name string, x core.Value, rows int64) core.Value {
	if b.Par.Epn() == 1 {
		return x
	}
	i := b.AddOp("all_to_all", name+"_all_to_all", []core.Value{x})
	y := b.Out(i, name+"_received", []int64{rows, b.Last(x)}, b.Dtype(x), "routed tokens after the expert-parallel all-to-all ("+name+")")
	n := max(b.Val(x).Bytes, b.Val(y).Bytes)
	b.RecordComm("all_to_all", "ep", n, false)
	b.RecordComm("all_to_all", "ep", n, true)
	return y
}
