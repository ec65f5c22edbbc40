package legacy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeyRedactsSecret: no way of printing, logging or marshalling a key
// shows its secret.
func TestKeyRedactsSecret(t *testing.T) {
	keys, _, err := Parse(strings.NewReader(fileJSON(entryJSON())))
	require.NoError(t, err)
	k := keys[0]
	require.Equal(t, secret, k.Secret)

	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %[1]v"} {
		out = append(out, fmt.Sprintf(verb, k), fmt.Sprintf(verb, &k), fmt.Sprintf(verb, keys),
			fmt.Sprintf(verb, map[string]Key{"k": k}), fmt.Sprintf(verb, struct{ K Key }{k}))
	}
	out = append(out, k.String(), fmt.Sprint(k), fmt.Sprintln(keys))
	js, err := json.Marshal(k)
	require.NoError(t, err)
	out = append(out, string(js))
	var logs bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&logs, nil), slog.NewJSONHandler(&logs, nil)} {
		slog.New(h).Info("imported", "key", k, "ptr", &k)
	}
	out = append(out, logs.String())
	for _, s := range out {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, secret[8:]) // nor its random part, in any encoding
		assert.NotContains(t, s, fmt.Sprintf("%x", secret[8:]))
	}
	assert.Equal(t, `legacy.Key{Secret:[redacted] Name:"team-a" Model:"glm-4.7" TokenLimit:100000 `+
		`ExpiresAt:2027-01-01T00:00:00Z CreatedAt:2026-01-17T18:56:50.677Z LastUsed:2026-01-18T09:12:03.004Z `+
		`LifetimeTokens:1234567 Windows:1}`, fmt.Sprintf("%+v", k))
	assert.Contains(t, logs.String(), `key.secret=[redacted] key.name=team-a`)
}

// TestReportHoldsNoSecret: whatever is wrong with an entry, its secret is
// in no report text or error; and a report naming an entry by a name that
// holds the secret names it [redacted].
func TestReportHoldsNoSecret(t *testing.T) {
	inputs := []string{
		fileJSON(entryJSON(), entryJSON()),                                      // exact duplicate
		fileJSON(entryJSON(), entryJSON("model", `"other"`)),                    // conflicting duplicate
		fileJSON(entryJSON(), entryJSON("model", `"other"`, "created_at", `1`)), // duplicate with problems
		fileJSON(entryJSON("name", `"`+secret+`"`)),
		fileJSON(entryJSON("name", `"owner of `+secret+`"`, "token_limit_per_5h", "0")),
		fileJSON(entryJSON("model", `"`+secret+`"`)),
		fileJSON(entryJSON("expiry_date", `"`+secret+`"`)),
		fileJSON(entryJSON("usage_windows", `[{"window_start":"`+secret+`","tokens_used":1}]`)),
		fileJSON(entryJSON(secret, `"unknown field named by the secret"`)),
		fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1,"`+secret+`":1}]`)),
		fileJSON(entryJSON("key", `["`+secret+`"]`)),
		fileJSON(`"` + secret + `"`),
		`{"keys":["` + secret + `"]`,
		`{"keys":[{"key":"` + secret + `","name":x}]}`,
		`{"keys":[{"key":"` + secret + `"}]} "` + secret + `"`,
	}
	for _, in := range inputs {
		_, rep, err := Parse(strings.NewReader(in))
		text := reportTexts(t, rep, err)
		assert.NotContains(t, text, secret, in)
		assert.NotContains(t, text, secret[8:], in)
	}
	_, rep, err := Parse(strings.NewReader(inputs[4]))
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, []string{
		`keys[0] "[redacted]": token_limit_per_5h: zero: got 0, want a positive integer`,
		`keys[0] "[redacted]": name: holds the secret, which would be stored in plain text`,
	}, issueStrings(rep.Refusals))
	_, rep, err = Parse(strings.NewReader(inputs[8]))
	require.NoError(t, err)
	assert.Equal(t, []Issue{{Index: 0, Name: "team-a", Field: "[redacted]", Reason: "unknown field, ignored"}}, rep.Notes)
}
