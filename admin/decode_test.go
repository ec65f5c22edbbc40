package admin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadList: a list is split into its elements, raw, and refused as
// soon as it has one more than its bound, naming the field.
func TestReadList(t *testing.T) {
	for raw, want := range map[string][]string{
		``:                        nil,
		`null`:                    nil,
		`[]`:                      {},
		` [ "a" , {"b": [1,2]} ]`: {`"a"`, `{"b": [1,2]}`},
		`[1,2,3]`:                 {"1", "2", "3"},
	} {
		got, msg := readList(json.RawMessage(raw), "models", 3)
		require.Empty(t, msg, raw)
		if want == nil {
			require.Nil(t, got, raw)
			continue
		}
		require.Len(t, got, len(want), raw)
		for i := range want {
			require.Equal(t, want[i], string(got[i]), raw)
		}
	}
	for raw, msg := range map[string]string{
		`[1,2,3,4]`: "models: more than 3 elements: at most 3",
		`"a"`:       "models: want an array",
		`{}`:        "models: want an array",
	} {
		got, m := readList(json.RawMessage(raw), "models", 3)
		require.Nil(t, got, raw)
		require.Equal(t, msg, m, raw)
	}
}

// FuzzReadList: whatever the bytes, readList neither panics nor returns
// more elements than its bound, and each element it returns is one JSON
// value.
func FuzzReadList(f *testing.F) {
	for _, s := range []string{`[]`, `["a","b"]`, `[1,[2,[3]]]`, `[`, `[1,]`, `"x"`, `null`, strings.Repeat(`[`, 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		elems, msg := readList(raw, "f", 4)
		if msg != "" {
			require.Nil(t, elems)
			return
		}
		require.LessOrEqual(t, len(elems), 4)
		for _, e := range elems {
			require.True(t, json.Valid(e), "%q", e)
		}
	})
}
