package timing

import (
	"testing"

	"github.com/memsh/memsh/sim/hw"
)

// mustDevice is the catalog's GPU name, or the test stops.
func mustDevice(t *testing.T, name string) hw.Device {
	t.Helper()
	d, err := hw.LookupDevice(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
