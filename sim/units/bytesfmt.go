package units

import (
	"math"
	"strconv"
)

// FormatBytes renders n bytes in binary units with two decimals, as PyTorch
// does in its OOM message: "512 B", "1.50 KiB", "10.37 GiB". Negative
// values (a negative headroom) keep their sign.
func FormatBytes(n int64) string {
	return formatBytes(n, 1024, []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"})
}

// FormatBytesDecimal renders n bytes in decimal (SI) units with two
// decimals: "512 B", "1.50 KB", "11.14 GB".
func FormatBytesDecimal(n int64) string {
	return formatBytes(n, 1000, []string{"KB", "MB", "GB", "TB", "PB", "EB"})
}

func formatBytes(n int64, base float64, units []string) string {
	if n < 0 {
		if n == math.MinInt64 {
			// -n overflows; the magnitude is exact enough in float64.
			return "-" + scaled(-float64(n), base, units)
		}
		return "-" + formatBytes(-n, base, units)
	}
	if float64(n) < base {
		return strconv.FormatInt(n, 10) + " B"
	}
	return scaled(float64(n), base, units)
}

// scaled picks the largest unit that keeps the value at or above 1 after
// rounding to two decimals, so 1,048,575 B reads "1.00 MiB", not
// "1024.00 KiB".
func scaled(v, base float64, units []string) string {
	i := -1
	for i+1 < len(units) && v >= base {
		v /= base
		i++
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if i+1 < len(units) && s == strconv.FormatFloat(base, 'f', 2, 64) {
		v /= base
		i++
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return s + " " + units[i]
}
