package legacy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/legacytest"
)

// TestParseLegacyCases: what is refused, skipped and noted, exactly.
func TestParseLegacyCases(t *testing.T) {
	for _, tt := range legacytest.Cases() {
		t.Run(tt.Name, func(t *testing.T) {
			keys, rep, err := Parse(strings.NewReader(tt.In))
			checkInvariants(t, keys, rep, err)
			assert.Equal(t, tt.Refused, issueStrings(rep.Refusals), "refused")
			assert.Equal(t, tt.Skipped, issueStrings(rep.Skips), "skipped")
			assert.Equal(t, tt.Notes, issueStrings(rep.Notes), "notes")
			if tt.Refused != nil {
				require.ErrorIs(t, err, ErrRefused)
				assert.Contains(t, err.Error(), tt.Refused[0])
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.Keys, rep.Keys)
			}
			assert.NotContains(t, reportTexts(t, rep, err), secret)
		})
	}
}
