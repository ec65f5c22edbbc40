package ratestore_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/childtest"
	"github.com/ratestore/ratestore/internal/storage"
	"github.com/ratestore/ratestore/internal/storage/boltstore"
	"github.com/ratestore/ratestore/internal/storage/wal"
	"github.com/ratestore/ratestore/strategies"
)

// Fault tests for the bolt backend: damaged logs and damaged bbolt files.
// Each runs its trials in a child process (this test binary again, running
// TestFaultBoltChild), so that a panic or a signal in bbolt or the log
// reader is a failed test rather than a lost run.
//
// The trial counts below are the targets. CI runs a fifth of them
// (about 25 s under -race); RATESTORE_FAULT_SCALE=1 runs them all (a few
// minutes under -race), any other value scales them.
const (
	faultModeEnv = "RATESTORE_FAULT_CHILD"
	faultDirEnv  = "RATESTORE_FAULT_DIR"
	faultSeedEnv = "RATESTORE_FAULT_SEED"

	walRecords   = 500 // acknowledged Sync calls in the damaged log
	walFlips     = 100
	walCuts      = 100
	foreignLogs  = 100
	boltFlips    = 300
	boltRuns     = 50
	boltKeys     = 500
	boltRunBytes = 32
)

var faultBucket = strategies.TokenBucket{Rate: 1e-6, Burst: 1 << 40}

// runFaultChild runs mode in a child and fails t if the child fails in any
// way: an error it reports, a panic, or a signal.
func runFaultChild(t *testing.T, mode, dir string) string {
	t.Helper()
	return childtest.Run(t, "TestFaultBoltChild",
		faultModeEnv+"="+mode, faultDirEnv+"="+dir, faultSeedEnv+"="+childtest.Seed(faultSeedEnv))
}

// TestFaultBoltChild is the child of the tests below; run on its own it
// skips.
func TestFaultBoltChild(t *testing.T) {
	mode, dir := os.Getenv(faultModeEnv), os.Getenv(faultDirEnv)
	if mode == "" {
		t.Skip("the child process of the TestFaultBolt tests")
	}
	rng := childtest.Rand(t, faultSeedEnv)
	scale := childtest.Scale(t, 0.2)
	n := func(count int) int { return max(1, int(float64(count)*scale)) }
	switch mode {
	case "wal-writer":
		walWriter(t, dir)
	case "wal-flips":
		walFlipTrials(t, dir, rng, n(walFlips))
	case "wal-cuts":
		walCutTrials(t, dir, rng, n(walCuts))
	case "foreign":
		foreignTrials(t, dir, rng, n(foreignLogs))
	case "bolt":
		boltTrials(t, dir, rng, n(boltFlips), n(boltRuns))
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// walWriter makes walRecords acknowledged Sync calls, one key each, prints
// "ready" and waits to be killed: the log then holds one record per call.
func walWriter(t *testing.T, dir string) {
	db, err := ratestore.Open(filepath.Join(dir, "db"), ratestore.Options{Now: newClock().Now})
	require.NoError(t, err)
	l, err := db.Limiter("fault", faultBucket)
	require.NoError(t, err)
	for i := range walRecords {
		_, err := l.Allow(ctx, fmt.Sprint("k", i))
		require.NoError(t, err)
	}
	fmt.Println("ready")
	select {} // killed by the parent
}

// logRecords returns the offsets of the log's records and where they end.
func logRecords(t *testing.T, b []byte) (starts []int64, end int64) {
	off := int64(wal.HeaderSize)
	for off+8 <= int64(len(b)) {
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 {
			break
		}
		starts = append(starts, off)
		off += 8 + n
	}
	require.Len(t, starts, walRecords, "one record per acknowledged call")
	return starts, off
}

// copyDB copies the database at src (its bbolt file and log; the log with
// at most logBytes bytes, the rest being zeros) to dst, applying mangle to
// the copy of file ("db" or "db-wal").
func copyDB(t *testing.T, src, dst string, logBytes int, file string, mangle func([]byte)) {
	for _, name := range []string{"db", "db-wal"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		if name == "db-wal" && logBytes > 0 && len(b) > logBytes {
			b = b[:logBytes]
		}
		if name == file {
			mangle(b)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dst, name), b, 0o600))
	}
}

// walFlipTrials flips one random byte of the written part of the log per
// trial, then opens the database twice from that copy: without Recover
// (Open fails with ErrCorrupt naming the offset, or every record is there)
// and with it (every record before the damage is there, and every one
// missing is reported).
func walFlipTrials(t *testing.T, dir string, rng *mrand.Rand, trials int) {
	src := filepath.Join(dir, "src")
	raw, err := os.ReadFile(filepath.Join(src, "db-wal"))
	require.NoError(t, err)
	starts, end := logRecords(t, raw)
	var refused, recovered, header, lastRecord, intact int
	for trial := range trials {
		off := rng.Int64N(end)
		flip := byte(1 + rng.IntN(255))
		rec := -1 // the record holding off; -1: the header
		for i, s := range starts {
			if s <= off {
				rec = i
			}
		}
		what := fmt.Sprintf("trial %d: byte %d ^= %#x (record %d)", trial, off, flip, rec)
		for _, recover := range []bool{false, true} {
			trialDir := t.TempDir()
			copyDB(t, src, trialDir, int(end)+64<<10, "db-wal", func(b []byte) { b[off] ^= flip })
			path := filepath.Join(trialDir, "db")
			var logged bytes.Buffer
			db, err := ratestore.Open(path, ratestore.Options{Now: newClock().Now, Recover: recover,
				Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelError}))})
			if rec < 0 {
				// A damaged header: refused, naming the log.
				require.Error(t, err, what)
				require.ErrorContains(t, err, path+"-wal", what)
				require.True(t, errors.Is(err, ratestore.ErrCorrupt) || errors.Is(err, wal.ErrVersion), "%s: %v", what, err)
				header++
				continue
			}
			if !recover && err != nil {
				require.ErrorIs(t, err, ratestore.ErrCorrupt, what)
				require.ErrorContains(t, err, path+"-wal", what)
				require.ErrorContains(t, err, fmt.Sprintf("offset %d", starts[rec]), what)
				refused++
				continue
			}
			require.NoError(t, err, what)
			l, err := db.Limiter("fault", faultBucket)
			require.NoError(t, err)
			var missing []int
			for i := range walRecords {
				r, err := l.Peek(ctx, fmt.Sprint("k", i))
				require.NoError(t, err, what)
				if faultBucket.Burst-r.Remaining != 1 {
					missing = append(missing, i)
				}
			}
			report := db.Recovery()
			require.NoError(t, db.Close())
			switch {
			case len(missing) == 0:
				require.Nil(t, report, what)
				intact++
			case rec == walRecords-1:
				// The last record, damaged: what a torn append looks
				// like, dropped by design but reported (see package
				// wal), or with its length grown past the end of the
				// file, a truncated log (Recover).
				require.Equal(t, []int{rec}, missing, what)
				require.NotNil(t, report, "%s: the last record dropped without a report", what)
				require.True(t, report.Tail || recover && report.Truncated, "%s: %+v", what, report)
				require.Equal(t, starts[rec], report.Offset, what)
				lastRecord++
			default:
				require.True(t, recover, "%s: silently lost %v", what, missing)
				require.NotNil(t, report, "%s: lost %v without a report", what, missing)
				require.GreaterOrEqual(t, missing[0], rec, "%s: a record before the damage is gone", what)
				require.Equal(t, uint64(len(missing)), report.Records, "%s: %+v", what, report)
				require.Equal(t, starts[rec], report.Offset, what)
				require.Equal(t, path+"-wal", report.File)
				require.Equal(t, 1, bytes.Count(logged.Bytes(), []byte("\n")), "%s: one line: %s", what, &logged)
				require.Contains(t, logged.String(), fmt.Sprintf("offset=%d records=%d", report.Offset, report.Records))
				recovered++
			}
		}
	}
	fmt.Printf("SUMMARY wal flips: %d trials, each opened without and with Recover; opens: %d refused (ErrCorrupt, offset named), %d recovered with a report, %d refused for header damage, %d intact, %d with the last record damaged (dropped as torn, reported)\n",
		trials, refused, recovered, header, intact, lastRecord)
}

// walCutTrials cuts the log short per trial, at a record boundary or
// anywhere, before its end marker: Open refuses it (ErrCorrupt naming the
// log), and with Recover keeps every whole record before the cut and
// reports the truncation.
func walCutTrials(t *testing.T, dir string, rng *mrand.Rand, trials int) {
	src := filepath.Join(dir, "src")
	raw, err := os.ReadFile(filepath.Join(src, "db-wal"))
	require.NoError(t, err)
	starts, end := logRecords(t, raw)
	for trial := range trials {
		cut := int64(wal.HeaderSize) + rng.Int64N(end+8-wal.HeaderSize)
		if trial%2 == 0 {
			cut = starts[rng.IntN(len(starts))] // a record boundary
		}
		whole := 0 // records that end before the cut
		for i := range starts {
			recEnd := end
			if i+1 < len(starts) {
				recEnd = starts[i+1]
			}
			if recEnd <= cut {
				whole = i + 1
			}
		}
		what := fmt.Sprintf("trial %d: cut at %d (%d whole records)", trial, cut, whole)
		for _, recover := range []bool{false, true} {
			trialDir := t.TempDir()
			copyDB(t, src, trialDir, int(cut), "", nil)
			path := filepath.Join(trialDir, "db")
			db, err := ratestore.Open(path, ratestore.Options{Now: newClock().Now, Recover: recover})
			if !recover {
				require.ErrorIs(t, err, ratestore.ErrCorrupt, what)
				require.ErrorContains(t, err, path+"-wal", what)
				continue
			}
			require.NoError(t, err, what)
			l, err := db.Limiter("fault", faultBucket)
			require.NoError(t, err)
			for i := range walRecords {
				r, err := l.Peek(ctx, fmt.Sprint("k", i))
				require.NoError(t, err, what)
				require.Equal(t, i < whole, faultBucket.Burst-r.Remaining == 1, "%s: record %d", what, i)
			}
			report := db.Recovery()
			require.NoError(t, db.Close())
			require.NotNil(t, report, what)
			require.True(t, report.Truncated, "%s: %+v", what, report)
		}
	}
	fmt.Printf("SUMMARY wal cuts: %d logs cut short before their end marker, each refused, and opened with Recover keeping every whole record\n", trials)
}

// foreignTrials puts the log of another database, with records numbered
// from 1 like this one's, next to the bbolt file: Open refuses it.
func foreignTrials(t *testing.T, dir string, rng *mrand.Rand, trials int) {
	src := filepath.Join(dir, "src")
	for trial := range trials {
		trialDir := t.TempDir()
		copyDB(t, src, trialDir, 0, "", nil)
		path := filepath.Join(trialDir, "db")
		require.NoError(t, os.Remove(path+"-wal"))
		var id wal.ID
		_, _ = rand.Read(id[:])
		l, err := wal.Open(path+"-wal", id)
		require.NoError(t, err)
		_, err = l.Replay(0, func(uint64, []storage.Op) error { return nil })
		require.NoError(t, err)
		for i := range 1 + rng.IntN(2*walRecords) {
			require.NoError(t, l.Append([]storage.Op{{Key: fmt.Appendf(nil, "foreign%d", i), Value: []byte("v")}}))
		}
		require.NoError(t, l.Sync())
		require.NoError(t, l.Close())
		for _, recover := range []bool{false, true} {
			_, err := ratestore.Open(path, ratestore.Options{Recover: recover})
			require.ErrorIs(t, err, ratestore.ErrCorrupt, "trial %d", trial)
			require.ErrorContains(t, err, path+"-wal")
			require.ErrorContains(t, err, path+":")
			require.ErrorContains(t, err, "belongs to another database")
		}
	}
	fmt.Printf("SUMMARY foreign logs: %d of %d refused (with and without Recover)\n", trials, trials)
}

// boltTrials damages a bbolt file holding boltKeys states, one random byte
// or one run of boltRunBytes random bytes per trial, and reads everything
// back through the store and through a DB: values or ErrCorrupt, never a
// crash (which fails the parent test) and never another error.
func boltTrials(t *testing.T, dir string, rng *mrand.Rand, flips, runs int) {
	src := filepath.Join(dir, "bolt")
	require.NoError(t, os.MkdirAll(src, 0o700))
	db, err := ratestore.Open(filepath.Join(src, "db"), ratestore.Options{Durability: ratestore.Async, Now: newClock().Now})
	require.NoError(t, err)
	l, err := db.Limiter("fault", faultBucket)
	require.NoError(t, err)
	for i := range boltKeys {
		_, err := l.AllowN(ctx, fmt.Sprint("k", i), int64(i+1))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	raw, err := os.ReadFile(filepath.Join(src, "db"))
	require.NoError(t, err)
	size := len(raw)

	var openFailed, readFailed, lost, clean, panics int
	corrupt := func(what string, err error) bool {
		if err == nil {
			return false
		}
		require.ErrorIs(t, err, ratestore.ErrCorrupt, what)
		if strings.Contains(err.Error(), "damaged page") {
			panics++
		}
		return true
	}
	for trial := range flips + runs {
		var what string
		mangle := func(b []byte) {
			if trial < flips {
				off, flip := rng.IntN(size), byte(1+rng.IntN(255))
				b[off] ^= flip
				what = fmt.Sprintf("trial %d: byte %d ^= %#x", trial, off, flip)
				return
			}
			off := rng.IntN(size - boltRunBytes)
			for i := range boltRunBytes {
				b[off+i] = byte(rng.UintN(256))
			}
			what = fmt.Sprintf("trial %d: %d random bytes at %d", trial, boltRunBytes, off)
		}
		trialDir := t.TempDir()
		copyDB(t, src, trialDir, 0, "db", mangle)
		path := filepath.Join(trialDir, "db")
		fmt.Println(what) // the last line before a crash names the trial

		bad := false
		s, err := boltstore.Open(path)
		if corrupt(what, err) {
			openFailed++
			continue
		}
		for i := range boltKeys {
			_, err := s.Get(fmt.Appendf(nil, "k%d", i))
			bad = corrupt(what, err) || bad
		}
		bad = corrupt(what, s.Scan(nil, nil, func(k, v []byte) error { return nil })) || bad
		_ = s.Close() // may fail to checkpoint into a damaged file

		db, err := ratestore.Open(path, ratestore.Options{Now: newClock().Now})
		if corrupt(what, err) {
			readFailed++
			continue
		}
		l, err := db.Limiter("fault", faultBucket)
		require.NoError(t, err)
		gone := false
		for i := range boltKeys {
			r, err := l.Peek(ctx, fmt.Sprint("k", i))
			bad = corrupt(what, err) || bad
			if err == nil && r.Remaining != faultBucket.Burst-int64(i+1) {
				// Values carry checksums: a damaged one is an error, never
				// another value. A key whose entry was damaged (its
				// key bytes, or the page pointing at it) is not found.
				require.Equal(t, faultBucket.Burst, r.Remaining, "%s: key k%d read back a wrong state without an error", what, i)
				gone = true
			}
		}
		_ = db.Close()
		switch {
		case bad:
			readFailed++
		case gone:
			lost++
		default:
			clean++
		}
	}
	fmt.Printf("SUMMARY bolt damage: %d single-byte flips + %d runs of %d bytes in a %d-byte file: no crash, no wrong value read; %d refused at Open, %d reads with ErrCorrupt, %d with a key not found (its entry damaged) and no error, %d read every state intact; %d bbolt panics recovered\n",
		flips, runs, boltRunBytes, size, openFailed, readFailed, lost, clean, panics)
}

// TestFaultBoltLogFlips: 100 single-byte flips in a log of 500 acknowledged
// Sync records. No acknowledged record is lost without an error or a
// report (except a damaged last record, which is a torn append's twin).
func TestFaultBoltLogFlips(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(src, 0o700))
	cmd := exec.Command(os.Args[0], "-test.run=^TestFaultBoltChild$")
	cmd.Env = append(os.Environ(), faultModeEnv+"=wal-writer", faultDirEnv+"="+src, faultSeedEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line := make([]byte, 6)
	_, err = stdout.Read(line)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Kill()) // no Close: the log keeps its records
	_ = cmd.Wait()
	require.Equal(t, "ready\n", string(line))

	runFaultChild(t, "wal-flips", dir)
	runFaultChild(t, "wal-cuts", dir)
	runFaultChild(t, "foreign", dir)
}

// TestFaultBoltFileDamage: 300 single-byte flips and 50 32-byte random runs
// in a bbolt file never crash the process.
func TestFaultBoltFileDamage(t *testing.T) {
	runFaultChild(t, "bolt", t.TempDir())
}
