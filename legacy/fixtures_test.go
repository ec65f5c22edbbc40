package legacy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parseFixture(t *testing.T, name string) ([]Key, Report, error) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "legacy", name))
	require.NoError(t, err)
	defer f.Close()
	keys, rep, err := Parse(f)
	checkInvariants(t, keys, rep, err)
	return keys, rep, err
}

// TestSampleFile: the sample of LEGACY.md's users. ci-bot has no model and a
// rolling_window_cache that double-counts its window (40002 for 20001):
// noted, and ignored. Its window is 1 token past its limit, which the old
// check allowed to happen (usage known afterwards): imported as it is.
func TestSampleFile(t *testing.T) {
	keys, rep, err := parseFixture(t, "apikeys.sample.json")
	require.NoError(t, err)
	assert.Equal(t, []Key{{
		Secret:         "pk_live_7f3a9c2e41d84b0f9a6e5d3c2b1a0f9e",
		Name:           "research-team",
		Model:          "glm-4.7",
		TokenLimit:     100000,
		ExpiresAt:      ts("2027-06-30T23:59:59Z"),
		CreatedAt:      ts("2026-01-05T09:14:22.318Z"),
		LastUsed:       ts("2026-01-18T11:02:41.907Z"),
		LifetimeTokens: 2418733,
		Windows: []Window{
			{Start: ts("2026-01-18T07:40:12.5Z"), Tokens: 61204},
			{Start: ts("2026-01-17T21:03:00Z"), Tokens: 99871},
		},
	}, {
		Secret:         "pk_live_0b8d6f4e2c1a3957e8d7c6b5a4f3e2d1",
		Name:           "ci-bot",
		TokenLimit:     20000,
		ExpiresAt:      ts("2026-12-31T00:00:00Z"),
		CreatedAt:      ts("2026-01-10T00:00:00Z"),
		LastUsed:       ts("2026-01-18T10:59:59.001Z"),
		LifetimeTokens: 150020,
		Windows:        []Window{{Start: ts("2026-01-18T10:15:00Z"), Tokens: 20001}},
	}, {
		Secret:     "pk_test_5e4d3c2b1a09f8e7d6c5b4a392817060",
		Name:       "intern-sandbox",
		Model:      "glm-4.5-air",
		TokenLimit: 5000,
		ExpiresAt:  ts("2026-01-31T23:00:00Z"), // 2026-02-01T00:00:00+01:00
		CreatedAt:  ts("2026-01-12T15:45:00Z"), // 2026-01-12T16:45:00.000+01:00
		LastUsed:   ts("2026-01-12T15:45:00Z"),
		Windows:    nil, // "usage_windows": []
	}}, keys)
	assert.Equal(t, Report{
		Entries: 3, Keys: 3, Windows: 3, IgnoredCaches: 1,
		Notes: []Issue{
			{Index: 1, Name: "ci-bot", Field: "model", Reason: "missing: imported without a model"},
			{Index: 1, Name: "ci-bot", Field: "rolling_window_cache", Reason: "ignored: usage_windows is the source of truth"},
		},
	}, rep)
	assert.Equal(t, `imported 3 keys with 3 usage windows from 3 entries; 0 skipped, 2 notes
notes:
  keys[1] "ci-bot": model: missing: imported without a model
  keys[1] "ci-bot": rolling_window_cache: ignored: usage_windows is the source of truth
rolling_window_cache ignored in 1 entry: usage_windows is the source of truth
`, rep.Summary())
	for _, k := range keys {
		assert.NotContains(t, reportTexts(t, rep, err), k.Secret)
	}
}

// TestValidFile: the fixture the README imports, windows on 2026-01-18.
func TestValidFile(t *testing.T) {
	keys, rep, err := parseFixture(t, "apikeys.valid.json")
	require.NoError(t, err)
	assert.Equal(t, Report{Entries: 3, Keys: 3, Windows: 5}, rep)
	assert.Equal(t, "imported 3 keys with 5 usage windows from 3 entries; 0 skipped, 0 notes\n", rep.Summary())
	require.Len(t, keys, 3)
	assert.Equal(t, []string{"gateway-prod", "batch-jobs", "staging"}, []string{keys[0].Name, keys[1].Name, keys[2].Name})
	assert.Equal(t, []Window{{Start: ts("2026-01-18T10:00:00Z"), Tokens: 180000}}, keys[1].Windows)
	assert.Equal(t, ts("2026-06-30T21:59:59Z"), keys[1].ExpiresAt)
}

// TestMalformedFile: the fixture a CLI demo refuses.
func TestMalformedFile(t *testing.T) {
	keys, rep, err := parseFixture(t, "apikeys.malformed.json")
	require.ErrorIs(t, err, ErrRefused)
	assert.Nil(t, keys)
	assert.Equal(t, []string{
		`keys[0] "web-frontend": usage_windows[0].tokens_used: negative: got -120, want a non-negative integer`,
		`keys[1] "mobile-app": token_limit_per_5h: fractional: got 75000.5, want a positive integer`,
		`keys[1] "mobile-app": expiry_date: unparsable timestamp "31/12/2026": want RFC 3339 such as 2026-01-18T08:00:00Z or 2026-01-18T09:00:00.000+01:00`,
		`keys[2] "web-frontend": key: same secret as keys[0], but token_limit_per_5h differs`,
	}, issueStrings(rep.Refusals))
	assert.Equal(t, []string{
		`keys[1] "mobile-app": owner: unknown field, ignored`,
		`keys[1] "mobile-app": model: missing: imported without a model`,
		`keys[1] "mobile-app": usage_windows: null: no usage to carry over`,
	}, issueStrings(rep.Notes))
	assert.Equal(t, `legacy file refused: 4 problems: `+
		`keys[0] "web-frontend": usage_windows[0].tokens_used: negative: got -120, want a non-negative integer; `+
		`keys[1] "mobile-app": token_limit_per_5h: fractional: got 75000.5, want a positive integer; `+
		`keys[1] "mobile-app": expiry_date: unparsable timestamp "31/12/2026": want RFC 3339 such as 2026-01-18T08:00:00Z or 2026-01-18T09:00:00.000+01:00; `+
		`and 1 more`, err.Error())
	assert.Equal(t, 3, rep.Entries)
	assert.Contains(t, rep.Summary(), "legacy file refused, nothing imported: 4 problems in 3 entries\nrefused:\n")
}
