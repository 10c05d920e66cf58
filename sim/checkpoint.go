package sim

import "fmt"

// Checkpoint is an activation-checkpointing policy. A checkpointed region
// keeps only its inputs in forward and re-runs its forward inside backward,
// so its whole saved set comes back at once.
//
//   - none: nothing is recomputed.
//   - full: every repeated block (each copy inside repeat()) is a region.
//   - selective: the attention core (QK^T, softmax, dropout, PV) of each
//     attention is a region (Korthikanti et al. 2022, Megatron
//     --recompute-granularity selective).
//   - every=k: one block in every k is checkpointed (torchtune's
//     selective "ac_option" integer), starting with the first.
//   - modules: layers whose name or kind is listed are regions.
type Checkpoint struct {
	Mode      string // none | full | selective | every | modules
	Every     int
	Modules   []string
	Selective bool
}

// ParseCheckpoint reads the string forms.
func ParseCheckpoint(s string) (Checkpoint, error) {
	switch s {
	case "", "none":
		return Checkpoint{Mode: "none"}, nil
	case "full":
		return Checkpoint{Mode: "full", Every: 1}, nil
	case "selective":
		return Checkpoint{Mode: "selective", Selective: true}, nil
	}
	return Checkpoint{}, fmt.Errorf("unknown checkpoint %q (known: none, full, selective, or checkpoint(every=k, modules=[...]))", s)
}

func (c Checkpoint) block(i int) bool {
	switch c.Mode {
	case "full":
		return true
	case "every":
		return c.Every > 0 && i%c.Every == 0
	}
	return false
}

func (c Checkpoint) matches(l Layer) bool {
	if c.Mode != "modules" {
		return false
	}
	for _, m := range c.Modules {
		if m == l.Kind() || (l.Label() != "" && m == l.Label()) {
			return true
		}
	}
	return false
}

// String is the user-facing form.
func (c Checkpoint) String() string {
	switch c.Mode {
	case "every":
		return fmt.Sprintf("checkpoint(every=%d)", c.Every)
	case "modules":
		return fmt.Sprintf("checkpoint(modules=%q)", c.Modules)
	}
	if c.Mode == "" {
		return "none"
	}
	return c.Mode
}
