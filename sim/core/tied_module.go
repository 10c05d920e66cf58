package core

import "strings"

// TieModule makes a module whose weights transformers ties to an earlier
// module's (a model's _tied_weights_keys naming module paths: Zamba2's
// shared transformer blocks, each hybrid layer's shared_transformer tied
// to the first hybrid layer's of its block, modeling_zamba2.py's
// get_layers at 5.25.0) use that module's parameters: each parameter
// registered from params on whose name is under the module path later is
// tied to the earlier parameter of the same name under the path first,
// and the autocast copies the ops from ops on make of it are the earlier
// one's (shareCasts). A later parameter with no namesake (a weight of the
// later module's own) stays its own, and so does a LoRA adapter: PEFT
// adds its adapters after transformers tied the weights, one pair to
// each module copy (zamba2-tiny.json under all-linear: layer 3's
// shared_transformer adapters get gradients of their own, peft 0.21.2;
// sim/lora_mamba2_test.go). It returns how many were tied.
func (b *Builder) TieModule(params, ops int, later, first string) int {
	if later == first {
		return 0
	}
	earlier := map[string]int32{}
	for i := range params {
		if strings.HasPrefix(b.P.Params[i].Name, first+".") {
			earlier[b.P.Params[i].Name] = int32(i)
		}
	}
	tied := 0
	for j := params; j < len(b.P.Params); j++ {
		rest, ok := strings.CutPrefix(b.P.Params[j].Name, later+".")
		if !ok || b.P.Params[j].Role == RoleLoRA {
			continue
		}
		i, ok := earlier[first+"."+rest]
		if !ok {
			continue
		}
		if t := b.P.Params[i].TiedTo; t >= 0 {
			i = t
		}
		b.P.Params[j].TiedTo = i
		tied++
	}
	b.shareCasts([2]int{0, ops}, [2]int{ops, len(b.P.Ops)})
	return tied
}
