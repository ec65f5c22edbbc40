package main

import (
	"os"
	"testing"

	"github.com/ratestore/ratestore/internal/storage/check"
)

// TestMain lets the test binary stand for the ratestore program where the
// check command runs itself as a child process (check.PagesEnv), as main does.
func TestMain(m *testing.M) {
	if path := os.Getenv(check.PagesEnv); path != "" {
		os.Exit(check.PagesChild(path))
	}
	os.Exit(m.Run())
}
