package keystore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
)

// TestReserved asserts that Store.Reserved sums the reservations of a
// key's admissions in flight, from Admit to Finish, apart from other
// keys', and that a second Finish (refused) gives nothing back twice.
func TestReserved(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		k, secret := e.createPolicy("reserved", hourDay)
		other, otherSecret := e.createPolicy("other", hourDay)
		require.Zero(t, e.ks.Reserved(k.ID))

		a := e.admit(secret, keystore.Request{Model: "any", Reserve: 30})
		b := e.admit(secret, keystore.Request{Model: "any", Reserve: 12})
		c := e.admit(otherSecret, keystore.Request{Model: "any", Reserve: 5})
		require.Equal(t, int64(42), e.ks.Reserved(k.ID))
		require.Equal(t, int64(5), e.ks.Reserved(other.ID))

		_, err := a.Finish(ctx, 50)
		require.NoError(t, err)
		require.Equal(t, int64(12), e.ks.Reserved(k.ID))
		_, err = a.Finish(ctx, 50)
		require.Error(t, err)
		require.Equal(t, int64(12), e.ks.Reserved(k.ID), "a second Finish gives nothing back")

		for _, x := range []*keystore.Admission{b, c} {
			_, err := x.Finish(ctx, 0)
			require.NoError(t, err)
		}
		require.Zero(t, e.ks.Reserved(k.ID))
		require.Zero(t, e.ks.Reserved(other.ID))
		require.Zero(t, e.ks.Reserved("key_unknown"))
	})
}
