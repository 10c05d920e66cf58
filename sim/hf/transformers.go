package hf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// DefaultTransformers is the transformers version the models are built
// for when none is given: the one tools/oracle measures against.
const DefaultTransformers = "4.57.1"

// gqaSince is the first transformers release whose SDPA path passes
// enable_gqa=True instead of expanding k and v (use_gqa_in_sdpa in
// integrations/sdpa_attention.py: absent from the 4.53.3 wheel, present
// in 4.54.0; huggingface/transformers#39412).
var gqaSince = [2]int{4, 54}

// parseTransformers reads "major.minor[.patch...]".
func parseTransformers(v string) ([2]int, error) {
	parts := strings.Split(v, ".")
	bad := &units.Error{Msg: fmt.Sprintf("transformers must be a version such as %q (got %q)", DefaultTransformers, v),
		Hint: "the transformers release the model trains with: pip show transformers"}
	if len(parts) < 2 {
		return [2]int{}, bad
	}
	var out [2]int
	for i := range out {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n < 0 || n > 1000 {
			return [2]int{}, bad
		}
		out[i] = n
	}
	return out, nil
}

// useTransformers sets what depends on the transformers version on the
// model's attention layers: whether SDPA gets the kv heads as they are
// (nn.Attention.EnableGQA).
func useTransformers(m *core.Model, version string) error {
	if version == "" {
		version = DefaultTransformers
	}
	v, err := parseTransformers(version)
	if err != nil {
		return err
	}
	gqa := v[0] > gqaSince[0] || (v[0] == gqaSince[0] && v[1] >= gqaSince[1])
	for _, l := range m.Layers {
		setEnableGQA(l, gqa)
	}
	return nil
}

func setEnableGQA(l core.Layer, on bool) {
	if a, ok := l.(*nn.Attention); ok {
		a.EnableGQA = on
	}
	for _, c := range l.Children() {
		setEnableGQA(c, on)
	}
}
