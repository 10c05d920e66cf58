package plans

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// saveOpAliases are names a checkpoint save list's ops go by in PyTorch
// code, with the save-list name that stands for them here. torchtitan's
// save list writes torch.ops.aten.mm.default,
// aten._scaled_dot_product_efficient_attention.default,
// aten._scaled_dot_product_flash_attention.default,
// torch.ops._c10d_functional.reduce_scatter_tensor.default and
// aten.max.default (torchtitan/models/llama3/infra/parallelize.py,
// _save_list; its SimpleFSDP experiment adds
// torch._higher_order_ops.flex_attention); "sdpa" is
// torch.nn.functional.scaled_dot_product_attention's usual short name.
var saveOpAliases = map[string]string{
	"sdpa":                                    "attention",
	"scaled_dot_product_attention":            "attention",
	"_scaled_dot_product_flash_attention":     "attention",
	"_scaled_dot_product_efficient_attention": "attention",
	"_scaled_dot_product_cudnn_attention":     "attention",
	"flash_attention":                         "attention",
	"flash_attn":                              "attention",
	"flex_attention":                          "attention",
	"reduce_scatter_tensor":                   "reduce_scatter",
	"all_to_all_single":                       "all_to_all",
	"addmm":                                   "mm",
	"linear":                                  "mm",
}

// saveOpsError is CheckSaveOps' error for names, with a did-you-mean when
// the first unknown name is a PyTorch name of a known op
// ("torch.ops.aten.mm.default", "sdpa") or a typo of one ("atention").
func saveOpsError(names []string, err error) error {
	known := core.SaveOpNames()
	for _, n := range names {
		if slices.Contains(known, n) {
			continue
		}
		if near := nearestSaveOp(n, known); near != "" {
			return fmt.Errorf("save: unknown op %q (did you mean %q? known: %s)", n, near, strings.Join(known, ", "))
		}
		break
	}
	return err
}

// nearestSaveOp is the save-list name that name means: name without
// torch.ops' namespace and overload (aten.mm.default is mm), an alias
// (saveOpAliases), or a known name at most two edits away; "" when none.
func nearestSaveOp(name string, known []string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, prefix := range []string{"torch.ops.", "torch._higher_order_ops.", "torch.nn.functional.", "f."} {
		n = strings.TrimPrefix(n, prefix)
	}
	for _, ns := range []string{"aten.", "_c10d_functional.", "c10d_functional.", "c10d."} {
		n = strings.TrimPrefix(n, ns)
	}
	n = strings.TrimSuffix(n, ".default")
	if slices.Contains(known, n) {
		return n
	}
	if alias, ok := saveOpAliases[n]; ok {
		return alias
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := units.EditDistance(n, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}
