package humming_test

import (
	"reflect"
	"strings"
	"testing"

	"humming.dev/humming"
)

// MoeAlign and MoeReduce on the mock driver, which runs the routing kernels as host loops.
func TestMockMoeAlignAndReduce(t *testing.T) {
	ctx := mockContext(t, 0)
	// 5 tokens, top-2, 4 experts, block 8; -1 and 7 are dropped.
	ids := []int32{0, 2, -1, 0, 2, 7, 3, 3, 1, 0}
	dIDs, err := humming.Upload(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	r := humming.MoeRouting{TopKIDs: dIDs, NumTokens: 5, TopK: 2, NumExperts: 4}
	s, err := humming.MoeAlignSizesFor(r, 8)
	if err != nil || s.SortedIDs != 40 || s.ExpertIDs != 5 || s.ExpertOffsets != 5 {
		t.Fatal(s, err)
	}
	sorted, _ := ctx.Alloc(int(s.SortedIDs) * 4)
	experts, _ := ctx.Alloc(int(s.ExpertIDs) * 4)
	padded, _ := ctx.Alloc(4)
	offsets, _ := ctx.Alloc(int(s.ExpertOffsets) * 4)
	counts, _ := ctx.Alloc(int(s.ExpertCounts) * 4)
	out := humming.MoeAlignOut{SortedIDs: sorted, ExpertIDs: experts, NumTokensPadded: padded,
		ExpertOffsets: offsets, ExpertCounts: counts}
	if err := ctx.MoeAlign(r, 8, out, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	gotSorted, _ := humming.Download[int32](sorted)
	if !reflect.DeepEqual(gotSorted[:10], []int32{0, 3, 9, 10, 10, 10, 10, 10, 8, 10}) ||
		!reflect.DeepEqual(gotSorted[16:18], []int32{1, 4}) || !reflect.DeepEqual(gotSorted[24:26], []int32{6, 7}) {
		t.Fatal(gotSorted)
	}
	gotExperts, _ := humming.Download[int32](experts)
	gotOffsets, _ := humming.Download[int32](offsets)
	gotCounts, _ := humming.Download[int32](counts)
	if !reflect.DeepEqual(gotExperts, []int32{0, 1, 2, 3, -1}) ||
		!reflect.DeepEqual(gotOffsets, []int32{0, 8, 16, 24, 32}) ||
		!reflect.DeepEqual(gotCounts, []int32{3, 1, 2, 2}) {
		t.Fatal(gotExperts, gotOffsets, gotCounts)
	}
	if _, err := humming.MoeAlignSizesFor(r, 12); err == nil || !strings.Contains(err.Error(), "block_size") {
		t.Fatal(err)
	}

	// f16 1.0 (0x3c00) everywhere, weights 0.5: two kept assignments sum to 1.0, one to 0.5.
	const n = 8
	values := make([]uint16, 10*n)
	for i := range values {
		values[i] = 0x3c00
	}
	weights := []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}
	dValues, _ := humming.Upload(ctx, values)
	dWeights, _ := humming.Upload(ctx, weights)
	dOut, _ := ctx.Alloc(5 * n * 2)
	args := humming.MoeReduceArgs{DType: humming.DTypeF16, N: n, Input: dValues, TopKWeights: dWeights, Out: dOut}
	if err := ctx.MoeReduce(r, args, humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(humming.DefaultStream); err != nil {
		t.Fatal(err)
	}
	got, _ := humming.Download[uint16](dOut)
	want := []uint16{0x3c00, 0x3800, 0x3800, 0x3c00, 0x3c00}
	for tok := 0; tok < 5; tok++ {
		for c := 0; c < n; c++ {
			if got[tok*n+c] != want[tok] {
				t.Fatalf("token %d column %d: %#x, want %#x", tok, c, got[tok*n+c], want[tok])
			}
		}
	}
	args.Out = dValues // overlaps the input
	if err := ctx.MoeReduce(r, args, humming.DefaultStream); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatal(err)
	}
}
