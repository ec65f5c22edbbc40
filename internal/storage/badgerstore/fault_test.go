package badgerstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/childtest"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/badgerstore"
	"github.com/ratestore/ratestore/internal/storage/storagetest"
	"github.com/ratestore/ratestore/strategies"
)

// The damage test runs its trials in a child process (this test binary
// again, running TestDamageChild) so that a panic or a signal in badger is
// a failed test rather than a lost run.
const (
	damageDirEnv  = "RATESTORE_BADGER_DAMAGE_DIR"
	damageSeedEnv = "RATESTORE_BADGER_DAMAGE_SEED"
	damageKeys    = 3000
	damageRun     = 32 // bytes overwritten by a "run" trial
)

// damages are the trials per kind of file (four kinds): 300 single-byte
// flips, 50 runs of damageRun random bytes and 48 truncations in all. CI
// runs a twentieth of them (each Open and Close of badger costs ~0.25 s,
// ~2 s under -race); RATESTORE_FAULT_SCALE=1 runs them all, any other
// value scales them.
var damages = []struct {
	name   string
	trials int
}{{"flip", 75}, {"run", 13}, {"truncate", 12}}

// TestDamagedFilesNeverCrash damages every kind of badger file (tables,
// value log, memtable log, MANIFEST) with single-byte flips, runs of
// random bytes and truncation, and checks that opening and reading the
// database never panics or faults: each trial either reads or fails with
// an error, and a damaged table or MANIFEST fails Open with an error
// matching ErrCorrupt that names the file.
func TestDamagedFilesNeverCrash(t *testing.T) {
	childtest.Run(t, "TestDamageChild",
		damageDirEnv+"="+t.TempDir(), damageSeedEnv+"="+childtest.Seed(damageSeedEnv))
}

// TestDamageChild is the child of TestDamagedFilesNeverCrash; run on its
// own it skips.
func TestDamageChild(t *testing.T) {
	dir := os.Getenv(damageDirEnv)
	if dir == "" {
		t.Skip("the child process of TestDamagedFilesNeverCrash")
	}
	rng := childtest.Rand(t, damageSeedEnv)
	scale := childtest.Scale(t, 1.0/20)
	tmpl := filepath.Join(dir, "template")
	makeTemplate(t, tmpl)

	for _, kind := range []string{".sst", ".vlog", ".mem", "MANIFEST"} {
		files := matching(t, tmpl, kind)
		require.NotEmpty(t, files, "the template has no %s file", kind)
		for _, d := range damages {
			damage, trials := d.name, max(1, int(float64(d.trials)*scale))
			var opened, refused, readErrs, reported int
			for trial := range trials {
				db := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", strings.TrimPrefix(kind, "."), damage, trial))
				storagetest.CopyDir(t, tmpl, db)
				name := files[rng.IntN(len(files))]
				path := filepath.Join(db, name)
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				// Damage the part that holds data: the logs are sparse
				// files, zeros past their last record.
				end := len(bytes.TrimRight(b, "\x00"))
				if end == 0 {
					continue
				}
				switch damage {
				case "flip":
					b[rng.IntN(end)] ^= byte(1 + rng.IntN(255))
				case "run":
					at := rng.IntN(max(1, end-damageRun))
					for i := at; i < min(at+damageRun, len(b)); i++ {
						b[i] = byte(rng.UintN(256))
					}
				default:
					b = b[:rng.IntN(end)]
				}
				storagetest.WriteSparse(t, path, b)

				s, err := badgerstore.Open(db, nil)
				if err != nil {
					if refused == 0 {
						fmt.Printf("SUMMARY %s %s: e.g. %v\n", kind, damage, err)
					}
					refused++
					if kind == ".sst" || kind == "MANIFEST" {
						if !errors.Is(err, strategies.ErrCorrupt) && !errors.Is(err, fs.ErrNotExist) {
							t.Errorf("%s %s: Open: %v: does not match ErrCorrupt", damage, name, err)
						}
					}
					continue
				}
				opened++
				err = s.Scan(nil, nil, func(k, v []byte) error { return nil })
				for i := 0; i < damageKeys && err == nil; i += 97 {
					var v []byte
					v, err = s.Get(fmt.Appendf(nil, "k%05d", i))
					switch {
					case err != nil:
					case v == nil:
						// Gone: only with a report of what Open dropped.
						if s.Recovery() == nil {
							t.Errorf("%s %s: key %d lost without a report", damage, name, i)
						}
						reported++
					case !bytes.Equal(v, value(i)):
						t.Errorf("%s %s: key %d read back a wrong value without an error", damage, name, i)
					}
				}
				if err != nil {
					readErrs++
				}
				_ = s.Close()
			}
			fmt.Printf("SUMMARY %s %s: %d trials, %d opened (%d read errors, %d keys gone with a report, none silently, no wrong value), %d refused\n",
				kind, damage, trials, opened, readErrs, reported, refused)
		}
	}
}

// makeTemplate builds a database with tables (a first round, closed), and
// a memtable log and value log with records (a second round, left open, as
// a crash leaves it), and copies it to dir.
func makeTemplate(t *testing.T, dir string) {
	build := dir + "-build"
	s, err := badgerstore.Open(build, nil)
	require.NoError(t, err)
	commitKeys(t, s, 0, damageKeys/2)
	require.NoError(t, s.Close())
	s, err = badgerstore.Open(build, nil)
	require.NoError(t, err)
	commitKeys(t, s, damageKeys/2, damageKeys)
	require.NoError(t, s.Sync())
	storagetest.CopyDir(t, build, dir) // while open: what a crash leaves
	require.NoError(t, s.Close())
}

func commitKeys(t *testing.T, s storage.Store, from, to int) {
	for i := from; i < to; i += 100 {
		var ops []storage.Op
		for j := i; j < min(i+100, to); j++ {
			ops = append(ops, storage.Op{Key: fmt.Appendf(nil, "k%05d", j), Value: value(j)})
		}
		require.NoError(t, s.Commit(ops))
	}
}

// value is key i's value: 2000 bytes, into the value log, for one key in
// 50, 40 bytes for the others.
func value(i int) []byte {
	if i%50 == 0 {
		return bytes.Repeat([]byte{byte(i)}, 2000)
	}
	return bytes.Repeat([]byte{byte(i)}, 40)
}

func matching(t *testing.T, dir, suffix string) []string {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), suffix) || strings.HasPrefix(e.Name(), suffix) {
			out = append(out, e.Name())
		}
	}
	return out
}
