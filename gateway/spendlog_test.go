package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
)

// TestRefusedModelsDoNotFillRollups: 300 requests naming models the key's
// policy refuses are counted under (other), so that the model the key does
// use keeps its own row in the key's spend by model (a rollup holds 256
// rows: the refused names would otherwise take them all, and the model
// served would be counted as (other)). A request refused for another
// reason keeps its model when the policy allows it.
func TestRefusedModelsDoNotFillRollups(t *testing.T) {
	e := newAdminEnv(t, Options{DefaultMaxTokens: 100})
	k, secret := e.policyKey("m", keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: 5 * time.Hour}},
		RequestsPerMinute: 400, Models: []string{"gpt-4o*"}})
	for i := range 300 {
		resp, _ := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: fmt.Sprintf("junk-%d", i), Input: 1, Output: 1})
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	}
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Model: "gpt-4o", Input: 1, Output: 1})
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	s := adminOK[admin.Spend](e, "GET", "/admin/spend?group_by=model&key="+k.ID, nil, http.StatusOK)
	require.Equal(t, 2, len(s.Rows), "rows by model")
	require.Equal(t, ledger.OtherModel, *s.Rows[0].Model)
	require.Equal(t, admin.Counters{Refused: 300, RefusedBy: map[string]int64{"model": 300}}, s.Rows[0].Counters)
	require.Equal(t, "gpt-4o", *s.Rows[1].Model)
	require.EqualValues(t, 1, s.Rows[1].Requests)
}

// TestRefusedModel: a refusal is counted under its model only when the
// key's policy allows it, and never when the model itself was refused.
func TestRefusedModel(t *testing.T) {
	open := keystore.Key{}
	globs := keystore.Key{Policy: keystore.Policy{Models: []string{"gpt-4o*", "claude-?"}}}
	for _, c := range []struct {
		model  string
		k      keystore.Key
		reason string
		want   string
	}{
		{"gpt-4o-mini", globs, "window", "gpt-4o-mini"},
		{"claude-3", globs, "budget", "claude-3"},
		{"junk", globs, "window", ledger.OtherModel},
		{"junk", open, "rate", "junk"},
		{"gpt-4o", globs, "model", ledger.OtherModel}, // a team's policy refused it
		{"junk", open, "model", ledger.OtherModel},
		{"", globs, "disabled", ""},
	} {
		require.Equal(t, c.want, refusedModel(c.model, c.k, &keystore.Denial{Reason: c.reason}), "%+v", c)
	}
}
