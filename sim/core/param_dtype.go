package core

import "github.com/memsh/memsh/sim/units"

// A parameter's storage follows the plan's precision unless it has a
// dtype of its own (ParamInfo.DType: PEFT's fp32 adapters over a bf16
// model). PyTorch makes a parameter's .grad in the parameter's dtype and
// AdamW's moments with zeros_like(param), so a parameter of its own
// dtype has its gradient and its states in it too, and no master copy.

// Stored is the dtype parameter p is stored in.
func (p *ParamInfo) Stored(prec Precision) units.DType {
	if p.DType != units.InvalidDType {
		return p.DType
	}
	return prec.Params
}

// GradDType is the dtype of parameter p's gradient.
func (p *ParamInfo) GradDType(prec Precision) units.DType {
	if p.DType != units.InvalidDType {
		return p.DType
	}
	return prec.Grads
}

// StateDType is the dtype of parameter p's optimizer state.
func (p *ParamInfo) StateDType(prec Precision) units.DType {
	if p.DType != units.InvalidDType {
		return p.DType
	}
	return prec.States
}

// MasterDType is the dtype of parameter p's master copy, InvalidDType
// when it has none (no master weights in the plan, or stored in the
// master's dtype already).
func (p *ParamInfo) MasterDType(prec Precision) units.DType {
	if prec.Master == units.InvalidDType || prec.Master == p.Stored(prec) && !prec.MasterClone {
		return units.InvalidDType
	}
	return prec.Master
}
