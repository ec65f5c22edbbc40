package migrate

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// genWindowStart is the start of window i of a generated file: one window
// every 5 minutes, back from 2026-01-18T12:00:00Z.
func genWindowStart(i int) time.Time {
	return time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC).Add(-time.Duration(i) * 5 * time.Minute)
}

// genTokens is the tokens_used of window i of a generated file.
func genTokens(i int) int64 { return int64(i%1000) * 7 }

// genFile is a legacy file of one key with n usage windows, pretty-printed
// as the legacy writer did, timestamps in the three spellings in turn.
func genFile(n int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"keys\": [\n    {\n      \"key\": \"" + secret + "\",\n")
	b.WriteString("      \"name\": \"long-lived\",\n      \"model\": \"glm-4.7\",\n      \"token_limit_per_5h\": 100000,\n")
	b.WriteString("      \"created_at\": \"2025-01-01T00:00:00.000Z\",\n      \"total_lifetime_tokens\": 9000000000,\n")
	b.WriteString("      \"expiry_date\": \"2027-01-01T00:00:00Z\",\n      \"usage_windows\": [")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		start := genWindowStart(i)
		var s string
		switch i % 3 {
		case 0:
			s = start.Format("2006-01-02T15:04:05.000Z07:00") // milliseconds, Z
		case 1:
			s = start.Format(time.RFC3339) // no fraction
		default:
			s = start.In(time.FixedZone("", 90*60)).Format("2006-01-02T15:04:05.000-07:00") // offset
		}
		fmt.Fprintf(&b, "\n        { \"window_start\": %q, \"tokens_used\": %d }", s, genTokens(i))
	}
	b.WriteString("\n      ]\n    }\n  ]\n}\n")
	return b.Bytes()
}

func TestGeneratedWindows(t *testing.T) {
	for _, n := range []int{0, 1, 500, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			keys, rep, err := parseLegacy(bytes.NewReader(genFile(n)))
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
	keys, rep, err := parseLegacy(strings.NewReader(fileJSON(entryJSON(
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
		keys, rep, err := parseLegacy(&failingReader{data: []byte(data), err: disk})
		require.ErrorIs(t, err, disk)
		assert.NotErrorIs(t, err, ErrRefused)
		assert.Equal(t, "migrate: read legacy file: disk on fire", err.Error())
		assert.Nil(t, keys)
		assert.Equal(t, Report{}, rep)
	}
}
