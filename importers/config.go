package importers

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// leaf is one value of a config, by its dotted key: a scalar, or a list
// kept whole (its items are not keys of their own).
type leaf struct {
	value any // nil, bool, int64, float64, string or []any / map[string]any inside lists
	line  int // the line in the config file, 0 when unknown
	// override: set on the command line (key=value), not in the file
	override bool
}

// tree is a config as flat dotted keys ("model.lora_rank"), with what the
// importer read of it: every key is either read (used), declared of no
// effect on memory, understood but not modelled, or left over, and the
// left-overs are printed as not understood. Nothing is dropped silently.
type tree struct {
	file        string
	leaves      map[string]leaf
	used        map[string]bool
	asked       map[string]bool // every key the importer looked for, in the file or not (for did-you-mean)
	notModelled []string        // "key: why"
	// from maps a key one importer derived for another's reading to the
	// file's key it came from (LLaMA-Factory's cutoff_len gives the hf
	// importer's max_length): errors name the file's key, and a derived
	// key is never listed as not understood.
	from map[string]string
	// inverse marks a derived key whose bool is the opposite of its
	// source's (deriveNot).
	inverse map[string]bool
	// alias names a key a reader renamed to the name it reads (OpenRLHF's
	// flat --zero_stage read as ds.zero_stage) by the file's own name, in
	// errors and in the keys not understood.
	alias map[string]string
}

func newTree(file string) *tree {
	return &tree{file: file, leaves: map[string]leaf{}, used: map[string]bool{}, asked: map[string]bool{}, from: map[string]string{}, inverse: map[string]bool{}, alias: map[string]string{}}
}

// derive sets key to v for another importer to read, made from the
// file's key src (which it marks read): at src's line, named as src in
// errors.
func (t *tree) derive(key string, v any, src string) {
	t.get(src)
	l := t.leaves[src]
	t.leaves[key] = leaf{value: v, line: l.line, override: l.override}
	t.from[key] = src
}

// setDefault sets key to v where the file says nothing of it: the
// default of the trainer's own config class where it differs from what
// the reader of the key assumes (GRPOConfig's gradient_checkpointing and
// bf16). The key is the file's own (no line: the file has none).
func (t *tree) setDefault(key string, v any) {
	if _, ok := t.leaves[key]; !ok {
		t.leaves[key] = leaf{value: v}
	}
}

// deriveNot is derive for a bool that is the opposite of src's
// (LLaMA-Factory's disable_gradient_checkpointing: the Trainer's
// gradient_checkpointing), which the advice's keys say so (plan.keyOf).
func (t *tree) deriveNot(key string, v bool, src string) {
	t.derive(key, v, src)
	t.inverse[key] = true
}

// add flattens v (a decoded map) into the tree under prefix.
func (t *tree) add(prefix string, v any, line int) {
	if m, ok := v.(map[string]any); ok && (len(m) > 0 || prefix == "") {
		for k, x := range m {
			t.add(join(prefix, k), x, line)
		}
		return
	}
	t.leaves[prefix] = leaf{value: v, line: line}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// override sets key to value (the command line's key=value, Hydra's and
// torchtune's override syntax; a leading + adds a key): the value is read
// as a YAML scalar, and whatever lay under key is replaced.
func (t *tree) override(arg string) error {
	key, value, ok := strings.Cut(arg, "=")
	key = strings.TrimPrefix(key, "+")
	if !ok || key == "" || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		return &Error{File: "command line", Msg: fmt.Sprintf("override %s is not key=value", quoteKey(arg)),
			Hint: "write the config's dotted key, e.g. batch_size=4 or training.ensemble_size_per_device=3"}
	}
	v, err := parseScalar(value)
	if err != nil {
		return &Error{File: "command line", Key: key, Msg: err.Error()}
	}
	for k := range t.leaves {
		if k == key || strings.HasPrefix(k, key+".") {
			delete(t.leaves, k)
		}
	}
	t.leaves[key] = leaf{value: v, override: true}
	return nil
}

// keys returns the tree's keys, sorted.
func (t *tree) keys() []string {
	ks := make([]string, 0, len(t.leaves))
	for k := range t.leaves {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// interpolation is OmegaConf's ${a.b} reference to another key.
var interpolation = regexp.MustCompile(`^\$\{([A-Za-z0-9_.]+)\}$`)

// get returns key's value (nil for an absent key or null) and marks it
// read; a value that is exactly an ${other.key} reference is that key's.
func (t *tree) get(key string) (any, bool) {
	t.asked[key] = true
	l, ok := t.leaves[key]
	if !ok {
		return nil, false
	}
	t.used[key] = true
	for range 8 { // references of references, never a cycle
		s, isStr := l.value.(string)
		m := interpolation.FindStringSubmatch(s)
		if !isStr || m == nil {
			break
		}
		ref, found := t.leaves[m[1]]
		if !found {
			return nil, true
		}
		l = ref
	}
	return l.value, true
}

// errorf is an *Error at key, with its line when the file gave one.
func (t *tree) errorf(key, hint, format string, args ...any) *Error {
	if src, ok := t.from[key]; ok {
		key = src
	}
	e := &Error{File: t.file, Key: key, Msg: fmt.Sprintf(format, args...), Hint: hint}
	if a, ok := t.alias[key]; ok {
		e.Key = a
	}
	if l, ok := t.leaves[key]; ok {
		e.Line = l.line
		if l.override {
			e.File = "command line"
		}
	}
	return e
}

// str reads a string key; def when absent or null.
func (t *tree) str(key, def string) (string, error) {
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return def, nil
	case string:
		return x, nil
	}
	return "", t.errorf(key, "", "want a string, got %s", describe(v))
}

// integer reads a whole-number key in [min, max]; def when absent or null.
func (t *tree) integer(key string, def, min, max int64) (int64, error) {
	v, _ := t.get(key)
	var n int64
	switch x := v.(type) {
	case nil:
		return def, nil
	case int64:
		n = x
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, t.errorf(key, "", "want a whole number, got %v", x)
		}
		n = int64(x)
	case string: // "4" from an environment variable or a shell script
		p, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, t.errorf(key, "", "want a whole number, got %s", describe(v))
		}
		n = p
	default:
		return 0, t.errorf(key, "", "want a whole number, got %s", describe(v))
	}
	if n < min || n > max {
		return 0, t.errorf(key, "", "%d is out of range (want %d to %d)", n, min, max)
	}
	return n, nil
}

// probability reads a probability in [0, 1) (a dropout); def when absent
// or null.
func (t *tree) probability(key string, def float64) (float64, error) {
	v, _ := t.get(key)
	if v == nil {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok || f < 0 || f >= 1 {
		return 0, t.errorf(key, "", "want a probability in [0, 1), got %s", describe(v))
	}
	return f, nil
}

// boolean reads a true/false key; def when absent or null.
func (t *tree) boolean(key string, def bool) (bool, error) {
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return def, nil
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "true", "1", "yes":
			return true, nil
		case "false", "0", "no":
			return false, nil
		}
	case int64:
		if x == 0 || x == 1 {
			return x == 1, nil
		}
	}
	return false, t.errorf(key, "", "want true or false, got %s", describe(v))
}

// strings reads a list of strings; nil when absent or null.
func (t *tree) strs(key string) ([]string, error) {
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, t.errorf(key, "", "want a list of names, got an item %s", describe(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, t.errorf(key, "", "want a list of names, got %s", describe(v))
}

// notModelledIf records key as understood but not modelled when its value
// is set (not absent, null, false or 0): a setting that changes memory in
// a way memsh does not replay yet.
func (t *tree) notModelledIf(key, why string) {
	v, _ := t.get(key)
	switch x := v.(type) {
	case nil:
		return
	case bool:
		if !x {
			return
		}
	case int64:
		if x == 0 {
			return
		}
	}
	t.notModelled = append(t.notModelled, key+": "+why)
}

// notModelledUnder records key, or the keys under it (a component's
// arguments), as one setting understood but not modelled, when any is in
// the config.
func (t *tree) notModelledUnder(key, why string) {
	t.asked[key] = true
	found := false
	for k := range t.leaves {
		if k == key || strings.HasPrefix(k, key+".") {
			t.used[k], found = true, true
		}
	}
	if found {
		t.notModelled = append(t.notModelled, key+": "+why)
	}
}

// notes is notModelled with each note's key ("key: why") named as the
// file names it (alias).
func (t *tree) notes() []string {
	if len(t.alias) == 0 {
		return t.notModelled
	}
	out := make([]string, len(t.notModelled))
	for i, n := range t.notModelled {
		if k, why, ok := strings.Cut(n, ": "); ok && t.alias[k] != "" {
			n = t.alias[k] + ": " + why
		}
		out[i] = n
	}
	return out
}

// notUnderstood lists the keys neither read nor matched by noEffect
// (patterns: "key", "prefix.*").
func (t *tree) notUnderstood(noEffect []string) []string {
	var out []string
	for _, k := range t.keys() {
		if _, derived := t.from[k]; !derived && !t.used[k] && !matchAny(k, noEffect) {
			if a, ok := t.alias[k]; ok {
				k = a
			}
			out = append(out, k)
		}
	}
	return out
}

// matchAny says whether key matches one of the patterns: a key, or a
// prefix followed by ".*" for every key under it.
func matchAny(key string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, ".*"); ok {
			if key == prefix || strings.HasPrefix(key, prefix+".") {
				return true
			}
		} else if key == p {
			return true
		}
	}
	return false
}

// describe is a value as an error message shows it.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return quoteKey(x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case *pyObj: // a Python config's object: its class
		return x.class
	}
	return fmt.Sprintf("%v", v)
}
