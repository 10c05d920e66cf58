package lang_test

import (
	"testing"

	"github.com/memsh/memsh/lang/langtest"
)

// TestGoldens runs lang/testdata/*.txtar (see package langtest).
func TestGoldens(t *testing.T) { langtest.Run(t, "testdata") }
