package keystore

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/strategies"
)

const testID = "key_00112233445566ff"

func sampleRecords() []*record {
	full := &record{
		name: "team-a ✓", model: "glm-4.7", tokenLimit: math.MaxInt64, lifetime: 1_234_567,
		expiresAt: math.MaxInt64, createdAt: math.MinInt64, lastUsed: -1,
		hasExpiry: true, hasCreated: true, hasUsed: true, disabled: true, legacy: true,
		window: []byte("72|18000000000000|300000000000|1768723200000000000|902"),
	}
	for i := range full.hash {
		full.hash[i] = byte(i * 7)
	}
	return []*record{full, {tokenLimit: 1}, {tokenLimit: 100_000, hasCreated: true, createdAt: 1768723200000000000}}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := r.appendEncode(nil)
		got, err := decodeRecord(testID, b)
		require.NoError(t, err)
		if len(r.window) == 0 {
			r.window = got.window // nil and empty alike
		}
		require.Equal(t, r, got)
		require.Equal(t, b, got.appendEncode(nil))
	}
}

func TestRecordCorrupt(t *testing.T) {
	valid := sampleRecords()[2].appendEncode(nil) // 1, flags, hash, limit (3 bytes), lifetime, created (9 bytes), name, model, window
	edit := func(i int, b ...byte) []byte {
		return append(append(bytes.Clone(valid[:i]), b...), valid[i+len(b):]...)
	}
	for name, b := range map[string][]byte{
		"empty":             {},
		"version 0":         edit(0, 0),
		"version 2":         edit(0, 2),
		"unknown flag":      edit(1, flagLegacy<<1|flagCreated),
		"cut in the hash":   valid[:20],
		"limit 0":           edit(34, 0, 0x80, 0), // the limit, then a minimal but padded 2-byte lifetime
		"non-minimal":       edit(34, 0x81, 0x80, 0x00),
		"limit overflow":    append(append(bytes.Clone(valid[:34]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), valid[37:]...),
		"limit over int64":  append(append(bytes.Clone(valid[:34]), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), valid[37:]...),
		"trailing":          append(bytes.Clone(valid), 0),
		"cut in the window": valid[:len(valid)-1],
		"name too long":     append(bytes.Clone(valid[:len(valid)-3]), 0x81, 0x02),
		"name control":      append(bytes.Clone(valid[:len(valid)-3]), 1, '\n', 0, 0),
		"name not utf-8":    append(bytes.Clone(valid[:len(valid)-3]), 1, 0xff, 0, 0),
	} {
		_, err := decodeRecord(testID, b)
		require.ErrorIs(t, err, strategies.ErrCorrupt, name)
		require.ErrorContains(t, err, testID, name)
	}
}

func TestLegacyRoundTrip(t *testing.T) {
	for _, ws := range [][]legacyWindow{
		{{start: 1768723200000000000, tokens: 902}},
		{{start: math.MinInt64, tokens: 1}, {start: 0, tokens: 2}, {start: 0, tokens: 3}, {start: math.MaxInt64, tokens: math.MaxInt64 - 6}},
	} {
		b := appendLegacy(nil, ws)
		got, err := decodeLegacy(testID, b)
		require.NoError(t, err)
		require.Equal(t, ws, got)
	}
	for name, b := range map[string][]byte{
		"empty":         {},
		"version":       {2, 1, 0, 1},
		"no windows":    {1, 0},
		"count too big": {1, 5, 0, 1},
		"zero tokens":   {1, 1, 0, 0},
		"trailing":      {1, 1, 0, 1, 0},
		// The second window starts 2ns after math.MaxInt64 - 1.
		"start overflow": append(binary.AppendVarint([]byte{1, 2}, math.MaxInt64-1), 1, 2, 1),
	} {
		_, err := decodeLegacy(testID, b)
		require.ErrorIs(t, err, strategies.ErrCorrupt, name)
		require.ErrorContains(t, err, testID, name)
	}
	sum := appendLegacy(nil, []legacyWindow{{start: 0, tokens: math.MaxInt64}, {start: 1, tokens: 1}})
	_, err := decodeLegacy(testID, sum)
	require.ErrorIs(t, err, strategies.ErrCorrupt)
}

// FuzzDecodeRecord checks that decoding never panics and that what decodes
// encodes back to the same bytes: the encoding is canonical.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r.appendEncode(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(testID, b)
		if err != nil {
			require.ErrorIs(t, err, strategies.ErrCorrupt)
			return
		}
		require.Equal(t, b, r.appendEncode(nil))
	})
}

// FuzzDecodeLegacy is FuzzDecodeRecord for legacy records.
func FuzzDecodeLegacy(f *testing.F) {
	f.Add(appendLegacy(nil, []legacyWindow{{start: 5, tokens: 3}, {start: 9, tokens: 1}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ws, err := decodeLegacy(testID, b)
		if err != nil {
			require.ErrorIs(t, err, strategies.ErrCorrupt)
			return
		}
		require.Equal(t, b, appendLegacy(nil, ws))
	})
}
