package ledger

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecordLayout reads the list of records in the package doc and
// checks it against the code: every prefix the doc names is one the
// ledger writes, and the other way round, and a block holds as many
// entries as the doc says.
func TestRecordLayout(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	var documented []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(L/[A-Za-z]/)`).FindAllSubmatch(doc, -1) {
		if p := string(m[1]); !slices.Contains(documented, p) {
			documented = append(documented, p)
		}
	}
	written := []string{entryPrefix, keyPrefix, teamPrefix, endUserPrefix, directoryPrefix, summaryPrefix, modelSummaryPrefix,
		monthSummaryPrefix, monthModelSummaryPrefix, totalPrefix, writerPrefix, dayPrefix}
	require.ElementsMatch(t, written, documented, "the records of the package doc, against the prefixes the ledger writes")

	m := regexp.MustCompile(`a block: (\d+) entries`).FindSubmatch(doc)
	require.NotNil(t, m, "the package doc says how many entries a block holds")
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	require.Equal(t, blockSize, n, "entries a block")
}
