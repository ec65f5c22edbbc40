package keystore

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordLayout reads the records of the package doc's storage layout
// and checks them against the code: every prefix the doc names is one the
// key store writes, and the other way round.
func TestRecordLayout(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//\t([a-z])/<`).FindAllSubmatch(doc, -1) {
		documented = append(documented, string(m[1])+"/")
	}
	written := []string{recordPrefix, hashPrefix, legacyPrefix, teamPrefix}
	require.ElementsMatch(t, written, documented, "the records of the package doc, against the prefixes the key store writes")
}
