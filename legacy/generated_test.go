package legacy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGeneratedWindows(t *testing.T) {
	for _, n := range []int{0, 1, 500, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys, rep, err := Parse(bytes.NewReader(genFile(n)))
			require.NoError(t, err)
			checkInvariants(t, keys, rep, err)
			assert.Equal(t, Report{Entries: 1, Keys: 1, Windows: n}, rep)
			require.Len(t, keys, 1)
			require.Len(t, keys[0].Windows, n)
			for i, w := range keys[0].Windows {
				if !w.Start.Equal(genWindowStart(i)) || w.Tokens != genTokens(i) {
					t.Fatalf("window %d: got %v %d, want %v %d", i, w.Start, w.Tokens, genWindowStart(i), genTokens(i))
				}
			}
		})
	}
}

// TestWindowTimestampSpellings: one file, every accepted spelling of a
// window start, read as the same kind of instant.
func TestWindowTimestampSpellings(t *testing.T) {
	spellings := map[string]string{
		"2026-01-18T08:00:00Z":          "2026-01-18T08:00:00Z",
		"2026-01-18T08:00:00.000Z":      "2026-01-18T08:00:00Z",
		"2026-01-18T08:00:00.250Z":      "2026-01-18T08:00:00.25Z",
		"2026-01-18T09:00:00+01:00":     "2026-01-18T08:00:00Z",
		"2026-01-18T09:00:00.750+01:00": "2026-01-18T08:00:00.75Z",
		"2026-01-18T03:00:00.000-05:00": "2026-01-18T08:00:00Z",
	}
	var windows []string
	var want []string
	for in, out := range spellings {
		windows = append(windows, fmt.Sprintf(`{"window_start":%q,"tokens_used":1}`, in))
		want = append(want, out)
	}
	keys, rep, err := Parse(strings.NewReader(fileJSON(entryJSON(
		"total_lifetime_tokens", "6", "usage_windows", "["+strings.Join(windows, ",")+"]"))))
	require.NoError(t, err)
	assert.Equal(t, Report{Entries: 1, Keys: 1, Windows: len(spellings)}, rep)
	var got []string
	for _, w := range keys[0].Windows {
		got = append(got, w.Start.Format(time.RFC3339Nano))
	}
	assert.Equal(t, want, got)
}

// failingReader fails after its data.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(b, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestReadError: a failing read is the reader's error, not a refusal.
func TestReadError(t *testing.T) {
	disk := fmt.Errorf("disk on fire")
	for _, data := range []string{"", "\xEF\xBB", `{"keys":[`, fileJSON(entryJSON())[:100], fileJSON(entryJSON())} {
		keys, rep, err := Parse(&failingReader{data: []byte(data), err: disk})
		require.ErrorIs(t, err, disk)
		assert.NotErrorIs(t, err, ErrRefused)
		assert.Equal(t, "read legacy file: disk on fire", err.Error())
		assert.Nil(t, keys)
		assert.Equal(t, Report{}, rep)
	}
}
