package main

import (
	"github.com/ratestore/ratestore/migrate"
	"github.com/ratestore/ratestore/strategies"
)

// The JSON output of the commands, one object each; the json texts of the
// commands table document them. A key is always admin.Key, built by
// admin.NewKey, as the admin API answers it: keys show, usage and the
// commands that change a key print one; keys create prints admin.Created,
// keys list admin.Keys.

// deleteOut is the output of keys delete.
type deleteOut struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// importOut is the output of import: the report, with what was asked.
type importOut struct {
	File    string `json:"file"`
	DryRun  bool   `json:"dry_run"`
	Refused bool   `json:"refused"`
	migrate.Report
}

// migrateOut is the output of migrate.
type migrateOut struct {
	DryRun   bool `json:"dry_run"`
	Pending  int  `json:"pending"`
	Migrated int  `json:"migrated"`
}

// copyOut is the output of copy.
type copyOut struct {
	From        string `json:"from"`
	FromBackend string `json:"from_backend"`
	To          string `json:"to"`
	ToBackend   string `json:"to_backend"`
	Records     int    `json:"records"`
	Bytes       int64  `json:"bytes"`
}

// stateOut is the output of inspect.
type stateOut struct {
	Limiter string                  `json:"limiter"`
	Key     string                  `json:"key"`
	Found   bool                    `json:"found"`
	Raw     string                  `json:"raw"`
	RawHex  string                  `json:"raw_hex"`
	State   *strategies.Description `json:"state"`
	Error   string                  `json:"error,omitempty"`
}

// versionOut is the output of version.
type versionOut struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}
