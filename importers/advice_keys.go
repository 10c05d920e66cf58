package importers

import (
	"sort"
	"strings"
)

// The config's key behind each train() keyword the advice changes: an
// importer says it where it reads the key (plan.keyOf), and the plan
// script hands them to advise(keys=), whose config column writes each
// change in the config's own keys (per_device_train_batch_size: 4)
// where memsh's keyword (batch=4) meant nothing to its user. A keyword no
// importer names (precision, optimizer, parallel, ...) is said to have no
// key in the config.

// keyOf records key, which the importer read keyword's value from, as
// the file spells it: the file's own key, or for a key derived from
// another (Axolotl's micro_batch_size for the Trainer's
// per_device_train_batch_size) that one when it holds the same value, or
// "!" and it when it holds the opposite bool (LLaMA-Factory's
// disable_gradient_checkpointing, tree.deriveNot); a derived key that is
// neither (a value computed from several) is not recorded.
func (p *plan) keyOf(t *tree, keyword, key string) {
	if src, ok := t.from[key]; ok {
		switch {
		case t.inverse[key]:
			key = "!" + src
		case sameScalar(t.leaves[key].value, t.leaves[src].value):
			key = src
		default:
			return
		}
	}
	if p.keys == nil {
		p.keys = map[string]string{}
	}
	p.keys[keyword] = key
}

// sameScalar says whether a and b are the same bool, number or string.
func sameScalar(a, b any) bool {
	switch a.(type) {
	case bool, int64, float64, string:
		return a == b // b of another type is unequal: no panic
	}
	return false
}

// keysExpr is keys as a Starlark dict, sorted by keyword.
func keysExpr(keys map[string]string) string {
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = str(k) + ": " + str(keys[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
