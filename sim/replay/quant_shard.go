package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Quantized base weights under sharding (core/quant_shard.go describes
// what each scheme shards): FSDP1 flattens bitsandbytes' codes, stored in
// the parameters' dtype, into its units; ZeRO-3 partitions them; FSDP2
// shards torchao's NF4 tensors tensor by tensor. Every rank keeps the
// unsharded statistics. ZeRO-1/2 and DDP replicate quantized weights as
// one GPU does.

// quantTensors is parameter pi's quantized storage as sharding sees it.
func (d *distState) quantTensors(pi int32) []core.QuantTensor {
	return d.quantTensorsOf(&d.p.Params[pi])
}

// quantTensorsOf is quantTensors of a parameter p.
func (d *distState) quantTensorsOf(p *core.ParamInfo) []core.QuantTensor {
	return core.QuantTensors(p.Quant, p.Shape, d.plan.QuantStorage, d.plan.Precision.Params)
}

// quantCodes is the elements of parameter pi's sharded codes in the
// storage dtype (bitsandbytes' quant_storage): what FSDP1's flat
// parameter and ZeRO-3's partition hold of it.
func (d *distState) quantCodes(pi int32) int64 { return d.quantCodesOf(&d.p.Params[pi]) }

// quantCodesOf is quantCodes of a parameter p.
func (d *distState) quantCodesOf(p *core.ParamInfo) int64 {
	var n int64
	for _, t := range d.quantTensorsOf(p) {
		if t.Sharded {
			n += t.Elems
		}
	}
	return n
}

// elems is parameter pi's contribution to its gather unit, in elements
// of the gathered dtype.
func (d *distState) elems(pi int32) int64 {
	if p := &d.p.Params[pi]; p.Quant != "" {
		return d.quantCodes(pi)
	}
	return d.p.Params[pi].Numel
}

// quantWhole allocates the tensors of quantized parameter pi that every
// rank keeps whole (the quant_state; torchao's mean and code table).
func (d *distState) quantWhole(r *Replay, pi int32) {
	d.quantWholeIf(r, pi, func(string) bool { return true }, true, nil)
}

// quantWholeIf is quantWhole for the tensors whose name keep accepts,
// counted in the states when count; it appends to moved the tensors
// quantMoved names.
func (d *distState) quantWholeIf(r *Replay, pi int32, keep func(string) bool, count bool, moved *[]int32) {
	p := &d.p.Params[pi]
	for _, t := range d.quantTensors(pi) {
		if !t.Sharded && keep(t.Name) {
			id := d.alloc(r, p.Name+" "+t.Name, []int64{t.Elems}, core.QuantDType(p.Quant), t.Bytes(), core.CatParams,
				p.Quant+" statistics of "+p.Name+", kept whole on every rank")
			if count {
				r.Rep.States.Params += t.Bytes()
			}
			if moved != nil && quantMoved(t.Name) {
				*moved = append(*moved, id)
			}
		}
	}
}

// quantShardFSDP2 allocates this rank's shards of torchao NF4 parameter
// pi over n ranks: dim 0 of each sharded tensor, padded to the first
// rank's chunk (fully_shard); it returns their bytes.
func (d *distState) quantShardFSDP2(r *Replay, pi int32, n int64) int64 {
	p := &d.p.Params[pi]
	var b int64
	for _, t := range d.quantTensors(pi) {
		if !t.Sharded {
			continue
		}
		s := ceilDiv(t.Elems, n) * t.Size
		d.alloc(r, p.Name+" "+t.Name+" shard", []int64{ceilDiv(t.Elems, n)}, core.QuantDType(p.Quant), s, core.CatParams,
			fmt.Sprintf("this rank's shard of %s's %s (FSDP2 over %d ranks)", p.Name, t.Name, n))
		b += s
	}
	r.Rep.States.Params += b
	d.quantWhole(r, pi)
	return b
}

// quantGathered is the bytes the all-gather rebuilds of quantized
// parameter pi over n ranks (FSDP2 and ZeRO-3; FSDP1 counts it in its
// unit's flat parameter).
func (d *distState) quantGathered(pi int32, n int64) int64 {
	return d.quantGatheredOf(&d.p.Params[pi], n)
}

// quantGatheredOf is quantGathered of a parameter p.
func (d *distState) quantGatheredOf(p *core.ParamInfo, n int64) int64 {
	var b int64
	for _, t := range d.quantTensorsOf(p) {
		if t.Sharded {
			b += ceilDiv(t.Elems, n) * n * t.Size
		}
	}
	return b
}

// quantStorageDT is the dtype of the sharded codes (bitsandbytes'
// quant_storage).
func (d *distState) quantStorageDT() units.DType { return d.plan.QuantStorage }
