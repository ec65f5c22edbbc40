package etag

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMatches(t *testing.T) {
	tag := Of([]byte("body"))
	require.NotEqual(t, tag, Of([]byte("body2")))
	for field, want := range map[string]bool{
		"":                     false,
		tag:                    true,
		"W/" + tag:             true,
		`"x", ` + tag:          true,
		"*":                    true,
		`"x"`:                  false,
		tag[:len(tag)-1]:       false,
		" " + tag + " , \"y\"": true,
	} {
		require.Equal(t, want, Matches(field, tag), field)
	}
}
