package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/ledger"
)

// TestWantsCSV: what Accept asks for CSV.
func TestWantsCSV(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"application/json":                    false,
		"text/csv":                            true,
		"TEXT/CSV; charset=utf-8":             true,
		"application/json, text/csv":          false,
		"text/csv;q=0, application/json":      false,
		"text/csv;q=0.0":                      false,
		"text/plain, text/csv;q=0.5, */*;q=0": true,
		"text/html, text/csv":                 true,
	} {
		r := &http.Request{Header: http.Header{}}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		require.Equal(t, want, wantsCSV(r), accept)
	}
}

// TestEndUserParams: /admin/spend takes group_by=end_user and end_user=,
// /admin/requests end_user=; a spend row grouped by end user carries it
// in JSON and CSV ("" for the requests that named none), and a request's
// CSV has end_user last.
func TestEndUserParams(t *testing.T) {
	q, err := ParseSpendQuery(url.Values{"group_by": {"key,end_user"}, "end_user": {"u-17"}})
	require.NoError(t, err)
	require.Equal(t, []string{ledger.ByKey, ledger.ByEndUser}, q.GroupBy)
	require.Equal(t, "u-17", q.EndUser)
	rq, err := ParseRequestQuery(url.Values{"end_user": {"u-17"}})
	require.NoError(t, err)
	require.Equal(t, "u-17", rq.EndUser)

	s := NewSpend(ledger.Spend{GroupBy: []string{ledger.ByEndUser}, Rows: []ledger.Row{
		{EndUser: "", Totals: ledger.Totals{Requests: 1}}, {EndUser: "=u-17", Totals: ledger.Totals{Requests: 2}},
	}})
	b, err := json.Marshal(s.Rows)
	require.NoError(t, err)
	require.Contains(t, string(b), `"end_user":""`)
	require.Contains(t, string(b), `"end_user":"=u-17"`)
	var buf bytes.Buffer
	require.NoError(t, s.WriteCSV(&buf))
	require.True(t, strings.HasPrefix(buf.String(), "end_user,requests,"), buf.String())
	require.Contains(t, buf.String(), "\n'=u-17,2,")

	require.Equal(t, "end_user", RequestColumns[len(RequestColumns)-1])
	buf.Reset()
	require.NoError(t, Requests{Requests: []ledger.Entry{{Key: "key_1", EndUser: "u-17"}}}.WriteCSV(&buf))
	require.True(t, strings.HasSuffix(buf.String(), ",false,u-17\n"), buf.String())
}
