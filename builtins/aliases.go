package builtins

import (
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
)

// AliasHint says what memsh calls a name that is no builtin, keyword or
// report field of its own but a trainer's or PyTorch's
// (per_device_train_batch_size, max_memory_allocated), for memsh doc and
// the REPL's :help; "" for any other name.
func AliasHint(name string) string {
	if h := plans.TrainAlias(name, "N"); h != "" {
		return h
	}
	return reports.FieldAlias(name)
}
