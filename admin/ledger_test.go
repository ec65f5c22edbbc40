package admin

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
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
