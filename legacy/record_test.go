package legacy

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// windows returns the windows of (start in Unix ns, tokens) pairs.
func windows(pairs ...[2]int64) []Window {
	ws := make([]Window, len(pairs))
	for i, p := range pairs {
		ws[i] = Window{Start: time.Unix(0, p[0]).UTC(), Tokens: p[1]}
	}
	return ws
}

// TestRecordRoundTrip asserts that records round-trip, and that damaged
// ones are errors.
func TestRecordRoundTrip(t *testing.T) {
	for _, ws := range [][]Window{
		windows([2]int64{1768723200000000000, 902}),
		windows([2]int64{math.MinInt64, 1}, [2]int64{0, 2}, [2]int64{0, 3}, [2]int64{math.MaxInt64, math.MaxInt64 - 6}),
	} {
		b := AppendRecord(nil, ws)
		got, err := DecodeRecord(b)
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
		"tokens sum":     AppendRecord(nil, windows([2]int64{0, math.MaxInt64}, [2]int64{1, 1})),
	} {
		_, err := DecodeRecord(b)
		require.Error(t, err, name)
	}
}

// FuzzDecodeRecord asserts that decoding never panics, and that what
// decodes encodes back to the same bytes: the encoding is canonical.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, windows([2]int64{5, 3}, [2]int64{9, 1})))
	f.Add(AppendRecord(nil, windows([2]int64{1768723200000000000, 902})))
	f.Fuzz(func(t *testing.T, b []byte) {
		ws, err := DecodeRecord(b)
		if err != nil {
			return
		}
		require.Equal(t, b, AppendRecord(nil, ws))
	})
}
