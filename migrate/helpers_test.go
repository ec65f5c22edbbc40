package migrate

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// secret is the secret of the entries built by entryJSON; no output may hold it.
const secret = "pk_live_5ec4e7a1b2c3d4e5f60718293a4b5c6d"

// del, as the value of a field given to entryJSON, leaves the field out.
const del = "\x00del"

// baseEntry is a valid entry, in field order.
var baseEntry = [][2]string{
	{"key", `"` + secret + `"`},
	{"name", `"team-a"`},
	{"model", `"glm-4.7"`},
	{"token_limit_per_5h", `100000`},
	{"expiry_date", `"2027-01-01T00:00:00Z"`},
	{"created_at", `"2026-01-17T18:56:50.677Z"`},
	{"last_used", `"2026-01-18T09:12:03.004Z"`},
	{"total_lifetime_tokens", `1234567`},
	{"usage_windows", `[{"window_start":"2026-01-18T08:00:00.000Z","tokens_used":902}]`},
}

// entryJSON is baseEntry with fields replaced, deleted (value del) or added
// at the end, given as name, raw JSON value pairs.
func entryJSON(overrides ...string) string {
	if len(overrides)%2 != 0 {
		panic("entryJSON: odd overrides")
	}
	fields := append([][2]string(nil), baseEntry...)
next:
	for i := 0; i < len(overrides); i += 2 {
		name, value := overrides[i], overrides[i+1]
		for j := range fields {
			if fields[j][0] == name {
				fields[j][1] = value
				continue next
			}
		}
		fields = append(fields, [2]string{name, value})
	}
	var parts []string
	for _, f := range fields {
		if f[1] != del {
			parts = append(parts, fmt.Sprintf("%q:%s", f[0], f[1]))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// fileJSON is a legacy file of the given entries.
func fileJSON(entries ...string) string {
	return `{"keys":[` + strings.Join(entries, ",") + `]}`
}

// issueStrings renders issues with Issue.String.
func issueStrings(issues []Issue) []string {
	var out []string
	for _, i := range issues {
		out = append(out, i.String())
	}
	return out
}

// reportTexts is every text a report and its error can show.
func reportTexts(t testing.TB, rep Report, err error) string {
	t.Helper()
	js, jerr := json.Marshal(rep)
	require.NoError(t, jerr)
	text := string(js) + "\n" + rep.Summary() + "\n" + fmt.Sprintf("%v %+v %#v", rep, rep, rep)
	if err != nil {
		text += "\n" + err.Error()
	}
	return text
}

// checkInvariants asserts what parseLegacy promises of any outcome.
func checkInvariants(t testing.TB, keys []legacyKey, rep Report, err error) {
	t.Helper()
	if err != nil {
		require.ErrorIs(t, err, ErrRefused)
		require.True(t, rep.Refused(), "an error without refusals: %v", err)
		require.Nil(t, keys)
		require.Zero(t, rep.Keys)
		require.Zero(t, rep.Windows)
		require.True(t, strings.HasPrefix(err.Error(), "migrate: "), err.Error())
		return
	}
	require.False(t, rep.Refused())
	require.Equal(t, len(keys), rep.Keys)
	require.Equal(t, rep.Entries, rep.Keys+len(rep.Skips))
	windows := 0
	secrets := map[string]bool{}
	for _, k := range keys {
		require.NotEmpty(t, strings.TrimSpace(k.Secret))
		require.False(t, secrets[k.Secret], "a secret imported twice")
		secrets[k.Secret] = true
		require.Positive(t, k.TokenLimit)
		require.GreaterOrEqual(t, k.LifetimeTokens, int64(0))
		var sum int64
		for i, w := range k.Windows { // no testify per window: 100k of them
			if w.Tokens < 0 || w.Tokens > math.MaxInt64-sum {
				t.Fatalf("window %d: tokens %d, negative or overflowing %d", i, w.Tokens, sum)
			}
			sum += w.Tokens
			if w.Start.Before(minTime) || w.Start.After(maxWindowStart) || w.Start.Location() != time.UTC {
				t.Fatalf("window %d: start %v", i, w.Start)
			}
		}
		windows += len(k.Windows)
	}
	require.Equal(t, windows, rep.Windows)
}
