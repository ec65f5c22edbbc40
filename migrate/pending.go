package migrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/keystore"
)

// Pending counts the imported keys whose legacy usage windows are not
// merged into their token window yet.
func Pending(ctx context.Context, db backend.Store) (int, error) {
	ks, err := keyStore(db)
	if err != nil {
		return 0, fmt.Errorf("migrate: pending: %w", err)
	}
	n, err := ks.PendingLegacy(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: pending: %w", err)
	}
	return n, nil
}

// MigrateAll merges now the legacy usage of every key that has some
// pending, one key at a time: each key's merge is one commit, which
// writes its token window and deletes its legacy record together, so a
// key is either migrated or still pending, never half, whenever MigrateAll
// stops. The merge is the one the first touch of the key would make (see the
// package doc); doing it ahead of time only saves that first request the
// work.
//
// progress, if not nil, is called with (0, total) before the first key,
// then with (done, total) after each key; total is the number of keys
// pending when MigrateAll started. A key deleted in the meantime counts as
// done.
//
// When ctx is cancelled, MigrateAll stops before the next key and returns
// ctx.Err(); calling it again migrates the rest. An error migrating a key
// (a corrupt record) stops it with an error naming that key.
func MigrateAll(ctx context.Context, db backend.Store, progress func(done, total int)) error {
	ks, err := keyStore(db)
	if err != nil {
		return fmt.Errorf("migrate: migrate all: %w", err)
	}
	return MigrateAllIn(ctx, ks, progress)
}

// MigrateAllIn is MigrateAll in the key store ks, wherever it keeps its
// keys: in Redis (keystore.Open on a redisstore.DB), each key's merge is one batch, so
// gateways sharing that Redis go on serving while it runs, and a key one of
// them migrated at its first touch counts as done. (ks.PendingLegacy is
// Pending's count.)
func MigrateAllIn(ctx context.Context, ks *keystore.Store, progress func(done, total int)) error {
	if ks == nil {
		return fmt.Errorf("migrate: migrate all: nil key store: %w", backend.ErrInvalid)
	}
	if progress == nil {
		progress = func(int, int) {}
	}
	var ids []string
	err := ks.LegacyIDs(ctx, func(id string) error {
		ids = append(ids, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: listing the keys pending: %w", err)
	}
	progress(0, len(ids))
	for i, id := range ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := ks.MigrateLegacy(ctx, id)
		if err != nil && !errors.Is(err, keystore.ErrNotFound) {
			return fmt.Errorf("migrate: migrating key %s: %w", id, err)
		}
		progress(i+1, len(ids))
	}
	return nil
}
