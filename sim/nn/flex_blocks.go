package nn

import "github.com/memsh/memsh/sim/core"

// Attention within documents (train(doc_tokens=L), core/packing.go): the
// documents packed into a row of S tokens are taken to be L tokens long,
// starting at a random offset (a document also starts at the row's first
// token: torchtitan's positions restart there). The attention core's
// FLOPs are the causal row's times docFraction:
//
//   - flex: FlexAttention runs the 128 x 128 blocks its BlockMask lists
//     (torch.nn.attention.flex_attention's _DEFAULT_SPARSE_BLOCK_SIZE,
//     torchtitan's default block_size), skips those fully masked and
//     runs partial ones whole, masked. Query block i and key block i-d
//     (d >= 1) share a document unless a document starts in the 128(d-1)+1
//     tokens from the key block's last token to the query block's first,
//     which happens with probability min(1, (128(d-1)+1)/L); the diagonal
//     blocks always run. The fraction is the expected blocks run over a
//     causal row's n(n+1)/2. The rule gives the blocks torch 2.15's
//     create_block_mask lists, offset by offset (tools/oracle/
//     flex_blocks.py: 49 rows, none differing; TestFlexBlocksAsTorch).
//   - flash: flash-attn's varlen kernel costs each document's own causal
//     triangle: the mean keys a query sees within its document over the
//     causal row's S/2.
//
// Documents given one by one (train(doc_tokens=[l1, l2, ...]),
// core.Builder.Docs) are laid out as given from the row's first token:
// flash's fraction is then exactly the sum of l_i (l_i + 1) / 2 over the
// causal row's S (S + 1) / 2 (docsFraction), flex's the blocks the
// documents touch, each query block's run from the first block of its
// first document (docBlocks).
//
// The kernel rate stays the FlashAttention curve's at the row's length
// (timing/ops.go): short documents' lower efficiency is not priced, but
// for documents given one by one under flash, each priced at its own
// length (core.OpInfo.Varlen, timing's varlenTime).

// flexBlock is FlexAttention's sparse block size (torch 2.15's
// _DEFAULT_SPARSE_BLOCK_SIZE, 128; torchtitan's FlexAttention.Config).
const flexBlock = 128

// docFraction is the share of the causal row's attention FLOPs the
// document mask leaves, 1 when the plan has no documents or the
// attention is not causal flex or flash without a window. s is this
// rank's shape; under ring context parallelism the row is cp times
// longer.
func (a *Attention) docFraction(b *core.Builder, s []int64) float64 {
	l := b.DocTokens()
	docs := b.Docs()
	if (l <= 0 && docs == nil) || !a.Causal || a.Window > 0 || !a.kvNative() {
		return 1
	}
	seq := s[len(s)-2]
	if cp := b.Par.Cpn(); cp > 1 && !b.Par.Ulysses() {
		seq *= cp
	}
	if docs != nil {
		return docsFraction(docs, seq, a.Impl == "flex")
	}
	if a.Impl == "flex" {
		return flexBlockFraction(seq, l, flexBlock)
	}
	return min(1, docKeys(seq, l)/(float64(seq)/2))
}

// docsFraction is the share of a causal row of seq tokens' attention that
// documents of the lengths docs, back to back from its first token, leave:
// flex's blocks (docBlocks) over the row's n(n+1)/2, else each document's
// own causal triangle over the row's (flash's varlen kernel). The
// fraction scales coreFLOPs, whose causal row is seq x seq/2.
func docsFraction(docs []int64, seq int64, flex bool) float64 {
	if flex {
		n := (seq + flexBlock - 1) / flexBlock
		return float64(docBlocks(docs, flexBlock)) / (float64(n) * float64(n+1) / 2)
	}
	var pairs float64
	for _, l := range docs {
		pairs += float64(l) * float64(l+1) / 2
	}
	return pairs / (float64(seq) * float64(seq) / 2)
}

// docBlocks counts the blk x blk blocks of a causal row that documents of
// the lengths docs, back to back, touch: query block q runs the key
// blocks from the first block of the first document it holds up to q.
func docBlocks(docs []int64, blk int64) int64 {
	var total, start int64
	firstOf := map[int64]int64{} // query block -> the first block of its first document
	for _, l := range docs {
		b0, b1 := start/blk, (start+l-1)/blk
		for q := b0; q <= b1; q++ {
			if _, ok := firstOf[q]; !ok {
				firstOf[q] = b0
			}
		}
		start += l
	}
	for q, f := range firstOf {
		total += q - f + 1
	}
	return total
}

// flexBlockFraction is the expected blocks of size blk a row of seq
// tokens runs under a causal mask within documents of l tokens, over the
// causal mask's n(n+1)/2.
func flexBlockFraction(seq, l, blk int64) float64 {
	n := (seq + blk - 1) / blk
	run := float64(n) // the diagonal
	for d := int64(1); d < n; d++ {
		gap := blk*(d-1) + 1
		if gap >= l {
			break
		}
		run += float64(n-d) * (1 - float64(gap)/float64(l))
	}
	return run / (float64(n) * float64(n+1) / 2)
}

// docKeys is the mean keys a query at token t of a row of seq tokens
// attends to within documents of l tokens at a random offset: at offset
// u into its document it sees min(t, u) + 1, u uniform over 0..l-1 once
// t >= l.
func docKeys(seq, l int64) float64 {
	var sum float64
	m := min(seq, l)
	for t := int64(0); t < m; t++ {
		ft := float64(t)
		sum += (ft*(ft+1)/2+float64(l-1-t)*ft)/float64(l) + 1
	}
	sum += float64(seq-m) * (float64(l-1)/2 + 1)
	return sum / float64(seq)
}
