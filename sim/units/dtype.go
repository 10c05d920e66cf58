package units

import (
	"fmt"
	"strings"
)

// DType is a tensor element type. The zero value is invalid.
type DType uint8

// The dtypes memsh knows. TF32 is stored as 32 bits (it is a matmul mode of
// fp32 tensors); NF4 is 4 bits per element plus block constants, which are
// accounted by the quantization rules, not by the dtype.
const (
	InvalidDType DType = iota
	FP32
	TF32
	BF16
	FP16
	FP8
	INT8
	NF4
	INT64 // token ids and edge indices
	BOOL  // dropout and attention masks (one byte each, as PyTorch stores them)
	FP64
	INT32 // DeepSeek Sparse Attention's top-k token indices (DeepseekV32Indexer)
)

var dtypeInfo = [...]struct {
	name string
	bits int
}{
	InvalidDType: {"invalid", 0},
	FP32:         {"fp32", 32},
	TF32:         {"tf32", 32},
	BF16:         {"bf16", 16},
	FP16:         {"fp16", 16},
	FP8:          {"fp8", 8},
	INT8:         {"int8", 8},
	NF4:          {"nf4", 4},
	INT64:        {"int64", 64},
	BOOL:         {"bool", 8},
	FP64:         {"fp64", 64},
	INT32:        {"int32", 32},
}

// Name is the short lower-case name users type ("bf16").
func (d DType) Name() string {
	if int(d) >= len(dtypeInfo) {
		return "invalid"
	}
	return dtypeInfo[d].name
}

func (d DType) String() string { return d.Name() }

// Bits is the storage width of one element.
func (d DType) Bits() int {
	if int(d) >= len(dtypeInfo) {
		return 0
	}
	return dtypeInfo[d].bits
}

// Bytes returns the storage of n elements, rounded up to whole bytes.
func (d DType) Bytes(n int64) int64 {
	b := d.Bits()
	if b%8 == 0 {
		return n * int64(b/8)
	}
	return (n*int64(b) + 7) / 8
}

// Float reports whether tensors of this dtype can carry gradients.
func (d DType) Float() bool {
	switch d {
	case FP32, TF32, BF16, FP16, FP8, FP64:
		return true
	}
	return false
}

// UserDTypes are the dtypes predeclared in scripts.
func UserDTypes() []DType { return []DType{FP32, TF32, BF16, FP16, FP8, INT8, NF4} }

// ParseDType looks a dtype up by name ("bf16", "float32" and "bfloat16" too).
func ParseDType(name string) (DType, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "float32", "float":
		n = "fp32"
	case "bfloat16":
		n = "bf16"
	case "float16", "half":
		n = "fp16"
	case "float8", "fp8_e4m3", "fp8_e5m2":
		n = "fp8"
	}
	for d := range dtypeInfo {
		if d != 0 && dtypeInfo[d].name == n {
			return DType(d), nil
		}
	}
	return InvalidDType, fmt.Errorf("unknown dtype %q (known: fp32, tf32, bf16, fp16, fp8, int8, nf4)", name)
}
