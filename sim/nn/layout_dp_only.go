package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// dataParallelOnly refuses tensor, pipeline and context parallelism for
// a module modelled whole on each data-parallel replica (the vision
// towers of Gemma 3, InternVL, Llama 3.2 Vision and Llama 4), naming the
// degrees given: the refusal read "(tp, pp and cp are 1)", as if they
// were.
func dataParallelOnly(path, what string, par core.Parallelism, hint string) error {
	if n := par.Norm(); n.TP > 1 || n.PP > 1 || n.CP > 1 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("%s is modelled with data parallelism only: tp, pp and cp must be 1 (got tp=%d, pp=%d, cp=%d)", what, n.TP, n.PP, n.CP),
			Hint: hint}
	}
	return nil
}
