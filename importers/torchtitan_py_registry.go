package importers

import (
	"fmt"
	"strings"
)

// pyRegistryParam is a parameter of a model's model_registry and its
// default ("" for None or none).
type pyRegistryParam struct{ name, def string }

// pyRegistries are the parameters of each model's model_registry, in
// order, with their defaults (torchtitan/models/<model>/__init__.py at
// b5bcd76c6); a model not listed takes llama3's.
var pyRegistries = map[string][]pyRegistryParam{
	"llama3":       {{"flavor", ""}, {"attn_backend", "flex"}, {"tp_gemm_backend", "default"}, {"converters", ""}},
	"qwen3":        {{"flavor", ""}, {"attn_backend", "flex"}, {"moe_comm_backend", ""}, {"converters", ""}},
	"qwen3_5":      {{"flavor", ""}, {"attn_backend", "flex"}, {"moe_comm_backend", ""}, {"converters", ""}},
	"deepseek_v3":  {{"flavor", ""}, {"attn_backend", "flex"}, {"moe_comm_backend", "standard"}, {"non_blocking_capacity_factor", ""}, {"converters", ""}, {"num_mtp_layers", "0"}},
	"kimi_k2_7":    {{"flavor", ""}, {"attn_backend", "flex"}, {"moe_comm_backend", "standard"}, {"non_blocking_capacity_factor", ""}, {"converters", ""}},
	"gpt_oss":      {{"flavor", ""}, {"moe_comm_backend", "standard"}, {"attn_backend", "varlen"}, {"converters", ""}},
	"muse_glimmer": {{"flavor", ""}, {"attn_backend", "flex"}, {"converters", ""}},
}

// pyRegistryParams is model's model_registry parameters.
func pyRegistryParams(model string) []pyRegistryParam {
	if r, ok := pyRegistries[model]; ok {
		return r
	}
	return pyRegistries["llama3"]
}

// pyRegistryDefault is the default of model_registry's parameter param
// for model; "" when it has none.
func pyRegistryDefault(model, param string) string {
	for _, p := range pyRegistryParams(model) {
		if p.name == param {
			return p.def
		}
	}
	return ""
}

// modelRegistry is torchtitan.models.<model>'s model_registry: a
// ModelSpec with the arguments given (pyRegistries).
func (e *pyEval) modelRegistry(model string, c *pyCall) (any, error) {
	o := pyNew("ModelSpec")
	line := int(c.pos.Line)
	o.fields["name"] = pyField{v: model, line: line}
	var params []string
	for _, p := range pyRegistryParams(model) {
		params = append(params, p.name)
	}
	if len(c.args) > len(params) {
		return nil, e.errAt(c.pos, "model_registry() takes at most %d arguments", len(params))
	}
	for i, a := range c.args {
		o.fields[params[i]] = pyField{v: a, line: line}
	}
	for _, k := range c.order {
		if !strings.Contains(" "+strings.Join(params, " ")+" ", " "+k+" ") {
			return nil, e.errAt(c.pos, "model_registry() of %s has no argument %s (its: %s)", model, k, strings.Join(params, ", "))
		}
		o.fields[k] = pyField{v: c.kwargs[k], line: c.lines[k]}
	}
	if _, ok := o.fields["flavor"]; !ok {
		return nil, e.errAt(c.pos, "model_registry() needs the model's flavor")
	}
	o.fields["model"] = pyField{v: pyOpaque{model + "'s model config"}}
	return o, nil
}

// torchtitanPyMoEOptions reads the MoE models' registry options: the
// expert-parallel dispatch, a capacity factor, multi-token prediction's
// layers (deepseek_v3, kimi_k2_7, qwen3, qwen3_5, gpt_oss at b5bcd76c6).
func torchtitanPyMoEOptions(t *tree) error {
	const comm = "model_spec.moe_comm_backend"
	if backend, err := t.str(comm, ""); err != nil {
		return err
	} else if backend != "" && backend != "standard" {
		t.notModelled = append(t.notModelled, comm+": "+comment(backend)+" (its expert-parallel dispatch's kernels and buffers; memsh replays torch's all-to-all)")
	}
	const capacity = "model_spec.non_blocking_capacity_factor"
	if v, _ := t.get(capacity); v != nil {
		t.notModelled = append(t.notModelled, capacity+": "+comment(fmt.Sprint(v))+" (each expert's rows capped at a capacity, the rest dropped; memsh routes every row)")
	}
	const mtp = "model_spec.num_mtp_layers"
	if n, err := t.integer(mtp, 0, 0, 1<<10); err != nil {
		return err
	} else if n > 0 {
		t.notModelled = append(t.notModelled, fmt.Sprintf("%s: %d (multi-token prediction's decoder layers and heads beside the model's: memsh replays the model without them)", mtp, n))
	}
	return nil
}
