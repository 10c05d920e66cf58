package core

import (
	"reflect"
	"slices"
)

// sides are the builder and the program header as a block's lowering
// began, and the lengths of the builder's maps and lists it fills in
// place (a copy of the builder shares them): keepTemplate keeps the
// block only if its lowering left them as they were, but for the
// builder's progress (sameAs) and the program's lists, which progCounts
// and copyable cover.
type sides struct {
	b                                      Builder
	p                                      Program
	teInput, aoGrad, aoFP8, loraHits, dead int
}

// of sets s to b's sides now.
func (s *sides) of(b *Builder) {
	*s = sides{b: *b, p: *b.P, teInput: len(b.teInput), aoGrad: len(b.aoInput.grad), aoFP8: len(b.aoInput.fp8), loraHits: len(b.loraHits)}
	s.dead = deadLen(b)
}

// deadLen is how many values b's dead graph holds (0 without one).
func deadLen(b *Builder) int {
	if b.dead == nil {
		return 0
	}
	return len(*b.dead)
}

// sameAs says whether b is as s was but for its progress: the program
// it appends to, the module path, the names taken, the block index, the
// copies' arena, the input watched for its name, the scopes, the funcs
// and Megatron's fused inputs (the copied block's values, which no layer
// after it reads); and b's program as s's but for its lists. Its
// verdict is reflect.DeepEqual's of the two builders and the two
// program headers with those fields cleared, which it was until session
// 43 (1.5 % of BenchmarkSearchLlama70B1024's CPU): each field by itself
// now, a reference first by identity (TestSidesSameAsDeepEqual changes
// every field in turn).
func (s *sides) sameAs(b *Builder) bool {
	return s.teInput == len(b.teInput) && s.aoGrad == len(b.aoInput.grad) && s.aoFP8 == len(b.aoInput.fp8) &&
		s.loraHits == len(b.loraHits) && s.dead == deadLen(b) && sameBuilder(&s.b, b) && sameHeader(&s.p, b.P)
}

// sameBuilder is reflect.DeepEqual(x, y) but for the fields of a
// builder's progress (sameAs).
func sameBuilder(x, y *Builder) bool {
	return x.Batch == y.Batch && x.Seq == y.Seq && x.Prec == y.Prec && x.Rt == y.Rt && x.f8 == y.f8 && x.qat == y.qat &&
		x.quant == y.quant && x.Eval == y.Eval && x.region == y.region && x.graph == y.graph && x.compile == y.compile &&
		x.loraAdapted == y.loraAdapted && x.noGradTrain == y.noGradTrain && x.refCopy == y.refCopy &&
		x.policyFirst == y.policyFirst && x.klForward == y.klForward && x.bodyFirst == y.bodyFirst &&
		x.curBlock == y.curBlock && x.members == y.members && x.sequential == y.sequential && x.spread == y.spread &&
		x.rollout == y.rollout && x.inputGrad == y.inputGrad && x.embedOut == y.embedOut && x.tiedHead == y.tiedHead &&
		x.everyBlock == y.everyBlock && x.gen == y.gen && x.Par == y.Par && x.Images == y.Images && x.Videos == y.Videos &&
		x.shares == y.shares && x.reuse == y.reuse && x.reuseStrip == y.reuseStrip &&
		sameCheckpoint(&x.Ckpt, &y.Ckpt) && samePointer(x.Lora, y.Lora) && sameMap(x.teInput, y.teInput) &&
		sameMap(x.aoInput.grad, y.aoInput.grad) && sameMap(x.aoInput.fp8, y.aoInput.fp8) && samePointer(x.dead, y.dead) &&
		sameMap(x.loraHits, y.loraHits) && samePointer(x.loraRe, y.loraRe) && samePointer(x.pref, y.pref) &&
		sameMap(x.castCache, y.castCache) && sameMap(x.headCast, y.headCast) && samePointer(x.Ft, y.Ft) &&
		sameFinetune(&x.ft, &y.ft) && samePointer(x.Cross, y.Cross) && samePointer(x.Deepstack, y.Deepstack) &&
		sameMap(x.shared, y.shared) && sameMap(x.decoderLayers, y.decoderLayers)
}

// sameHeader is reflect.DeepEqual(p, q) but for the program's lists
// (sameAs).
func sameHeader(p, q *Program) bool {
	return p.Input == q.Input && p.InputTransient == q.InputTransient && p.Labels == q.Labels && p.Loss == q.Loss &&
		p.QuantSkippedAlways == q.QuantSkippedAlways && p.LigerKernels == q.LigerKernels &&
		p.SymmMemWorkspace == q.SymmMemWorkspace && sameList(p.BatchExtra, q.BatchExtra) && sameList(p.Docs, q.Docs) &&
		sameList(p.Float8Skipped, q.Float8Skipped) && sameList(p.QuantSkipped, q.QuantSkipped) && samePointer(p.Stage, q.Stage)
}

// sameFinetune is reflect.DeepEqual(a, b).
func sameFinetune(a, b *Finetune) bool {
	return a.quant == b.quant && a.quantHead == b.quantHead && a.quantExperts == b.quantExperts && a.quantFrom == b.quantFrom &&
		a.lossChunks == b.lossChunks && a.titan == b.titan && a.ligerLayers == b.ligerLayers && a.packed == b.packed &&
		a.docTokens == b.docTokens && a.keepLogits == b.keepLogits && a.keepLogitsNext == b.keepLogitsNext && a.useCache == b.useCache &&
		a.noAttnMask == b.noAttnMask && a.megatronMask == b.megatronMask && a.adapterDT == b.adapterDT &&
		a.peftExperts == b.peftExperts && a.peftMamba == b.peftMamba && a.cce == b.cce && a.trl == b.trl &&
		a.Unfreeze == b.Unfreeze && sameList(a.freeze, b.freeze) && sameList(a.trainablePatterns, b.trainablePatterns) &&
		sameList(a.docs, b.docs) && samePointer(a.liger, b.liger) && samePointers(a.trainable, b.trainable)
}

// sameList is reflect.DeepEqual of two slices of comparable elements
// without references: both nil or neither, and equal elements.
func sameList[T comparable](a, b []T) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// samePointers is reflect.DeepEqual of two slices of pointers: both nil
// or neither, and each pair of elements samePointer.
func samePointers[T any](a, b []*T) bool {
	return (a == nil) == (b == nil) && slices.EqualFunc(a, b, samePointer[T])
}

// samePointer is reflect.DeepEqual of two pointers: the same address, or
// equal values.
func samePointer[T any](a, b *T) bool {
	return a == b || reflect.DeepEqual(a, b)
}

// sameMap is reflect.DeepEqual of two maps: the same map (or both nil),
// or equal entries.
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() || reflect.DeepEqual(a, b)
}
