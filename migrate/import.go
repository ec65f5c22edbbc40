package migrate

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/legacy"
)

// ImportLegacyFile loads the legacy key file at path into db: all of it, in
// one commit, or nothing. See ImportLegacy.
func ImportLegacyFile(ctx context.Context, db backend.Store, path string) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("migrate: open legacy file: %w", err)
	}
	defer f.Close()
	return ImportLegacy(ctx, db, f)
}

// ImportLegacy loads a legacy key file ({"keys": [...]}, LEGACY.md section
// 1) read from r into db's key store (keystore.Open(db, keystore.Options{}),
// the Store every other user of db shares), in one commit: all of it or
// nothing.
//
// The file is judged as a whole first (see the package doc). A refused file
// writes nothing: the Report lists every refusal, and the error matches
// ErrRefused. Otherwise every key is imported with its legacy secret (stored
// as a hash), its limit, dates and lifetime total, and its usage windows
// kept as they are, to be merged into its token window the first time the
// key is touched (or by MigrateAll). Each key gets one token window of the
// key store's usage window (5 hours, in 5-minute buckets) with its
// token_limit_per_5h.
//
// Importing is idempotent: an entry whose secret already has a key in db is
// not imported again but listed in Report.Skips, by index and name. Report.Keys
// counts the keys imported by this call, Report.Windows their usage windows.
//
// A file of any size imports on both backends: on badger, whose
// transactions hold some thousands of keys at most, the engine splits a
// commit too large for one into several (ratestore.DB.Update), so a crash
// in the middle of writing it can leave part of the import on disk.
//
// Every error comes with a Report of no keys. A refusal, or an error before
// the key store took the keys (reading the file, ctx), wrote nothing. An
// error in committing them (ctx cancelled while waiting for the sync, a
// failed write, which the engine retries at its next commit) may leave the
// import committed, or committed later; importing the file again then
// skips the keys already there.
func ImportLegacy(ctx context.Context, db backend.Store, r io.Reader) (Report, error) {
	return importLegacy(ctx, func() (*keystore.Store, error) { return keyStore(db) }, r)
}

// ImportLegacyInto is ImportLegacy into the key store ks, wherever it
// keeps its keys: a key store in Redis (keystore.Open on a redisstore.DB), which several
// gateways share, takes a legacy file as a database's does, in one atomic
// commit, idempotent.
func ImportLegacyInto(ctx context.Context, ks *keystore.Store, r io.Reader) (Report, error) {
	if ks == nil {
		return Report{}, fmt.Errorf("migrate: import: nil key store: %w", backend.ErrInvalid)
	}
	return importLegacy(ctx, func() (*keystore.Store, error) { return ks, nil }, r)
}

// importLegacy is ImportLegacy into the key store that store opens, once
// the file has been judged.
func importLegacy(ctx context.Context, store func() (*keystore.Store, error), r io.Reader) (Report, error) {
	keys, index, rep, err := load(r)
	if err != nil {
		return rep, err
	}
	if err := ctx.Err(); err != nil {
		return none(rep), err
	}
	ks, err := store()
	if err != nil {
		return none(rep), fmt.Errorf("migrate: import: %w", err)
	}
	res, err := ks.Import(ctx, keys)
	if err != nil {
		return none(rep), fmt.Errorf("migrate: import: %w", err)
	}
	rep.Keys, rep.Windows = 0, 0
	imported := make([]bool, len(keys))
	for i := range keys {
		imported[i] = true
	}
	for _, s := range res.Skipped {
		imported[s.Index] = false
		rep.Skips = append(rep.Skips, keys[s.Index].Issue(index[s.Index], "",
			"a key with this secret exists already ("+s.ID+"), left out"))
	}
	for i, k := range keys {
		if imported[i] {
			rep.Keys++
			rep.Windows += len(k.Windows)
		}
	}
	slices.SortStableFunc(rep.Skips, func(a, b Issue) int { return a.Index - b.Index })
	return rep, nil
}

// CheckLegacyFile reads and judges the legacy key file at path as
// ImportLegacyFile would, and writes nothing: a dry run. Report.Keys counts
// the keys the file holds for import; entries whose secret a database
// already has would be skipped there.
func CheckLegacyFile(path string) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, fmt.Errorf("migrate: open legacy file: %w", err)
	}
	defer f.Close()
	return CheckLegacy(f)
}

// CheckLegacy is CheckLegacyFile on a file read from r.
func CheckLegacy(r io.Reader) (Report, error) {
	_, _, rep, err := load(r)
	return rep, err
}

// keyStore returns the key store of db: the one Store of db that every
// caller shares (keystore.Open attaches it to db), opened with the default
// options, so that legacy keys get the legacy window of 5 hours.
func keyStore(db backend.Store) (*keystore.Store, error) {
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		return nil, fmt.Errorf("opening the key store: %w", err)
	}
	return ks, nil
}

// none is rep of a file from which nothing was imported.
func none(rep Report) Report {
	rep.Keys, rep.Windows = 0, 0
	return rep
}

// load parses a legacy file and checks its keys against what the key store
// keeps. It returns the keys to import and, for each, the index of its
// entry in "keys"; or a refusal.
func load(r io.Reader) ([]legacy.Key, []int, Report, error) {
	keys, rep, err := legacy.Parse(r)
	if err != nil {
		return nil, nil, rep, fmt.Errorf("migrate: %w", err)
	}
	index, err := entryIndexes(rep, len(keys))
	if err != nil {
		return nil, nil, none(rep), err
	}
	checkStorable(keys, index, &rep)
	if err := rep.Err(); err != nil {
		return nil, nil, none(rep), fmt.Errorf("migrate: %w", err)
	}
	return keys, index, rep, nil
}

// entryIndexes returns the index in "keys" of the entry of each key
// legacy.Parse returned: every entry is either a key, in order, or skipped.
func entryIndexes(rep Report, n int) ([]int, error) {
	skipped := make(map[int]bool, len(rep.Skips))
	for _, s := range rep.Skips {
		skipped[s.Index] = true
	}
	index := make([]int, 0, n)
	for i := 0; i < rep.Entries; i++ {
		if !skipped[i] {
			index = append(index, i)
		}
	}
	if len(index) != n {
		return nil, fmt.Errorf("migrate: internal error: %d entries, %d skipped, but %d keys", rep.Entries, len(rep.Skips), n)
	}
	return index, nil
}

// checkStorable refuses what the key store cannot keep as the file says
// it (see the package doc): a name or model longer than keystore.MaxName
// bytes or holding a character text.Problem refuses (a control or format
// character, a separator), a created_at or last_used past the last
// instant it stores, more than keystore.MaxLegacyWindows windows. An
// expiry_date past that instant (a "never" written as year 9999) becomes
// that instant, with a note.
func checkStorable(keys []legacy.Key, index []int, rep *Report) {
	for i := range keys {
		k := &keys[i]
		add := func(list *[]Issue, field, reason string) {
			*list = append(*list, k.Issue(index[i], field, reason))
		}
		for _, f := range [...]struct{ field, value string }{{"name", k.Name}, {"model", k.Model}} {
			if why := text.Problem(f.value, keystore.MaxName); why != "" {
				add(&rep.Refusals, f.field, why+": the key store does not keep it")
			}
		}
		if k.ExpiresAt.After(maxStored) {
			k.ExpiresAt = maxStored
			// among the entry's notes, not after those of later entries
			at := slices.IndexFunc(rep.Notes, func(n Issue) bool { return n.Index > index[i] })
			if at < 0 {
				at = len(rep.Notes)
			}
			rep.Notes = slices.Insert(rep.Notes, at, k.Issue(index[i], "expiry_date",
				"after "+maxStored.Format(time.RFC3339)+", the last instant the key store holds: the key expires then"))
		}
		for _, f := range [...]struct {
			field string
			t     time.Time
		}{{"created_at", k.CreatedAt}, {"last_used", k.LastUsed}} {
			if f.t.After(maxStored) {
				add(&rep.Refusals, f.field, "after "+maxStored.Format(time.RFC3339)+", the last instant the key store holds")
			}
		}
		if len(k.Windows) > keystore.MaxLegacyWindows {
			add(&rep.Refusals, "usage_windows", fmt.Sprintf("%d windows, more than the %d the key store keeps for one key",
				len(k.Windows), keystore.MaxLegacyWindows))
		}
	}
}

// maxStored is the last instant the key store holds (Unix nanoseconds).
var maxStored = time.Unix(0, math.MaxInt64).UTC()
