package ledger

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/pricing"
)

// benchItems are n entries at the scale of the query benchmarks: 10k
// keys in 100 teams, 50 models, a request every second or so.
func benchItems(n int) []item {
	r := rand.New(rand.NewPCG(1, 2))
	items := make([]item, n)
	t := time.UnixMilli(1_700_000_000_000).UTC()
	for i := range items {
		k := r.IntN(10_000)
		t = t.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
		items[i] = item{uint32(i), Entry{Time: t, RequestID: fmt.Sprintf("req_%016x", r.Uint64()),
			Key: fmt.Sprintf("key_%016x", k), Team: fmt.Sprintf("team_%016x", k%100), Model: fmt.Sprintf("model-%02d", (k*7+r.IntN(3))%50),
			Route: "chat completions", Status: 200, Latency: time.Duration(200+r.IntN(3000)) * time.Millisecond,
			Tokens: Tokens{Input: r.Int64N(4000), Output: r.Int64N(800), CacheRead: r.Int64N(2) * r.Int64N(2000)},
			Cost:   pricing.USD(r.Int64N(20_000_000))}}
	}
	return items
}

// BenchmarkEncodeBlock encodes a block of blockSize entries, and one
// entry alone as a chunk holds it, and reports the bytes an entry costs
// in each: without an upstream, and with one of 4.
func BenchmarkEncodeBlock(b *testing.B) {
	items := benchItems(blockSize)
	named := slices.Clone(items)
	for i := range named {
		named[i].e.Upstream = []string{"openai-a", "openai-b", "azure-east", "azure-west"}[i%4]
	}
	for _, c := range []struct {
		name  string
		items []item
	}{{"", items}, {"-upstream", named}} {
		b.Run("block"+c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				n = len(encodeBlock(0, c.items))
			}
			b.ReportMetric(float64(n)/float64(len(c.items)), "B/entry")
		})
		b.Run("single"+c.name, func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				buf = appendSingle(buf[:0], &c.items[0].e)
			}
			b.ReportMetric(float64(len(buf)), "B/entry")
		})
	}
}

// v1Single and v1Block are blocks of version 1, as the code before
// upstreams encoded seedEntries: e alone (appendSingle), and e at seq
// 256 with f at 300 (encodeBlock).
const (
	v1Single = "01f6a1abfef9620004010123456789abcdef00066770742d346f00106368617420636f6d706c6574696f6e73020123456789abcdef" +
		"010000030123456789abcdef0004010200dc0b010102030405959aef3a"
	v1Block = "01f6a1abfef9620005020123456789abcdef010123456789abcdef00066770742d346f00106368617420636f6d706c6574696f6e73" +
		"0006636c61756465020000030123456789abcdef0101020300dc0b010102030405959aef3a2ccf0f030123456789abcdef0100040300dc0b" +
		"010102030405959aef3a"
)

// records returns the entries of an entry record of kind, first being
// the seq in its key.
func records(t *testing.T, v []byte, first uint32, kind byte) []item {
	t.Helper()
	var got []item
	require.NoError(t, eachInRecord(v, first, kind, func(seq uint32, e *Entry) { got = append(got, item{seq, *e}) }))
	return got
}

// chunkOf is the chunk of singles, as appendChunk writes it.
func chunkOf(singles ...[]byte) []byte {
	var c []byte
	for _, one := range singles {
		c = binary.AppendUvarint(c, uint64(len(one)))
		c = append(c, one...)
	}
	return c
}

// TestBlockVersion1 reads the blocks that the code before upstreams
// stored: a chunk's and a compacted one, their entries with Upstream "".
// Written again, the same entries cost a byte more each.
func TestBlockVersion1(t *testing.T) {
	e, f := seedEntries()
	single, err := hex.DecodeString(v1Single)
	require.NoError(t, err)
	block, err := hex.DecodeString(v1Block)
	require.NoError(t, err)
	require.Equal(t, []item{{7, e}, {8, e}}, records(t, chunkOf(single, single), 7, 'c'))
	require.Equal(t, []item{{256, e}, {300, f}}, records(t, block, 256, 'b'))

	require.Len(t, appendSingle(nil, &e), len(single)+2, "upstream+1 and end-user+1, 0")
	require.Len(t, encodeBlock(256, []item{{256, e}, {300, f}}), len(block)+4)
}

// v2Single and v2Block are blocks of version 2, as the code before end
// users encoded seedEntries, e naming upstream openai-a: e alone, and e
// at seq 256 with f at 300.
const (
	v2Single = "02f6a1abfef9620005010123456789abcdef00066770742d346f00106368617420636f6d706c6574696f6e73020123456789abcdef" +
		"00086f70656e61692d61010000030123456789abcdef000401020500dc0b010102030405959aef3a"
	v2Block = "02f6a1abfef9620006010123456789abcdef020123456789abcdef00066770742d346f00106368617420636f6d706c6574696f6e73" +
		"00086f70656e61692d610006636c61756465020000030123456789abcdef000202030500dc0b010102030405959aef3a2ccf0f030123456789" +
		"abcdef000005030000dc0b010102030405959aef3a"
)

// TestBlockVersion2 reads the blocks that the code before end users
// stored: their entries with EndUser "". Written again, the same entries
// cost a byte more each.
func TestBlockVersion2(t *testing.T) {
	e, f := seedEntries()
	e.Upstream = "openai-a"
	single, err := hex.DecodeString(v2Single)
	require.NoError(t, err)
	block, err := hex.DecodeString(v2Block)
	require.NoError(t, err)
	require.Equal(t, []item{{7, e}, {8, e}}, records(t, chunkOf(single, single), 7, 'c'))
	require.Equal(t, []item{{256, e}, {300, f}}, records(t, block, 256, 'b'))

	require.Len(t, appendSingle(nil, &e), len(single)+1, "end-user+1, 0")
	require.Len(t, encodeBlock(256, []item{{256, e}, {300, f}}), len(block)+2)
}

// TestBlockVersions: a block of a version other than 1, 2 and 3 is
// corrupt.
func TestBlockVersions(t *testing.T) {
	block, err := hex.DecodeString(v1Block)
	require.NoError(t, err)
	for _, v := range []byte{0, 4, 255} {
		block[0] = v
		_, err := openBlock(block, nil)
		require.ErrorIs(t, err, backend.ErrCorrupt, "version %d", v)
		require.ErrorIs(t, eachInRecord(chunkOf(block), 0, 'c', func(uint32, *Entry) {}), backend.ErrCorrupt, "version %d", v)
	}
}

// TestBlockUpstream: an entry's upstream, or none, reads back from a
// chunk and from a block, where a name many entries share is stored
// once.
func TestBlockUpstream(t *testing.T) {
	names := []string{"openai-a", "", "azure-east", strings.Repeat("é", 128), "gpt-4o"} // the last is also a model
	items := benchItems(300)
	var singles [][]byte
	for i := range items {
		items[i].e.Upstream = names[i%len(names)]
		singles = append(singles, appendSingle(nil, &items[i].e))
	}
	require.Equal(t, items, records(t, chunkOf(singles...), 0, 'c'))
	block := encodeBlock(0, items)
	require.Equal(t, items, records(t, block, 0, 'b'))
	require.Equal(t, 1, bytes.Count(block, []byte("azure-east")), "a name once in the table")

	e, _ := seedEntries() // its model is gpt-4o
	e.Upstream = "gpt-4o"
	br, err := openBlock(appendSingle(nil, &e), nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), br.index(appendString(nil, "gpt-4o"), 0), "the model's reference, not the upstream's")
}

// TestBlockEndUser: an entry's end user, or none, reads back from a
// chunk and from a block, where a name many entries share is stored
// once; in a chunk, an end user named as another string of the entry
// refers to that string's place, the one a filter finds.
func TestBlockEndUser(t *testing.T) {
	names := []string{"u-17", "", "u-18", strings.Repeat("é", 128), "gpt-4o", "openai-a"}
	items := benchItems(300)
	var singles [][]byte
	for i := range items {
		items[i].e.Upstream = "openai-a"
		items[i].e.EndUser = names[i%len(names)]
		singles = append(singles, appendSingle(nil, &items[i].e))
	}
	require.Equal(t, items, records(t, chunkOf(singles...), 0, 'c'))
	block := encodeBlock(0, items)
	require.Equal(t, items, records(t, block, 0, 'b'))
	require.Equal(t, 1, bytes.Count(block, []byte("u-18")), "a name once in the table")

	e, _ := seedEntries() // its model is gpt-4o
	for _, name := range []string{"gpt-4o", e.Key, e.Team, "chat completions"} {
		e.EndUser = name
		single := appendSingle(nil, &e)
		br, err := openBlock(single, nil)
		require.NoError(t, err)
		var h head
		require.NoError(t, br.walk(0, func(hh *head) bool { h = *hh; return false }, nil))
		bias := uint64(1)
		require.Equal(t, int64(h.refs[5]), br.index(appendString(nil, name), bias), name)
		require.Equal(t, e, records(t, chunkOf(single), 0, 'c')[0].e, name)
	}
}
