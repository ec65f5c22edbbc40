// Package childtest runs a test of the running test binary in a child
// process, for fault tests: a panic, a fault or a signal in the code under
// test then fails the parent test rather than ending the whole run.
//
// A fault test is a pair: the parent calls Run, and the child, a test of
// its own that skips unless the parent's environment variables are set,
// does the damage and the checks. Its lines that contain "SUMMARY" are
// logged by the parent.
package childtest

import (
	"bytes"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// ScaleEnv scales the trial counts of the fault tests: unset, each test's
// CI share; 1, the counts of the targets.
const ScaleEnv = "RATESTORE_FAULT_SCALE"

// Run runs the test named test (a top-level test of this binary) in a
// child process with env ("NAME=value") added to the environment, fails t
// unless the child's test passed, logs the child's SUMMARY lines, and
// returns its output.
func Run(t testing.TB, test string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+test)) {
		t.Fatalf("child %s (%s) failed: %v (%s)\n%s", test, strings.Join(env, " "), err, cmd.ProcessState, out)
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "SUMMARY") {
			t.Log(strings.TrimSpace(line))
		}
	}
	return string(out)
}

// Seed returns the seed for a child's random damage: the value of the
// environment variable env when it is set (to replay a failure, whose
// message names it), else a random one.
func Seed(env string) string {
	if s := os.Getenv(env); s != "" {
		return s
	}
	return strconv.FormatUint(mrand.Uint64(), 10)
}

// Rand returns the child's generator, seeded by its parent through env.
func Rand(t testing.TB, env string) *mrand.Rand {
	t.Helper()
	seed, err := strconv.ParseUint(os.Getenv(env), 10, 64)
	if err != nil {
		t.Fatalf("childtest: $%s: %v", env, err)
	}
	return mrand.New(mrand.NewPCG(seed, seed>>1|1))
}

// Scale returns the share of its trials a fault test runs: $ScaleEnv when
// set, else def.
func Scale(t testing.TB, def float64) float64 {
	t.Helper()
	s := os.Getenv(ScaleEnv)
	if s == "" {
		return def
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("childtest: $%s=%q: want a number", ScaleEnv, s)
	}
	return f
}
