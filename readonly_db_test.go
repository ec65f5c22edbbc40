package ratestore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/badger"
	"github.com/ratestore/ratestore/internal/childtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/strategies"
)

// TestReadOnlyDatabase builds a database on each backend with keys of
// every record version, legacy usage pending, a ledger day past the
// retention and chunks not compacted, and (bolt) log records that no
// checkpoint applied; then, in a child process (a crash fails the test),
// opens it read-only, twice at once, reads keys, usage, checks and spend,
// and tries every write, each refused with ErrReadOnly. Every file keeps
// its bytes and modification time. A writable open of a copy reads the
// same keys, usage and spend, having written them: the read-only view is
// the one a writer would have left.
func TestReadOnlyDatabase(t *testing.T) {
	for _, backend := range []ratestore.Backend{ratestore.Bolt, badger.Backend} {
		t.Run(backend.String(), func(t *testing.T) {
			dir := t.TempDir()
			env := []string{roDirEnv + "=" + dir, roBackendEnv + "=" + backend.String()}
			childtest.Run(t, "TestReadOnlyBuild", env...)
			path, crashed, _, viewPath := roPaths(dir)
			files := []string{path, path + "-wal", crashed}
			before := storagetest.Snapshot(t, files...)
			require.NotEmpty(t, before)
			if backend == ratestore.Bolt {
				// A clean Close cuts the log to its header and end marker.
				require.Greater(t, before[path+"-wal"].Size, int64(64), "the log holds records no checkpoint applied")
			}

			childtest.Run(t, "TestReadOnlyChild", env...)
			require.Equal(t, before, storagetest.Snapshot(t, files...), "the files read-only opens read")

			b, err := os.ReadFile(viewPath)
			require.NoError(t, err)
			var got roView
			require.NoError(t, json.Unmarshal(b, &got))
			require.Len(t, got.Requests, roNewEntries, "the retention's entries (a query reaching past it is refused)")
			control := filepath.Join(dir, "control")
			copyFiles(t, path, control)
			copied := storagetest.Snapshot(t, control, control+"-wal")
			w := roOpen(t, control, backend, false)
			want := w.view(t, roLoadFixture(t, dir))
			w.close(t)
			want.Requests = got.Requests // a writer drops the day past the retention
			require.Equal(t, want, got)
			require.NotEqual(t, copied, storagetest.Snapshot(t, control, control+"-wal"), "a writable open changes the database")
		})
	}
}

// TestReadOnlyChild is the child of TestReadOnlyDatabase that opens its
// database read-only; run on its own it skips.
func TestReadOnlyChild(t *testing.T) {
	dir := os.Getenv(roDirEnv)
	if dir == "" {
		t.Skip("a child process of TestReadOnlyDatabase")
	}
	backend := backendNamed(os.Getenv(roBackendEnv))
	path, crashed, _, viewPath := roPaths(dir)
	fx := roLoadFixture(t, dir)

	ro := roOpen(t, path, backend, true)
	view := ro.view(t, fx)
	second := roOpen(t, path, backend, true)
	require.Equal(t, view, second.view(t, fx), "a second read-only open at once")
	_, err := ratestore.Open(path, ratestore.Options{Backend: backend})
	require.ErrorIs(t, err, ratestore.ErrLocked, "a writer, while read-only opens hold it")

	l, err := ro.db.Limiter("keys:w:5h0m0s", strategies.RollingWindow{Limit: 1000, Window: 5 * time.Hour, Bucket: 5 * time.Minute})
	require.NoError(t, err)
	requireWritesRefused(t, ro.db, l)
	requireKeyWritesRefused(t, ro.ks, fx)
	requireLedgerWritesRefused(t, ro.led, fx.Current)
	require.Equal(t, view, ro.view(t, fx), "nothing changed, in memory either")
	b, err := json.Marshal(view)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(viewPath, b, 0o600))
	second.close(t)
	ro.close(t)

	if backend != ratestore.Bolt {
		_, err := ratestore.Open(crashed, ratestore.Options{Backend: backend, ReadOnly: true})
		require.ErrorIs(t, err, ratestore.ErrReadOnly, "a badger database left open by a crash")
	}
	locked := filepath.Join(t.TempDir(), "locked")
	copyFiles(t, path, locked)
	w, err := ratestore.Open(locked, ratestore.Options{Backend: backend})
	require.NoError(t, err)
	_, err = ratestore.Open(locked, ratestore.Options{Backend: backend, ReadOnly: true})
	require.ErrorIs(t, err, ratestore.ErrLocked, "read-only, while a writer holds it")
	require.NoError(t, w.Close())
}

// copyFiles copies the database at from (a bolt file and its log, or a
// badger directory) to to.
func copyFiles(t *testing.T, from, to string) {
	fi, err := os.Stat(from)
	require.NoError(t, err)
	if fi.IsDir() {
		storagetest.CopyDir(t, from, to)
		return
	}
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(from + suffix)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to+suffix, b, 0o600))
	}
}

// roDB is a database of the read-only test, open at roNow with its key
// store and ledger.
type roDB struct {
	db  *ratestore.DB
	ks  *keystore.Store
	led *ledger.Ledger
}

// roOpen opens the database at path, read-only or not, at roNow.
func roOpen(t *testing.T, path string, backend ratestore.Backend, readOnly bool) roDB {
	t.Helper()
	db, err := ratestore.Open(path, ratestore.Options{Backend: backend, Now: fakeclock.New(roNow).Now, ReadOnly: readOnly})
	require.NoError(t, err)
	ks, err := keystore.Open(db, keystore.Options{})
	require.NoError(t, err)
	led, err := ledger.Open(db, ledger.Options{})
	require.NoError(t, err)
	return roDB{db: db, ks: ks, led: led}
}

func (r roDB) close(t *testing.T) {
	t.Helper()
	require.NoError(t, r.led.Close(context.Background()))
	require.NoError(t, r.db.Close())
}

// roView is what the read-only test reads of a database.
type roView struct {
	Pending  int // keys with legacy usage pending, before anything touches them
	Keys     []keystore.Key
	Usage    map[string]keystore.Usage // by key id, and the team's by its id
	Checks   map[string]strategies.Result
	Spend    []ledger.Row // by day and key, from the rollups
	Requests []ledger.Entry
	Tail     string // the record bolt's log alone holds
}

// view reads r: the keys with List, Get, Usage and Check (by the secrets
// of fx), the team's usage, the spend and every entry of the ledger, and a
// record.
func (r roDB) view(t *testing.T, fx roFixture) roView {
	t.Helper()
	ctx := context.Background()
	var v roView
	var err error
	v.Pending, err = r.ks.PendingLegacy(ctx)
	require.NoError(t, err)
	require.NoError(t, r.ks.List(ctx, func(k keystore.Key) error {
		v.Keys = append(v.Keys, k)
		return nil
	}))
	v.Usage, v.Checks = map[string]keystore.Usage{}, map[string]strategies.Result{}
	for _, k := range v.Keys {
		got, err := r.ks.Get(ctx, k.ID)
		require.NoError(t, err)
		require.Equal(t, k, got)
		v.Usage[k.ID], err = r.ks.Usage(ctx, k.ID)
		require.NoError(t, err)
		if k.Team != "" {
			v.Usage[k.Team], err = r.ks.TeamUsage(ctx, k.Team)
			require.NoError(t, err)
		}
	}
	for id, secret := range fx.Secrets {
		_, v.Checks[id], err = r.ks.Check(ctx, secret)
		require.NoError(t, err)
	}
	spend, err := r.led.Spend(ctx, ledger.SpendQuery{From: roNow.Add(-120 * 24 * time.Hour), To: roNow, GroupBy: []string{ledger.ByDay, ledger.ByKey}})
	require.NoError(t, err)
	v.Spend = spend.Rows
	// The retention's days (a query reaching before them is refused): the
	// older entries, kept in the file, show in the spend above.
	q := ledger.RequestQuery{Limit: 7}
	for {
		page, err := r.led.Requests(ctx, q)
		require.NoError(t, err)
		v.Requests = append(v.Requests, page.Entries...)
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	tail, err := r.db.Get(ctx, []byte("x/tail"))
	require.NoError(t, err)
	v.Tail = string(tail)
	return v
}

// requireKeyWritesRefused tries every call that changes a key or a team
// of ks, a key store on a database opened read-only.
func requireKeyWritesRefused(t *testing.T, ks *keystore.Store, fx roFixture) {
	t.Helper()
	ctx := context.Background()
	id, secret := fx.Current, fx.Secrets[fx.Current]
	refused := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, keystore.ErrReadOnly, what)
	}
	_, _, err := ks.Create(ctx, keystore.Spec{Name: "new", TokenLimit: 10})
	refused("Create", err)
	_, err = ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_new", TokenLimit: 10}})
	refused("Import", err)
	_, err = ks.Update(ctx, id, func(s *keystore.Spec) error { s.Name = "renamed"; return nil })
	refused("Update", err)
	refused("Disable", ks.Disable(ctx, id))
	refused("Enable", ks.Enable(ctx, id))
	_, _, err = ks.Rotate(ctx, id, time.Minute)
	refused("Rotate", err)
	_, err = ks.RecordUsage(ctx, id, 5)
	refused("RecordUsage", err)
	_, err = ks.Admit(ctx, secret, keystore.Request{Reserve: 1})
	refused("Admit", err)
	for lid := range fx.Secrets {
		if pending, err := ks.MigrateLegacy(ctx, lid); pending {
			refused("MigrateLegacy", err)
		}
	}
	refused("Delete", ks.Delete(ctx, id))
	_, err = ks.CreateTeam(ctx, keystore.TeamSpec{Name: "new", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: time.Hour}}}})
	refused("CreateTeam", err)
	_, err = ks.UpdateTeam(ctx, fx.Team, func(s *keystore.TeamSpec) error { s.Name = "renamed"; return nil })
	refused("UpdateTeam", err)
	refused("DeleteTeam", ks.DeleteTeam(ctx, fx.Empty))
}

// requireLedgerWritesRefused tries every write of led, a ledger on a
// database opened read-only, for key.
func requireLedgerWritesRefused(t *testing.T, led *ledger.Ledger, key string) {
	t.Helper()
	ctx := context.Background()
	_, err := led.Note(ledger.Entry{Key: key})
	require.ErrorIs(t, err, ratestore.ErrReadOnly, "Note")
	require.ErrorIs(t, led.Add(ctx, ledger.Entry{Key: key}), ratestore.ErrReadOnly, "Add")
	require.ErrorIs(t, led.Refused(ctx, ledger.Refusal{Key: key, Reason: "limited"}), ratestore.ErrReadOnly, "Refused")
	require.ErrorIs(t, led.DropExpired(ctx), ratestore.ErrReadOnly, "DropExpired")
	require.ErrorIs(t, led.Compact(ctx), ratestore.ErrReadOnly, "Compact")
}

// roLoadFixture reads what TestReadOnlyBuild wrote in dir.
func roLoadFixture(t *testing.T, dir string) roFixture {
	t.Helper()
	_, _, path, _ := roPaths(dir)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var fx roFixture
	require.NoError(t, json.Unmarshal(b, &fx))
	return fx
}
