package host

import (
	"context"
	"errors"
	"fmt"
)

// stopError says why a long builtin (sweep, search) stopped before it was
// done: what plus "interrupted" after Ctrl-C, or the cause the host gave
// when it cancelled the run (memsh run --timeout names its flag there).
// detail follows the verb: " after 3 of 100 plans".
func StopError(ctx context.Context, what, detail string) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.Canceled) {
		return fmt.Errorf("%s interrupted%s", what, detail)
	}
	return fmt.Errorf("%s stopped%s: %v", what, detail, cause)
}
