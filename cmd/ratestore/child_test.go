package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand for the ratestore program where the
// check command runs itself as a child process (txCheck), as main does.
func TestMain(m *testing.M) {
	if path := os.Getenv(checkPagesEnv); path != "" {
		os.Exit(checkPagesChild(path))
	}
	os.Exit(m.Run())
}
