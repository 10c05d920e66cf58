package units

import "fmt"

// Overflow-safe sizes. Every figure in a report is an int64 of bytes, a sum
// of tensor sizes that are products of shapes. A wrapped product would be a
// silently wrong number (linear(2**32, 2**32) has 2**64 weights, which
// wraps to 0), so sizes are checked where they enter the engine:
//
//   - each tensor's element count (numel, core/builder.go) is at most
//     MaxElements, so its bytes in the widest dtype (8 bytes) are at most
//     MaxBytes, and DType.Bytes of it cannot overflow;
//   - a lowered program (checkTotals) bounds everything a step can hold at
//     once, parameters with all their copies and every forward value with
//     its gradient, by MaxBytes, and the same times the step's
//     micro-batches, so the replay's and the allocator's sums, traffic and
//     collectives per step stay below it;
//   - parallel layouts and clusters have at most MaxGPUs GPUs (checkCounts),
//     so products of degrees cannot overflow;
//   - a program has at most maxOps ops and maxParamTensors parameter
//     tensors, so runaway repeat, expert or head counts are errors, not
//     minutes of lowering or an out-of-memory.
//
// MaxBytes is 2^62 (4 EiB), half of int64's range, so that the sum of two
// checked figures still fits.

// MaxBytes is the largest byte count the engine works with: 4 EiB.
const MaxBytes int64 = 1 << 62

// MaxElements is the largest element count of one tensor: MaxBytes over
// the widest dtype (fp64, int64: 8 bytes).
const MaxElements int64 = MaxBytes / 8

// paramCopiesBound is the most bytes one parameter element can cost in a
// step, counted generously so that the bound is safe: the parameter, its
// gradient, an fp32 master copy, two optimizer states (Adam's exp_avg and
// exp_avg_sq) and one optimizer temporary, each at most 8 bytes.
const ParamCopiesBound = 6 * 8

// valueCopiesBound is how many times a forward value's bytes can be held
// at once, counted generously: the value, its gradient, a recomputed copy
// (checkpointing) and a cast or gathered copy.
const ValueCopiesBound = 4

// mulChecked64 returns a*b for non-negative a and b, and false when the
// product exceeds limit (or either factor is negative).
func MulChecked64(a, b, limit int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > limit/b {
		return 0, false
	}
	return a * b, true
}

// addChecked64 returns a+b for non-negative a and b, and false when the sum
// exceeds limit (or either term is negative).
func AddChecked64(a, b, limit int64) (int64, bool) {
	if a < 0 || b < 0 || a > limit-b {
		return 0, false
	}
	return a + b, true
}

// CheckedProduct multiplies non-negative factors, reporting false when a
// factor is negative or the product exceeds MaxBytes. Callers outside sim
// (builtins sizing tensors from user numbers) use it before multiplying.
func CheckedProduct(factors ...int64) (int64, bool) {
	p := int64(1)
	for _, f := range factors {
		var ok bool
		if p, ok = MulChecked64(p, f, MaxBytes); !ok {
			return 0, false
		}
	}
	return p, true
}

// shapeNumel is the element count of shape, and false when a dimension is
// negative or the count exceeds MaxElements.
func ShapeNumel(shape []int64) (int64, bool) {
	n := int64(1)
	for _, d := range shape {
		var ok bool
		if n, ok = MulChecked64(n, d, MaxElements); !ok {
			return 0, false
		}
	}
	return n, true
}

// shapeError is the error for a tensor whose element count cannot be
// counted (raised during lowering, as a lowerError).
func ShapeError(shape []int64) *Error {
	for _, d := range shape {
		if d < 0 {
			return &Error{Msg: fmt.Sprintf("a tensor would have a negative dimension (shape %v)", shape),
				Hint: HintTensor}
		}
	}
	return &Error{
		Msg:  fmt.Sprintf("a tensor of shape %v is too large to count in bytes (%.3g elements, at most 2^59)", shape, FloatProduct(shape)),
		Hint: HintTensor,
	}
}

// floatProduct is the product of dims in float64, for messages.
func FloatProduct(dims []int64) float64 {
	p := 1.0
	for _, d := range dims {
		p *= float64(d)
	}
	return p
}

// hintTensor is the hint of a tensor size error (isSizeError tells size
// errors apart by their hints).
const HintTensor = "check batch=, seq= and the layer sizes: memsh counts up to 4 EiB (2^62 bytes)"
