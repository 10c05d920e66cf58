package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Quantized base weights under data-parallel sharding (QLoRA with FSDP or
// ZeRO-3):
//
//   - bitsandbytes 4-bit (nf4, nf4-dq) with bnb_4bit_quant_storage set to
//     a float dtype (Answer.AI's fsdp_qlora, transformers' FSDP-QLoRA
//     guide, fms-acceleration's bnb plugin): the packed codes live in a
//     tensor of that dtype, n/2 bytes viewed as float elements, so FSDP1
//     can flatten them with the 16-bit parameters and shard them, and
//     DeepSpeed ZeRO-3 can partition them. The quantization statistics
//     (absmax, the nested absmax, the code table) are the quant_state, an
//     attribute rather than a parameter: every rank keeps them whole. The
//     all-gathered codes are dequantized layer by layer in the forward
//     (MatMul4Bit), as on one GPU.
//   - torchao's NF4Tensor (torchtune's QLoRA with FSDP2): the packed codes
//     (uint8, two per byte), the int8 block scalers (one per 64 values)
//     and the scaler-block quantization factors (one per 256 scalers, in
//     the weight's dtype) are sharded along dim 0 (nf4tensor.py,
//     _INNER_TENSOR_NAMES_FOR_SHARDING, fsdp_pre_all_gather); the scaler
//     mean and the 16-value code table stay whole. Its linear_nf4 keeps
//     the NF4 weight, not the input, for the backward, and dequantizes the
//     weight to its dtype in both passes (a fused kernel under
//     torch.compile, as torchtune runs it; eager PyTorch would also make
//     int64 index tensors there).

// QuantTensor is one tensor of a quantized weight's storage as sharding
// sees it.
type QuantTensor struct {
	Name    string
	Elems   int64 // elements
	Size    int64 // bytes per element
	Sharded bool  // split over the data-parallel ranks; kept whole otherwise
}

// Bytes is the tensor's storage.
func (t QuantTensor) Bytes() int64 { return t.Elems * t.Size }

// torchao NF4Tensor defaults (torchtune's to_nf4: block_size 64,
// scaler_block_size 256).
const (
	aoBlock       = 64
	aoScalerBlock = 256
)

// QuantTensors lists the storage of a weight of shape quantized with a
// shardable scheme (nf4, nf4-dq, torchao-nf4); storage is bnb's
// quant_storage dtype for the codes (uint8 when invalid), dt the weight's
// dtype (torchao's factors, mean and table).
func QuantTensors(scheme string, shape []int64, storage, dt units.DType) []QuantTensor {
	n := Numel(shape)
	codes := (n + 1) / 2
	switch scheme {
	case "nf4", "nf4-dq":
		codesT := QuantTensor{Name: "nf4 codes", Elems: codes, Size: 1, Sharded: true}
		if storage != units.InvalidDType && storage.Bytes(1) > 1 {
			sz := storage.Bytes(1)
			codesT = QuantTensor{Name: "nf4 codes (" + storage.Name() + " storage)", Elems: divUp(codes, sz), Size: sz, Sharded: true}
		}
		out := []QuantTensor{codesT}
		for _, s := range QuantStorage(scheme, shape)[1:] {
			out = append(out, QuantTensor{Name: s.Name, Elems: s.Bytes, Size: 1})
		}
		return out
	case "torchao-nf4":
		sz := dt.Bytes(1)
		blocks := divUp(n, aoBlock)
		return []QuantTensor{
			{Name: "quantized_data", Elems: codes, Size: 1, Sharded: true},
			{Name: "quantized_scalers", Elems: blocks, Size: 1, Sharded: true},
			{Name: "quantization_factor", Elems: divUp(blocks, aoScalerBlock), Size: sz, Sharded: true},
			{Name: "scaler_mean", Elems: 1, Size: sz},
			{Name: "nf4 code table", Elems: nf4Code, Size: sz},
		}
	}
	return nil
}

// torchaoStorage is QuantStorage for torchao's NF4Tensor of a bf16 weight
// (the one-GPU replay's allocations).
func torchaoStorage(shape []int64) []StateTensor {
	var out []StateTensor
	for _, t := range QuantTensors("torchao-nf4", shape, units.InvalidDType, units.BF16) {
		out = append(out, StateTensor{t.Name, t.Bytes()})
	}
	return out
}

// validateQuantSharding checks that the plan's quantized weights can be
// sharded as its layout asks.
func (p *Plan) validateQuantSharding(par Parallelism) error {
	q := p.Quant
	if q == "" {
		if p.QuantStorage != units.InvalidDType {
			return &units.Error{Path: "train", Msg: "quant_storage= needs quant=", Hint: `pass quant="nf4" (bitsandbytes 4-bit)`}
		}
		return nil
	}
	bnb4 := q == "nf4" || q == "nf4-dq"
	if st := p.QuantStorage; st != units.InvalidDType {
		if !bnb4 {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("quant_storage= is bitsandbytes' bnb_4bit_quant_storage: it applies to quant=\"nf4\" or \"nf4-dq\" (got %q)", q)}
		}
		if !st.Float() {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("quant_storage must be a float dtype (got %s)", st)}
		}
	}
	if par.DistributedOptimizer || p.Precision.Megatron && par.DP > 1 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("quant=%q is not simulated with Megatron's data parallelism", q),
			Hint: "QLoRA shards with FSDP (fsdp=1 for bitsandbytes, fsdp=True for quant=\"torchao-nf4\") or DeepSpeed ZeRO"}
	}
	// FSDP1's CPUOffload moves each unit's flat shard, the 4-bit codes in
	// their float storage included, as it moves any flat shard (Answer.AI's
	// fsdp_qlora --use_cpu_offload; replay/fsdp1_offload.go); the
	// quant_state stays whole on each GPU as without offload.
	fsdp1Params := par.FSDP && par.FSDPVersion == 1 && bnb4 && p.Offload != nil && p.Offload.Activations == ""
	if p.Offload != nil && (par.FSDP || par.Zero > 0) && !fsdp1Params {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("quant=%q with offload under zero= or fsdp= is not simulated", q),
			Hint: "bitsandbytes 4-bit weights offload with FSDP1's CPUOffload: parallel(fsdp=1) with offload(params=\"cpu\")"}
	}
	sharded := par.FSDP || par.Zero == 3
	switch {
	case !sharded:
		return nil
	case q == "int8":
		return &units.Error{Path: "parallel", Msg: "quant=\"int8\" cannot be sharded by FSDP or ZeRO-3", Hint: "bitsandbytes shards only 4-bit weights stored in a float dtype: quant=\"nf4\", quant_storage=\"bf16\""}
	case q == "torchao-nf4" && (!par.FSDP || par.FSDPVersion == 1):
		return &units.Error{Path: "parallel", Msg: "torchao's NF4 weights shard with FSDP2 (fully_shard)", Hint: "use fsdp=True (torchtune's QLoRA recipes)"}
	case bnb4 && par.FSDP && par.FSDPVersion != 1:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("bitsandbytes 4-bit weights (quant=%q) under fully_shard (FSDP2) are not simulated", q),
			Hint: "FSDP-QLoRA recipes (Answer.AI, transformers + accelerate) use FSDP1: fsdp=1; torchtune uses quant=\"torchao-nf4\" with fsdp=True"}
	case bnb4 && (p.QuantStorage == units.InvalidDType || !p.QuantStorage.Float()):
		return &units.Error{Path: "train", Msg: fmt.Sprintf("quant=%q under FSDP or ZeRO-3 needs the 4-bit codes in a float storage", q),
			Hint: "FSDP flattens and DeepSpeed partitions float parameters only: pass quant_storage=\"bf16\" (bnb_4bit_quant_storage), the model's dtype"}
	case bnb4 && par.FSDP && p.QuantStorage != p.Precision.Params:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("quant_storage=%q differs from the parameters' %s: FSDP1 flattens one dtype per unit", p.QuantStorage.Name(), p.Precision.Params),
			Hint: fmt.Sprintf("pass quant_storage=%q (bnb_4bit_quant_storage = torch_dtype)", p.Precision.Params.Name())}
	}
	return nil
}
