package plans

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// LayoutKeywordNames are parallel()'s layout keywords in signature order
// (sweep()'s parallel axes).
func LayoutKeywordNames() []string {
	names := make([]string, len(layoutKeywords))
	for i, k := range layoutKeywords {
		names[i] = k.Name
	}
	return names
}

// unknownLayoutKeyword is the error for a keyword parallel() does not
// take: the nearest one when a typo or a dropped prefix explains it
// (fsdp_sync_each_batchs, sync_each_batch), as Starlark says for train(),
// else every keyword.
func unknownLayoutKeyword(fn, name string) error {
	known := LayoutKeywordNames()
	if near := nearestLayoutKeyword(name, known); near != "" {
		return fmt.Errorf("%s: unexpected keyword argument %q (did you mean %s?)", fn, name, near)
	}
	return fmt.Errorf("%s: unexpected keyword argument %q (known: %s)", fn, name, strings.Join(known, ", "))
}

// nearestLayoutKeyword is the known keyword at most two edits from name,
// or the only one name is the tail of after a prefix ("sync_each_batch"
// of "fsdp_sync_each_batch"), or "".
func nearestLayoutKeyword(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := units.EditDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" || len(name) < 4 {
		return best
	}
	tail := ""
	for _, k := range known {
		if strings.HasSuffix(k, "_"+name) {
			if tail != "" {
				return "" // dtype: param_dtype, reduce_dtype or router_dtype
			}
			tail = k
		}
	}
	return tail
}

// layoutSig is the keyword part of parallel()'s signature.
func layoutSig() string {
	parts := make([]string, len(layoutKeywords))
	for i, k := range layoutKeywords {
		parts[i] = k.Name + "=" + k.Sig
	}
	return strings.Join(parts, ", ")
}

// layoutDoc documents the layout keywords, one line each.
func layoutDoc() string {
	var sb strings.Builder
	for _, k := range layoutKeywords {
		fmt.Fprintf(&sb, "\n- %s: %s.", k.Name, k.Doc)
	}
	return sb.String()
}
