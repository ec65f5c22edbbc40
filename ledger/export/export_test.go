package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// exportLogs is a slog.Handler that keeps the messages of the records
// it is given, for the tests to count.
type exportLogs struct {
	mu   sync.Mutex
	msgs []string // "LEVEL message"
}

func (h *exportLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *exportLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *exportLogs) WithGroup(string) slog.Handler            { return h }

func (h *exportLogs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	return nil
}

// count returns how many records had the level and message.
func (h *exportLogs) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if m == level.String()+" "+msg {
			n++
		}
	}
	return n
}

// exportEntry returns the i-th entry of a test, its fields varied by i,
// its time and latency whole milliseconds as the line keeps them.
func exportEntry(i int) ledger.Entry {
	e := ledger.Entry{
		Time:      time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC).Add(time.Duration(i) * 1001 * time.Millisecond),
		RequestID: fmt.Sprintf("req-%06d", i),
		Key:       "key-" + strconv.Itoa(i%7),
		Team:      "team-" + strconv.Itoa(i%3),
		Model:     "model-" + strings.Repeat("x", i%40),
		Route:     "/v1/chat/completions",
		Tokens:    ledger.Tokens{Input: int64(i), Output: 2 * int64(i), CacheRead: 3, CacheWrite: 4, Reasoning: int64(i % 5)},
		Cost:      pricing.USD(i)*pricing.Micro + 1, // down to the nano-dollar
		Status:    200,
		Latency:   time.Duration(i%1000) * time.Millisecond,
		Estimated: i%2 == 1,
	}
	if i%3 == 0 {
		e.Team = "" // absent from the line
	}
	if i%2 == 0 {
		e.Upstream = "azure-east" // absent from the others
	}
	return e
}

// exportLine returns e's line as the brief defines it.
func exportLine(t *testing.T, e ledger.Entry) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// closeExport closes x and fails the test on an error.
func closeExport(t *testing.T, x *File) {
	t.Helper()
	if err := x.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestExportRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.jsonl")
	x, err := Open(path, 0, 0, slog.New(&exportLogs{}))
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Entry{exportEntry(0), exportEntry(1), exportEntry(2), exportEntry(999)}
	want[1].Cost = 123*pricing.Dollar + 456789123 // $123.456789123
	want[2].Model, want[2].Key = `odd "model" <&> é`, "k\n1"
	for _, e := range want {
		x.Write(e)
	}
	closeExport(t, x)
	if s := x.Stats(); s != (Stats{Written: int64(len(want))}) {
		t.Errorf("Stats = %+v, want %d written and nothing else", s, len(want))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) != len(want)+1 || len(lines[len(want)]) != 0 {
		t.Fatalf("file holds %d lines, want %d ending with \\n:\n%s", len(lines)-1, len(want), data)
	}
	for i, e := range want {
		checkExportLine(t, lines[i], e)
	}
}

// checkExportLine checks that line is e's, and that it reads back as e.
func checkExportLine(t *testing.T, line []byte, e ledger.Entry) {
	t.Helper()
	if want := exportLine(t, e); !bytes.Equal(line, want) {
		t.Errorf("line\n%s\nwant\n%s", line, want)
	}
	var got ledger.Entry
	if err := got.UnmarshalJSON(line); err != nil {
		t.Fatalf("UnmarshalJSON(%s): %v", line, err)
	}
	if !got.Time.Equal(e.Time) {
		t.Errorf("%s: time %v, want %v", e.RequestID, got.Time, e.Time)
	}
	got.Time = e.Time
	if got != e {
		t.Errorf("read back\n%+v\nwant\n%+v", got, e)
	}
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["team"]; ok != (e.Team != "") {
		t.Errorf("%s: team present %v, want %v", e.RequestID, ok, e.Team != "")
	}
	if _, ok := fields["upstream"]; ok != (e.Upstream != "") {
		t.Errorf("%s: upstream present %v, want %v", e.RequestID, ok, e.Upstream != "")
	}
}

// splitExport returns the files that lines make when a file takes lines
// while they fit in maxBytes, a line alone when it does not.
func splitExport(lines [][]byte, maxBytes int) [][]byte {
	var files [][]byte
	var cur []byte
	for _, l := range lines {
		if len(cur) > 0 && len(cur)+len(l) > maxBytes {
			files, cur = append(files, cur), nil
		}
		cur = append(cur, l...)
	}
	return append(files, cur)
}

func TestExportRotation(t *testing.T) {
	const n, maxBytes = 120, 1000
	for _, keep := range []int{2, 60} { // 60: all kept
		t.Run("keep="+strconv.Itoa(keep), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spend.jsonl")
			x, err := Open(path, maxBytes, keep, slog.New(&exportLogs{}))
			if err != nil {
				t.Fatal(err)
			}
			var lines [][]byte
			for i := range n {
				e := exportEntry(i)
				if i%100 == 0 || i == 101 { // the first line of the first file too
					e.Route = strings.Repeat("r", 2*maxBytes) // alone in its file
				}
				x.Write(e)
				lines = append(lines, exportLine(t, e))
			}
			closeExport(t, x)
			want := splitExport(lines, maxBytes)
			if keep == 2 && len(want) <= keep+1 {
				t.Fatalf("only %d files: the test rotates too little to remove any", len(want))
			}
			s := x.Stats()
			if s != (Stats{Written: n, Rotations: int64(len(want) - 1)}) {
				t.Errorf("Stats = %+v, want %d written, %d rotations", s, n, len(want)-1)
			}
			checkExportFiles(t, path, keep, want)
		})
	}
}

// checkExportFiles checks that path, path.1, ... path.keep hold the
// newest of the files want (oldest first), and that path.keep+1 does not
// exist.
func checkExportFiles(t *testing.T, path string, keep int, want [][]byte) {
	t.Helper()
	kept := min(keep+1, len(want))
	for i := range kept {
		name := path
		if i > 0 {
			name += "." + strconv.Itoa(i)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[len(want)-1-i]; !bytes.Equal(got, w) {
			t.Errorf("%s holds\n%s\nwant\n%s", name, got, w)
		}
		if len(got) > 1000 && bytes.Count(got, []byte("\n")) != 1 {
			t.Errorf("%s: %d bytes in %d lines", name, len(got), bytes.Count(got, []byte("\n")))
		}
	}
	if _, err := os.Stat(path + "." + strconv.Itoa(kept)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.%d: %v, want it removed", path, kept, err)
	}
}

// writeConcurrently has writers goroutines Write n entries to x in all,
// and returns how long that took. It fails the test if they take more
// than 5 s: with the writer stalled, that is a Write that blocked.
func writeConcurrently(t *testing.T, x *File, writers, n int) time.Duration {
	t.Helper()
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for w := range writers {
			e := exportEntry(w)
			wg.Go(func() {
				for range n / writers {
					x.Write(e)
				}
			})
		}
		wg.Wait()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Write blocked with the writer stalled")
	}
	return time.Since(start)
}

func TestExportNeverBlocks(t *testing.T) {
	const writers, n = 4, 100_000
	logs := &exportLogs{}
	path := filepath.Join(t.TempDir(), "spend.jsonl")
	x, err := openFile(path, 0, 0, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	x.hold = make(chan struct{}) // the writer is stalled until closed
	go x.run()

	elapsed := writeConcurrently(t, x, writers, n)
	if s := x.Stats(); s != (Stats{Dropped: n - queueLen}) {
		t.Errorf("Stats while stalled = %+v, want %d dropped", s, n-queueLen)
	}
	drops := logs.count(slog.LevelError, "ledger: export: entry dropped")
	if drops < 1 || drops > 1+int(elapsed/time.Second) {
		t.Errorf("%d drop logs in %v, want 1 a second at most", drops, elapsed)
	}

	// Writing the 64Ki queued lines takes seconds under the race
	// detector: Close is given less, which also checks that a Close cut
	// short loses no entry uncounted.
	close(x.hold)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := x.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v", err)
	}
	closeExport(t, x) // waits for the writer
	s := x.Stats()
	if s.Written+s.Dropped != n || s.Dropped < n-queueLen || s.Errors != 0 {
		t.Errorf("Stats = %+v, want %d written or dropped, at least %d dropped", s, n, n-queueLen)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(data, []byte("\n")); int64(got) != s.Written {
		t.Errorf("%d lines, want the %d written", got, s.Written)
	}
	t.Logf("%d written by Close", s.Written)
}

func TestExportCloseCanceled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.jsonl")
	x, err := openFile(path, 0, 0, slog.New(&exportLogs{}))
	if err != nil {
		t.Fatal(err)
	}
	x.hold = make(chan struct{})
	go x.run()
	for i := range 10 {
		x.Write(exportEntry(i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close(canceled) = %v, want context.Canceled", err)
	}
	close(x.hold)
	closeExport(t, x) // waits for the writer
	x.Write(exportEntry(10))
	if s := x.Stats(); s != (Stats{Dropped: 11}) {
		t.Errorf("Stats = %+v, want the 10 queued and the 1 after Close dropped", s)
	}
}

// TestExportCutLine: a file left ending inside a line gets a "\n" before
// the first new line, so that only the cut line is unreadable.
func TestExportCutLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.jsonl")
	if err := os.WriteFile(path, []byte(`{"time":"2025-`), 0o600); err != nil {
		t.Fatal(err)
	}
	x, err := Open(path, 0, 0, slog.New(&exportLogs{}))
	if err != nil {
		t.Fatal(err)
	}
	x.Write(exportEntry(1))
	closeExport(t, x)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte("{\"time\":\"2025-\n"), exportLine(t, exportEntry(1))...)
	if !bytes.Equal(data, want) {
		t.Errorf("file holds\n%s\nwant\n%s", data, want)
	}
}

// TestExportDiskFull: on a full disk (/dev/full) every write fails; the
// failures are counted and logged, and the writer goes on.
func TestExportDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	logs := &exportLogs{}
	x, err := Open("/dev/full", 0, 0, slog.New(logs))
	if err != nil {
		t.Skip("cannot open /dev/full:", err)
	}
	for i := range 100 {
		x.Write(exportEntry(i))
	}
	_ = x.Close(context.Background()) // the final flush has nothing left to fail on
	s := x.Stats()
	if s.Written != 0 || s.Dropped != 100 || s.Errors < 1 {
		t.Errorf("Stats = %+v, want 100 dropped by errors", s)
	}
	if logs.count(slog.LevelError, "ledger: export failed") < 1 {
		t.Error("the write errors were not logged")
	}
}

func TestExportBadArguments(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		path     string
		maxBytes int64
		keep     int
		names    string
	}{
		{"", 0, 0, "path"},
		{filepath.Join(dir, "a"), -1, 0, "maxBytes"},
		{filepath.Join(dir, "b"), 0, -1, "keep"},
	} {
		x, err := Open(c.path, c.maxBytes, c.keep, nil)
		if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("Open(%q, %d, %d) = %v, %v; want an error naming %s, matching ledger.ErrInvalid",
				c.path, c.maxBytes, c.keep, x, err, c.names)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a rejected export created its file: %v", err)
	}
	_, err := Open(filepath.Join(dir, "missing", "spend.jsonl"), 0, 0, nil)
	if err == nil || errors.Is(err, ledger.ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open in a missing directory = %v, want an error matching os.ErrNotExist", err)
	}
}
