package search

import (
	"errors"
	"sort"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// reasonOf is the reason class of a plan's refusal: its message with
// every number written N, so that the refusals of one rule count
// together; the digits of a dtype's name (fp8, bf16, float8, int4:
// dtypeName) stay.
func reasonOf(err error) string {
	var room [256]byte // the class is written here (on the stack) when it fits: one allocation, the string, per refused layout
	return string(appendReason(room[:0], err))
}

// reasons keeps the reason classes one goroutine has made, so that the
// refusals of one rule share one string (reasonOf made one per refused
// layout: a twentieth of BenchmarkSearchLlama70B1024's bytes).
type reasons struct {
	known map[string]string
	room  [256]byte
}

// of is reasonOf(err), the string the first refusal of its class made.
func (rs *reasons) of(err error) string {
	b := appendReason(rs.room[:0], err)
	if s, ok := rs.known[string(b)]; ok { // no string made for the lookup
		return s
	}
	if rs.known == nil {
		rs.known = map[string]string{}
	}
	s := string(b)
	rs.known[s] = s
	return s
}

// appendReason appends reasonOf(err) to b.
func appendReason(b []byte, err error) []byte {
	switch e := err.(type) {
	case *units.Error:
		return appendClass(b, e.Msg) // its message alone: Error() would format path and hint too, for nothing
	case *units.IntError: // its message written on the stack, not worded (Plan.RefusalFor)
		var room [256]byte
		return appendClass(b, e.AppendMsg(room[:0]))
	}
	return appendClass(b, err.Error())
}

// appendClass appends msg with every number written N (reasonOf).
func appendClass[T string | []byte](b []byte, msg T) []byte {
	for i := 0; i < len(msg); {
		j := i // the text up to the next number, copied whole
		for j < len(msg) && !isDigit(msg[j]) {
			j++
		}
		b = append(b, msg[i:j]...)
		if j == len(msg) {
			break
		}
		k := j
		for k < len(msg) && isDigit(msg[k]) {
			k++
		}
		if dtypeName(msg[:j]) {
			b = append(b, msg[j:k]...) // fp8, bf16, int4: a name, not a figure
		} else {
			b = append(b, 'N')
		}
		i = k
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Reason is one class of refused layouts and how many there were.
type Reason struct {
	Why   string
	Count int
}

// sortedReasons lists counts by reason, most first.
func sortedReasons(counts map[string]int) []Reason {
	out := make([]Reason, 0, len(counts))
	for why, n := range counts {
		out = append(out, Reason{why, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Why < out[j].Why
	})
	return out
}

// layoutRefusal is err's refusal of the layout its lowering was given
// (core.LayoutError: another layout of the model may lower), nil when err
// is another error.
func layoutRefusal(err error) *units.Error {
	var le *core.LayoutError
	if errors.As(err, &le) {
		return le.Err
	}
	return nil
}

// layoutRefusals counts the layouts (by index into the plan's valid
// layouts; profileAt and shapeAt give each one's profile and shape)
// whose profile's lowering (errs) or shape's (serrs) refused their
// layout into counts by reason, and marks them in refused (nil when none
// is). Any other lowering error is returned, the profiles' first: the
// search fails on it, as on a model that does not lower at all.
func layoutRefusals(errs, serrs []error, profileAt, shapeAt []int32, counts map[string]int) (refused []bool, n int, err error) {
	reasons := func(list []error) ([]string, error) {
		var why []string
		for i, err := range list {
			if err == nil {
				continue
			}
			r := layoutRefusal(err)
			if r == nil {
				return nil, err
			}
			if why == nil {
				why = make([]string, len(list))
			}
			why[i] = reasonOf(r)
		}
		return why, nil
	}
	byProfile, err := reasons(errs)
	if err != nil {
		return nil, 0, err
	}
	byShape, err := reasons(serrs)
	if err != nil || byProfile == nil && byShape == nil {
		return nil, 0, err
	}
	refused = make([]bool, len(profileAt))
	for j := range profileAt {
		var why string
		if byProfile != nil {
			why = byProfile[profileAt[j]]
		}
		if why == "" && byShape != nil {
			why = byShape[shapeAt[j]]
		}
		if why != "" {
			refused[j] = true
			counts[why]++
			n++
		}
	}
	return refused, n, nil
}

// dtypeName reports whether text ends in the letters of a dtype's name
// whose digits follow: fp, bf, float, int (fp8, mxfp8, bf16, float8,
// int4), as the refusals name dtypes and kernels (assert_dim_for_fp8_exec).
func dtypeName[T string | []byte](text T) bool {
	for _, p := range [...]string{"fp", "bf", "float", "int", "FP", "BF"} {
		if n := len(text) - len(p); n >= 0 && string(text[n:]) == p {
			return true
		}
	}
	return false
}
