package nn

import (
	"math"
	"testing"
)

// The share of a causal row's attention a document mask leaves, counted
// by hand. flex, 512 tokens in 4 blocks of 128 (a causal row runs 10):
// documents of 128 tokens run the 4 diagonal blocks and each of the 3
// blocks one below with probability 127/128 (a document starts in the 1
// token between them otherwise), none further (129 tokens, more than a
// document); of 256, 3 x 255/256 one below and 2 x 127/256 two below.
// flash, 4 tokens in documents of 2 at offsets 0 and 1: 6 and 5 keys
// over the 4 queries, 1.375 a query against the causal row's 2.
func TestDocFraction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seq, l int64
		flex   bool
		want   float64
	}{
		{"flex, one block-long document", 512, 128, true, (4 + 3*127.0/128) / 10},
		{"flex, two blocks long", 512, 256, true, (4 + 3*255.0/256 + 2*127.0/256) / 10},
		{"flex, one document a row", 512, 512, true, (4 + 3*511.0/512 + 2*383.0/512 + 255.0/512) / 10},
		{"flex, no boundary in sight", 512, 1 << 40, true, 1},
		{"flex, a partial last block", 300, 1 << 40, true, 1},
		{"flash, documents of 2", 4, 2, false, 1.375 / 2},
		{"flash, no boundary in sight", 1000, 1 << 40, false, 500.5 / 500},
	} {
		var got float64
		if tc.flex {
			got = flexBlockFraction(tc.seq, tc.l, flexBlock)
		} else {
			got = docKeys(tc.seq, tc.l) / (float64(tc.seq) / 2)
		}
		if math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %.9f, want %.9f", tc.name, got, tc.want)
		}
	}
}

// flexBlocksAt is the rule flexBlockFraction averages, for one offset:
// the blocks of blk tokens a row of seq tokens runs when documents of l
// tokens start at the row's first token and wherever (t + ph) % l == 0.
func flexBlocksAt(seq, l, ph, blk int64) int64 {
	n := seq / blk
	run := n
	for i := int64(0); i < n; i++ {
		for d := int64(1); d <= i; d++ {
			shared := true
			for t := blk * (i - d + 1); t <= blk*i; t++ {
				if (t+ph)%l == 0 {
					shared = false
					break
				}
			}
			if shared {
				run++
			}
		}
	}
	return run
}

// The blocks torch 2.15's create_block_mask lists for causal AND document
// masks over 4,096 tokens (kv_num_blocks + full_kv_num_blocks, on the CPU:
// tools/oracle/flex_blocks.py, 49 rows of which these, none differing from
// the rule), and flexBlockFraction as the rule's mean over every offset.
func TestFlexBlocksAsTorch(t *testing.T) {
	for _, tc := range []struct{ l, ph, blocks int64 }{
		{512, 0, 80}, {512, 1, 108}, {512, 256, 76}, {512, 511, 108},
		{1000, 0, 168}, {1000, 37, 161}, {1000, 127, 162}, {1000, 500, 156},
		{10000, 37, 528},
	} {
		if got := flexBlocksAt(4096, tc.l, tc.ph, flexBlock); got != tc.blocks {
			t.Errorf("documents of %d at offset %d: %d blocks, torch's create_block_mask %d", tc.l, tc.ph, got, tc.blocks)
		}
	}
	for _, l := range []int64{300, 1000} {
		var sum int64
		for ph := int64(0); ph < l; ph++ {
			sum += flexBlocksAt(2048, l, ph, flexBlock)
		}
		mean := float64(sum) / float64(l) / (16 * 17 / 2)
		if got := flexBlockFraction(2048, l, flexBlock); math.Abs(got-mean) > 1e-12 {
			t.Errorf("documents of %d: flexBlockFraction %.12f, the rule's mean over offsets %.12f", l, got, mean)
		}
	}
}

// TestDocsFraction: documents given one by one, counted by hand. flex,
// blocks of 128: [100, 300] over 400 tokens (4 blocks) touches every
// causal block (the second document spans all 4, from block 0): 10 of 10;
// three documents of 128 run their 3 diagonal blocks of a 3-block row's 6;
// [128, 256] runs block 0 alone and blocks 1-2's triangle, 1 + 3 of 6;
// [1024] * 8 (64 blocks) runs 8 triangles of 8 blocks, 8 x 36 of 2,080.
// flash: each document's l (l + 1) / 2 over the row's S x S / 2; [8, 24]:
// 36 + 300 over 512.
func TestDocsFraction(t *testing.T) {
	eight := []int64{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}
	for _, tc := range []struct {
		docs []int64
		flex bool
		want float64
	}{
		{[]int64{100, 300}, true, 1},
		{[]int64{128, 128, 128}, true, 3.0 / 6},
		{[]int64{128, 256}, true, 4.0 / 6},
		{eight, true, 8 * 36 / 2080.0},
		{[]int64{8, 24}, false, 336.0 / 512},
		{[]int64{32}, false, 528.0 / 512},
	} {
		var seq int64
		for _, l := range tc.docs {
			seq += l
		}
		if got := docsFraction(tc.docs, seq, tc.flex); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%v flex %v: %.6f, want %.6f", tc.docs, tc.flex, got, tc.want)
		}
	}
}
