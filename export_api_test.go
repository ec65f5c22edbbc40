package ratestore_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/strategies"
)

// TestExportRestore: what Export gives, Restore loads into another backend,
// record for record, and the copy decides as the original would.
func TestExportRestore(t *testing.T) {
	all := backendtest.Embedded()
	for i, e := range all {
		t.Run(e.String(), func(t *testing.T) {
			src := open(t, e)
			l, err := src.Limiter("rps", strategies.GCRA{Rate: 1, Burst: 3})
			require.NoError(t, err)
			_, err = l.AllowN(ctx, "alice", 2)
			require.NoError(t, err)
			require.NoError(t, src.Update(ctx, nil, func(b backend.Batch) error {
				return b.Put([]byte("k/app"), []byte("a record"))
			}))

			var recs []ratestore.Entry
			require.NoError(t, src.Export(ctx, func(r ratestore.Entry) error {
				recs = append(recs, ratestore.Entry{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
				return nil
			}))
			require.Len(t, recs, 2, "a state and a record")

			dst := open(t, all[(i+1)%len(all)]) // another backend or mode
			dst.clock.Set(src.clock.Now())
			require.NoError(t, dst.Restore(ctx, recs))
			var got []ratestore.Entry
			require.NoError(t, dst.Export(ctx, func(r ratestore.Entry) error {
				got = append(got, ratestore.Entry{Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)})
				return nil
			}))
			require.Equal(t, recs, got)

			dl, err := dst.Limiter("rps", strategies.GCRA{Rate: 1, Burst: 3})
			require.NoError(t, err)
			r, err := dl.AllowN(ctx, "alice", 2)
			require.NoError(t, err)
			require.False(t, r.Allowed, "alice has 1 left in the copy too")
			v, err := dst.Get(ctx, []byte("k/app"))
			require.NoError(t, err)
			require.Equal(t, "a record", string(v))

			// Once a limiter state is in memory, Restore refuses.
			require.ErrorIs(t, dst.Restore(ctx, recs), ratestore.ErrInvalid)
		})
	}
}
