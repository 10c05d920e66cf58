package importers

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// A key the importer does not understand is often a typo of one it reads
// ("gradient_acumulation_steps", "--sequence-paralel"): the trainer then
// runs with the default of the real key, and so does the plan. These
// helpers name the key meant.

// suggestions maps each unknown key to the key the importer looks for
// that is nearest to it, where one is near enough to be a typo (nearKey):
// one the config lacks (the trainer then runs with its default), or one
// it has (a misspelt override on the command line, batch_sise=4, leaves
// the file's value).
func (t *tree) suggestions(unknown, noEffect []string) map[string]string {
	var known []string
	for k := range t.asked {
		known = append(known, k)
	}
	for _, k := range noEffect {
		if !strings.HasSuffix(k, ".*") {
			known = append(known, k)
		}
	}
	out := map[string]string{}
	for _, u := range unknown {
		if k := nearKey(u, known); k != "" {
			out[u] = k
		}
	}
	return out
}

// typoOf is the key of the config, unread, that may be a typo of key, a
// key the importer needed and did not find: "" when none is near enough.
func (t *tree) typoOf(key string) string {
	if _, present := t.leaves[key]; present {
		return ""
	}
	var unread []string
	for k := range t.leaves {
		if !t.used[k] {
			unread = append(unread, k)
		}
	}
	return nearKey(key, unread)
}

// nearKey is the candidate nearest to key, at most two edits apart (one
// for keys under 8 characters, none under 4: "ep" is no typo of "pp")
// once case and _/- are ignored, the alphabetically first of those
// equally near; "" when none is.
func nearKey(key string, candidates []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	n := norm(key)
	limit := 2
	switch {
	case len(n) < 4:
		return ""
	case len(n) < 8:
		limit = 1
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		d := units.EditDistance(n, norm(c))
		if d == 0 && c == key {
			continue
		}
		if d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	return best
}

// WithDidYouMean is the unknown key as memsh check lists it: with the
// key it is likely a typo of, when there is one.
func (r *Result) WithDidYouMean(key string) string {
	if k, ok := r.DidYouMean[key]; ok {
		return fmt.Sprintf("%s (did you mean %s?)", key, quoteKey(k))
	}
	return key
}
