package boltstore

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/storage"
)

// The child of TestKilledDuringCheckpoints: its database and the first
// value it writes.
const (
	killPathEnv = "RATESTORE_KILL_CHILD_PATH"
	killBaseEnv = "RATESTORE_KILL_CHILD_BASE"
)

// TestKilledDuringCheckpoints kills (SIGKILL) a child process that commits
// and syncs without pause, with thresholds so low that background
// checkpoints and rewrites of the log run all the time, at a random moment,
// over and over on the same files. After each kill, every key holds the
// last value the child acknowledged (printed once Sync returned) or a later
// one it wrote.
func TestKilledDuringCheckpoints(t *testing.T) {
	if os.Getenv(killPathEnv) != "" {
		killChild(t)
		return
	}
	path := dbPath(t)
	acked := map[string]uint64{}
	for round := range 8 {
		base := uint64(round+1) << 32
		out := runUntilKilled(t, path, base, 200+rand.IntN(3000))
		for key, v := range out {
			acked[key] = max(acked[key], v)
		}
		s, err := Open(path)
		require.NoError(t, err, "round %d", round)
		for key, want := range acked {
			got, err := s.Get([]byte(key))
			require.NoError(t, err)
			n, err := strconv.ParseUint(string(got), 10, 64)
			require.NoError(t, err, "round %d: key %s holds %q", round, key, got)
			require.GreaterOrEqual(t, n, want, "round %d: key %s lost an acknowledged write", round, key)
			require.Less(t, n, base+1<<32, "round %d: key %s", round, key)
		}
		require.NoError(t, s.Close())
	}
}

// runUntilKilled starts the child and kills it after it has acknowledged
// acks writes; it returns the newest value acknowledged for each key.
func runUntilKilled(t *testing.T, path string, base uint64, acks int) map[string]uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledDuringCheckpoints$")
	cmd.Env = append(os.Environ(), killPathEnv+"="+path, killBaseEnv+"="+strconv.FormatUint(base, 10))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	out := map[string]uint64{}
	lines := bufio.NewScanner(stdout)
	for n := 0; lines.Scan(); n++ {
		if n == acks {
			require.NoError(t, cmd.Process.Kill())
		}
		key, v, ok := strings.Cut(lines.Text(), " ")
		if !ok {
			continue // the testing package's own lines
		}
		val, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err)
		out[key] = max(out[key], val)
	}
	err = cmd.Wait()
	require.Error(t, err, "the child ran until killed")
	require.GreaterOrEqual(t, len(out), 1)
	return out
}

// killChild writes batches of new values to random keys and prints
// "key value" for each once its Sync has returned, until it is killed.
func killChild(t *testing.T) {
	s, err := Open(os.Getenv(killPathEnv))
	require.NoError(t, err)
	s.ckptKeys, s.ckptPerPage = 50, 0
	v, err := strconv.ParseUint(os.Getenv(killBaseEnv), 10, 64)
	require.NoError(t, err)
	var line []byte
	for {
		ops := make([]storage.Op, 20)
		for i := range ops {
			v++
			ops[i] = storage.Op{Key: fmt.Appendf(nil, "k%03d", rand.IntN(300)), Value: strconv.AppendUint(nil, v, 10)}
		}
		require.NoError(t, s.Commit(ops))
		require.NoError(t, s.Sync())
		line = line[:0]
		for _, op := range ops {
			line = fmt.Appendf(line, "%s %s\n", op.Key, op.Value)
		}
		_, err := os.Stdout.Write(line)
		require.NoError(t, err)
	}
}
