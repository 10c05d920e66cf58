package core

import "slices"

// LayoutMemo is the verdicts of the checks a plan's layout gets that read
// the layout and the model alone, for the last layout a caller checked:
// the layout's own (Parallelism.Validate, and Norm's copy) and the
// model's (every layer's split, Model.validateParallel, and the pipeline
// stages' layers, stageLayersIn). A search checks each layout once per
// checkpoint policy in a row (its enumeration's innermost axis): the
// model's walk over its layers, and the wording of a refusal's paths,
// ran four times for one verdict. The owner's, used by one goroutine at
// a time, never a package's (Plan.RefusalIn).
type LayoutMemo struct {
	model *Model
	raw   Parallelism // the layout as the plan holds it
	known bool        // raw's verdicts are known: valid and norm
	valid error       // raw.Validate()'s
	norm  Parallelism // raw.Norm()
	// walked says whether the model's checks of norm ran (fits): a
	// plan whose other checks refuse it first never reaches them.
	walked bool
	fits   error
}

// layout sets m to the verdicts of raw's own checks, and forgets the
// model's unless model and raw are the ones m holds.
func (m *LayoutMemo) layout(model *Model, raw *Parallelism) {
	if m.known && m.model == model && sameLayout(&m.raw, raw) {
		return
	}
	*m = LayoutMemo{model: model, raw: *raw, known: true, valid: raw.Validate()}
	// Its own lists: the caller may write the plan's again.
	m.raw.StageLayers, m.raw.FSDPUnits = slices.Clone(raw.StageLayers), slices.Clone(raw.FSDPUnits)
	if m.valid == nil {
		m.norm = raw.Norm()
	}
}

// modelFits is whether the model fits m's layout: every layer's split and
// the pipeline's stages (the model's checks at validateParallel's end).
func (m *LayoutMemo) modelFits() error {
	if m.walked {
		return m.fits
	}
	m.walked = true
	if m.fits = m.model.validateParallel(m.norm); m.fits != nil {
		return m.fits
	}
	if m.norm.PP > 1 {
		var room [128]int64 // the chunks' blocks (pp x virtual stages: up to 80 for a 70B, 126 for Llama 3 405B), read by nothing here
		_, _, m.fits = stageLayersIn(room[:0], m.model, m.norm)
	}
	return m.fits
}

// sameLayout says whether a and b are the same layout: every field equal
// (a slice nil in both or in neither, and by its elements; a NaN float is
// equal to nothing, so a layout holding one is checked again). Its checks read nothing else of a
// layout (TestSameLayoutComparesEveryField changes each field in turn).
func sameLayout(a, b *Parallelism) bool {
	return a.DP == b.DP && a.TP == b.TP && a.PP == b.PP && a.CP == b.CP && a.EP == b.EP && a.Zero == b.Zero &&
		a.FSDP == b.FSDP && a.FSDPVersion == b.FSDPVersion && a.SequenceParallel == b.SequenceParallel &&
		a.Schedule == b.Schedule && a.VirtualStages == b.VirtualStages && a.MicroBatches == b.MicroBatches &&
		a.DistributedOptimizer == b.DistributedOptimizer && a.CPMode == b.CPMode && a.LossParallel == b.LossParallel &&
		a.PPRuntime == b.PPRuntime && a.TPRuntime == b.TPRuntime && a.NoOverlapGradReduce == b.NoOverlapGradReduce &&
		a.NoOverlapParamGather == b.NoOverlapParamGather && a.OverlapComm == b.OverlapComm &&
		a.ReduceBucketSize == b.ReduceBucketSize && a.PrefetchBucketSize == b.PrefetchBucketSize &&
		a.ParamPersistenceThreshold == b.ParamPersistenceThreshold && a.MaxLiveParameters == b.MaxLiveParameters &&
		a.SyncTPComm == b.SyncTPComm && a.TPCommOverlap == b.TPCommOverlap && a.AsyncTP == b.AsyncTP &&
		a.LossDPGroup == b.LossDPGroup && a.GradNormGroup == b.GradNormGroup && a.UnpermuteProbs == b.UnpermuteProbs &&
		a.NoPermuteFusion == b.NoPermuteFusion &&
		a.SharedExpertOverlap == b.SharedExpertOverlap && a.RouterDType == b.RouterDType && a.ETP == b.ETP &&
		a.ExpertLoad == b.ExpertLoad && a.ExpertWorst == b.ExpertWorst && a.ExpertSpread == b.ExpertSpread &&
		a.StageSplit == b.StageSplit && a.FirstStageLayers == b.FirstStageLayers && a.LastStageLayers == b.LastStageLayers &&
		a.EmbeddingSlot == b.EmbeddingSlot && a.LossSlot == b.LossSlot && a.DPReplicate == b.DPReplicate &&
		a.NoReshard == b.NoReshard && a.ReshardTo == b.ReshardTo && a.AdapterUnits == b.AdapterUnits &&
		a.SyncEachBatch == b.SyncEachBatch && a.SyncStates == b.SyncStates && a.BackwardPrefetch == b.BackwardPrefetch &&
		a.ForwardPrefetch == b.ForwardPrefetch && a.FSDPNoSync == b.FSDPNoSync && a.FSDPParamDType == b.FSDPParamDType &&
		a.FSDPReduceDType == b.FSDPReduceDType && sameList(a.StageLayers, b.StageLayers) && sameList(a.FSDPUnits, b.FSDPUnits)
}
