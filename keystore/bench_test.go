package keystore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/keystore"
)

// benchStore returns a key store on bolt with one key that has usage in
// its window. sync says whether Durable fsyncs (the storage's Sync) or
// returns at once, which isolates the cost of the call itself.
func benchStore(b *testing.B, sync bool) (*keystore.Store, keystore.Key, string) {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "k.db"))
	require.NoError(b, err)
	b.Cleanup(func() { s.Close() })
	c := &clock{}
	c.Set(t0)
	opts := keystore.Options{Now: c.Now}
	if !sync {
		opts.Durable = func(context.Context) error { return nil }
	}
	ks, err := keystore.New(s, opts)
	require.NoError(b, err)
	k, secret, err := ks.Create(ctx, keystore.Spec{Name: "bench", TokenLimit: 1 << 40})
	require.NoError(b, err)
	_, err = ks.RecordUsage(ctx, k.ID, 100)
	require.NoError(b, err)
	return ks, k, secret
}

func BenchmarkCheck(b *testing.B) {
	ks, _, secret := benchStore(b, true)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ks.Check(ctx, secret); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordUsage(b *testing.B) {
	for _, c := range []struct {
		name string
		sync bool
	}{{"sync", true}, {"nosync", false}} {
		b.Run(c.name, func(b *testing.B) {
			ks, k, _ := benchStore(b, c.sync)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ks.RecordUsage(ctx, k.ID, 7); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
