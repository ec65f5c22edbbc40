package main

import (
	"time"

	"github.com/ratestore/ratestore/migrate"
	"github.com/ratestore/ratestore/strategies"
)

// The JSON output of the commands, one object each; the json texts of the
// commands table document them.

// keyOut is a key in JSON output; see keyJSON.
type keyOut struct {
	ID                string      `json:"id"`
	Name              string      `json:"name"`
	Model             string      `json:"model"`
	TokenLimit        int64       `json:"token_limit"` // the limit of Windows[0], as before there were several
	Windows           []windowOut `json:"windows"`
	RequestsPerMinute int64       `json:"requests_per_minute"`
	MaxConcurrent     int         `json:"max_concurrent"`
	Models            []string    `json:"models"` // [] for any model
	ExpiresAt         *time.Time  `json:"expires_at"`
	CreatedAt         *time.Time  `json:"created_at"`
	LastUsed          *time.Time  `json:"last_used"`
	LifetimeTokens    int64       `json:"lifetime_tokens"`
	Disabled          bool        `json:"disabled"`
	Expired           bool        `json:"expired"`
	Status            string      `json:"status"`
}

// windowOut is a token window of a key's policy; durations are Go
// duration strings ("5h0m0s").
type windowOut struct {
	Window string `json:"window"`
	Bucket string `json:"bucket"`
	Limit  int64  `json:"limit"`
}

// createOut is the output of keys create.
type createOut struct {
	Key    keyOut `json:"key"`
	Secret string `json:"secret"`
}

// keysOut is the output of keys list.
type keysOut struct {
	Keys []keyOut `json:"keys"`
}

// keyResultOut is the output of keys show and of the commands that change
// a key.
type keyResultOut struct {
	Key   keyOut   `json:"key"`
	Usage usageOut `json:"usage"`
}

// deleteOut is the output of keys delete.
type deleteOut struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// usageOut is the output of usage; see usageJSON. Its top-level figures
// are those of the binding window (keystore.Usage.Bind).
type usageOut struct {
	ID                string           `json:"id"`
	Window            string           `json:"window"`
	Used              int64            `json:"used"`
	Limit             int64            `json:"limit"`
	Remaining         int64            `json:"remaining"`
	ResetAfterSeconds int64            `json:"reset_after_seconds"`
	WindowEnd         *time.Time       `json:"window_end"`
	Windows           []windowUsageOut `json:"windows"`
	RequestsPerMinute int64            `json:"requests_per_minute"`
	MaxConcurrent     int              `json:"max_concurrent"`
	Models            []string         `json:"models"`
}

// windowUsageOut is one token window of usageOut: its window and bucket
// are Go duration strings, its wait until nothing is in use whole seconds
// (rounded up), as in the admin API's keys.
type windowUsageOut struct {
	Window            string     `json:"window"`
	Bucket            string     `json:"bucket"`
	Used              int64      `json:"used"`
	Limit             int64      `json:"limit"`
	Remaining         int64      `json:"remaining"`
	ResetAfterSeconds int64      `json:"reset_after_seconds"`
	WindowEnd         *time.Time `json:"window_end"`
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
