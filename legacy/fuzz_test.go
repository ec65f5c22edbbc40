package legacy

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/legacytest"
)

// secretValue finds the raw values of "key" members written without escapes.
var secretValue = regexp.MustCompile(`"key"\s*:\s*"([^"\\]*)"`)

// FuzzParseLegacy: Parse never panics; it refuses (ErrRefused) or
// returns keys that keep every invariant (checkInvariants); and its report
// does not depend on any secret: changing one secret's characters leaves
// every report text and error the same, and the keys the same but for that
// secret.
func FuzzParseLegacy(f *testing.F) {
	fixtures, err := filepath.Glob(filepath.Join("..", "testdata", "legacy", "*.json"))
	require.NoError(f, err)
	require.NotEmpty(f, fixtures)
	for _, name := range fixtures {
		data, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, c := range legacytest.Cases() {
		f.Add([]byte(c.In))
	}
	f.Add(genFile(3))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, rep, err := Parse(bytes.NewReader(data))
		checkInvariants(t, keys, rep, err)
		text := reportTexts(t, rep, err)
		if bytes.IndexByte(data, '\\') >= 0 {
			return // escapes would let one secret be spelled twice
		}
		for _, m := range secretValue.FindAllSubmatchIndex(data, 8) {
			s := data[m[2]:m[3]]
			alt := otherSecret(s)
			if alt == nil || bytes.Count(data, s) != 1 || bytes.Contains(data, alt) {
				continue // not a secret that stands alone
			}
			data2 := append(append(append([]byte(nil), data[:m[2]]...), alt...), data[m[3]:]...)
			keys2, rep2, err2 := Parse(bytes.NewReader(data2))
			require.Equal(t, text, reportTexts(t, rep2, err2), "the report depends on a secret")
			require.Len(t, keys2, len(keys))
			for i, k := range keys2 {
				if k.Secret == string(alt) {
					k.Secret = string(s)
				}
				require.Equal(t, keys[i], k)
			}
		}
	})
}

// otherSecret is s with every character changed for another that keeps it
// a non-blank JSON string character: nil if s is not printable ASCII.
func otherSecret(s []byte) []byte {
	if len(s) == 0 {
		return nil
	}
	alt := make([]byte, len(s))
	for i, c := range s {
		switch {
		case c < ' ' || c > '~':
			return nil
		case c == ' ':
			alt[i] = c // blank stays blank
		default:
			c++
			for c > '~' || c == '"' || c == '\\' || c == ' ' {
				if c > '~' {
					c = '!'
				} else {
					c++
				}
			}
			alt[i] = c
		}
	}
	return alt
}
