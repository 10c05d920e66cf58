package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// What package sim_test's differential tests of memsh check's
// Megatron-SWIFT reader (calib_swift_check_test.go) read of
// TestMegatronSwiftCalibration.

// MegatronSwiftRowPlan is the plan TestMegatronSwiftCalibration replays
// for the row named name, on its A800 (an A100-80GB whose NVLink runs at
// 200 GB/s a direction).
func MegatronSwiftRowPlan(t *testing.T, name string) *core.Plan {
	t.Helper()
	prec, rt, a800 := megatronSwiftSetting(t)
	for _, row := range megatronSwiftRows(t) {
		if row.name == name {
			return row.plan(t, prec, rt, a800)
		}
	}
	t.Fatalf("TestMegatronSwiftCalibration has no row %q", name)
	return nil
}

// FullestGiB is nvidia-smi's figure of the report's fullest rank, in GiB.
func FullestGiB(r *replay.Report) float64 { return fullestGiB(r) }
