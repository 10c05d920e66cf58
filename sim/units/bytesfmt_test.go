package units

import (
	"math"
	"testing"
)

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{512, "512 B"},
		{1023, "1023 B"},
		{1024, "1.00 KiB"},
		{1536, "1.50 KiB"},
		{1048575, "1.00 MiB"}, // 1023.999 KiB rounds up to the next unit
		{1 << 20, "1.00 MiB"},
		{11_135_229_952, "10.37 GiB"}, // SEEDS.md story 1: 2 x 1,359,281 x 1024 x 4 B
		{143_771 << 20, "140.40 GiB"},
		{1 << 40, "1.00 TiB"},
		{math.MaxInt64, "8.00 EiB"},
		{-1536, "-1.50 KiB"},
		{-512, "-512 B"},
		{math.MinInt64, "-8.00 EiB"},
	} {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestFormatBytesDecimal(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{999, "999 B"},
		{1000, "1.00 KB"},
		{1500, "1.50 KB"},
		{999_999, "1.00 MB"},
		{11_135_229_952, "11.14 GB"},
		{80_000_000_000, "80.00 GB"},
		{2_500_000_000_000, "2.50 TB"},
		{-11_135_229_952, "-11.14 GB"},
	} {
		if got := FormatBytesDecimal(tc.n); got != tc.want {
			t.Errorf("FormatBytesDecimal(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
