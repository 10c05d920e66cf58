package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// ZeroSize is one of DeepSpeed ZeRO's buffer and threshold sizes, in
// elements, as a plan gives it. The zero value is DeepSpeed's default
// (ZeroSizes); Auto is the Hugging Face Trainer's "auto", which it fills
// from the model's hidden size before DeepSpeed reads the config
// (transformers integrations/deepspeed.py, trainer_config_finalize: 5.25.0
// l.204-243, the same rule in 4.57.1): reduce_bucket_size hidden²,
// stage3_prefetch_bucket_size int(0.9 hidden²),
// stage3_param_persistence_threshold 10 hidden.
type ZeroSize struct {
	N    int64 // elements, when Set
	Set  bool
	Auto bool
}

// ZeroSizes are the sizes a ZeRO replay runs with, in elements.
type ZeroSizes struct {
	ReduceBucket   int64 // reduce_bucket_size: ZeRO-1/2's gradient bucket, ZeRO-3's reduce buffer
	PrefetchBucket int64 // stage3_prefetch_bucket_size: the parameters ZeRO-3 gathers ahead
	Persistence    int64 // stage3_param_persistence_threshold: smaller modules stay gathered
	MaxLive        int64 // stage3_max_live_parameters: ZeRO-3 prefetches while fewer are gathered (0: no prefetch)
}

// zeroDefaults are DeepSpeedZeroConfig's defaults (deepspeed/runtime/
// zero/config.py at edaa722: reduce_bucket_size 5e8,
// prefetch_bucket_size 5e7, param_persistence_threshold 1e5,
// max_live_parameters 1e9).
var zeroDefaults = ZeroSizes{ReduceBucket: 500_000_000, PrefetchBucket: 50_000_000, Persistence: 100_000, MaxLive: 1_000_000_000}

// ZeroSizes are plan p's ZeRO sizes: each its own, DeepSpeed's default, or
// the Trainer's fill from the model's hidden size (the width of its token
// embedding: config.hidden_size, or the text model's, for every model
// hf_config builds). Validate checks that an auto size has a hidden size.
func (p *Plan) ZeroSizes() ZeroSizes {
	par := p.Parallel
	h := p.zeroHidden()
	pick := func(s ZeroSize, def, auto int64) int64 {
		switch {
		case s.Auto:
			return auto
		case s.Set:
			return s.N
		}
		return def
	}
	return ZeroSizes{
		ReduceBucket:   pick(par.ReduceBucketSize, zeroDefaults.ReduceBucket, h*h),
		PrefetchBucket: pick(par.PrefetchBucketSize, zeroDefaults.PrefetchBucket, int64(0.9*float64(h*h))),
		Persistence:    pick(par.ParamPersistenceThreshold, zeroDefaults.Persistence, 10*h),
		MaxLive:        pick(par.MaxLiveParameters, zeroDefaults.MaxLive, zeroDefaults.MaxLive),
	}
}

// zeroHidden is the model's hidden size as the Trainer's auto reads it:
// its token embedding's width; 0 when it has none.
func (p *Plan) zeroHidden() int64 {
	if p.Model == nil {
		return 0
	}
	_, emb := p.Model.HeadShape()
	if len(emb) != 2 {
		return 0
	}
	return emb[1]
}

// validZeroSizes checks a layout's ZeRO sizes: set only with the stages
// that read them, not negative, a reduce bucket with room, and "auto"
// only where the Trainer fills it.
func (par Parallelism) validZeroSizes() error {
	for _, s := range par.zeroSizeKeys() {
		if !s.size.Set && !s.size.Auto {
			continue
		}
		if par.Zero < s.stage {
			need := "zero=1, 2 or 3"
			if s.stage == 3 {
				need = "zero=3"
			}
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("%s= is DeepSpeed ZeRO's (zero_optimization.%s), and this layout has zero=%d", s.name, s.name, par.Zero),
				Hint: "add " + need + ", or drop " + s.name}
		}
		if s.size.Auto && !s.auto {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("%s=\"auto\": the Hugging Face Trainer fills auto only for reduce_bucket_size, stage3_prefetch_bucket_size and stage3_param_persistence_threshold", s.name),
				Hint: "give a number of elements"}
		}
		if s.size.Set && (s.size.N < 0 || s.size.N == 0 && s.name == "reduce_bucket_size") {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("%s=%d: the bucket needs room for a gradient", s.name, s.size.N),
				Hint: fmt.Sprintf("a positive number of elements (DeepSpeed's default is %d), or \"auto\"", zeroDefaults.ReduceBucket)}
		}
	}
	return nil
}

// validZeroAuto checks that an "auto" ZeRO size has a hidden size to be
// filled from.
func (p *Plan) validZeroAuto() error {
	for _, s := range p.Parallel.zeroSizeKeys() {
		if s.size.Auto && p.zeroHidden() == 0 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("%s=\"auto\" is the Trainer's fill from the model's hidden_size, and this model has no token embedding to read it from", s.name),
				Hint: "give a number of elements"}
		}
	}
	return nil
}

type zeroSizeKey struct {
	name  string
	size  ZeroSize
	stage int  // the lowest ZeRO stage that reads it
	auto  bool // the Trainer fills "auto"
}

// zeroSizeKeys are the layout's ZeRO sizes by DeepSpeed's names.
func (par Parallelism) zeroSizeKeys() []zeroSizeKey {
	return []zeroSizeKey{
		{"reduce_bucket_size", par.ReduceBucketSize, 1, true},
		{"stage3_prefetch_bucket_size", par.PrefetchBucketSize, 3, true},
		{"stage3_param_persistence_threshold", par.ParamPersistenceThreshold, 3, true},
		{"stage3_max_live_parameters", par.MaxLiveParameters, 3, false},
	}
}

// String is the size as parallel() takes it.
func (s ZeroSize) String() string {
	if s.Auto {
		return `"auto"`
	}
	return fmt.Sprint(s.N)
}
