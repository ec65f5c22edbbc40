package admin

import (
	"encoding/json"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Key is the one JSON shape of a key with its usage: the admin API
// answers it (KEY in the package documentation), and the command line's
// --json output prints it, both built by NewKey. It never holds the
// secret. It has one time format for each kind of time: instants are RFC
// 3339 in UTC, null when unset; lengths of windows and buckets are Go
// durations, as a request gives them ("5h"); waits counted down from now
// are whole seconds, rounded up, in fields named _seconds, as Retry-After
// counts them.
type Key struct {
	ID                string       `json:"id"`
	Name              string       `json:"name"`
	Team              string       `json:"team,omitempty"` // its team's id (Team); left out for none
	Model             string       `json:"model"`          // informational (legacy keys); Models restricts
	Models            []string     `json:"models"`         // [] for any model
	Windows           []Window     `json:"windows"`
	Binding           int          `json:"binding"` // the index in Windows of the binding window (keystore.Usage.Bind)
	Budgets           []Budget     `json:"budgets"` // [] for none
	LifetimeUSD       pricing.USD  `json:"lifetime_usd"`
	RequestsPerMinute int64        `json:"requests_per_minute"`    // 0: no limit
	MaxConcurrent     int          `json:"max_concurrent"`         // 0: no limit
	ModelLimits       []ModelLimit `json:"model_limits,omitempty"` // left out for none
	EndUsers          *EndUsers    `json:"end_users,omitempty"`    // left out for none
	// ModelUsage is the usage of each model limit, in their order: in the
	// answers about one key (GET /admin/keys/{id}), not in pages of keys.
	ModelUsage     []ModelUsage `json:"model_usage,omitempty"`
	ExpiresAt      *time.Time   `json:"expires_at"` // null: never
	Disabled       bool         `json:"disabled"`
	LifetimeTokens int64        `json:"lifetime_tokens"`
	LastUsed       *time.Time   `json:"last_used"`  // null: never
	CreatedAt      *time.Time   `json:"created_at"` // null: unknown (an imported key)
	InFlight       int          `json:"in_flight"`  // requests admitted and not finished
	// ReservedTokens are the tokens this process's requests of the key in
	// flight hold (keystore.Store.Reserved), counted in every window's used
	// until they finish: the part of used not yet charged. 0 where no
	// gateway serves the key (the command line on a closed database), and
	// other gateways' are not counted.
	ReservedTokens int64 `json:"reserved_tokens"`
	// PreviousSecretExpiresAt is when the secret a rotation replaced stops
	// working; null when there is none (keystore.Key).
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
}

// Window is one token window of an Key and its usage. Used
// includes the tokens reserved by requests still in flight
// (keystore.WindowUsage), so that it is what the next request is
// admitted against.
type Window struct {
	Limit             int64      `json:"limit"`
	Window            string     `json:"window"` // a Go duration, as a request gives it: "5h0m0s"
	Bucket            string     `json:"bucket"` // the same: "5m0s"
	Used              int64      `json:"used"`
	Remaining         int64      `json:"remaining"`
	ResetAfterSeconds int64      `json:"reset_after_seconds"` // until nothing is in use, rounded up
	WindowEnd         *time.Time `json:"window_end"`          // when Used next goes down; null when it is 0
}

// Budget is one budget of an Key and what the key has spent in
// it: a rolling Window, or a calendar Period in Timezone. Spent includes
// the worst-case cost reserved by requests still in flight.
type Budget struct {
	LimitUSD     pricing.USD `json:"limit_usd"`
	Window       string      `json:"window,omitempty"`   // a Go duration: "24h0m0s"
	Period       string      `json:"period,omitempty"`   // "day", "week" or "month"
	Timezone     string      `json:"timezone,omitempty"` // the period's IANA zone: "UTC", "Europe/Paris"
	SpentUSD     pricing.USD `json:"spent_usd"`
	RemainingUSD pricing.USD `json:"remaining_usd"`
	ResetsAt     *time.Time  `json:"resets_at"` // when Spent next goes down; null when nothing is spent
}

// BudgetRequest is a budget of an KeyRequest: a limit in USD
// over a rolling window ("24h"), or per calendar period ("day", "week",
// "month") in an IANA time zone (default UTC).
type BudgetRequest struct {
	LimitUSD pricing.USD `json:"limit_usd"`
	Window   string      `json:"window,omitempty"`
	Period   string      `json:"period,omitempty"`
	Timezone string      `json:"timezone,omitempty"`
}

// KeyRequest is the body of POST /admin/keys and PATCH
// /admin/keys/{id}, for clients: a field left out is not set (POST: the
// key has none). The gateway reads it field by field, so that an error
// names the field (windows[1].window).
type KeyRequest struct {
	Name *string `json:"name,omitempty"`
	// Team is the id of the key's team (POST /admin/teams); "" takes the
	// key out of its team.
	Team              *string          `json:"team,omitempty"`
	Model             *string          `json:"model,omitempty"`
	Models            *[]string        `json:"models,omitempty"` // []: any model
	Windows           *[]WindowRequest `json:"windows,omitempty"`
	RequestsPerMinute *int64           `json:"requests_per_minute,omitempty"`
	MaxConcurrent     *int             `json:"max_concurrent,omitempty"`
	Budgets           *[]BudgetRequest `json:"budgets,omitempty"`      // []: none
	ModelLimits       *[]ModelLimit    `json:"model_limits,omitempty"` // []: none
	// EndUsers replaces the end users' limits; &EndUsers{}: none.
	EndUsers *EndUsers `json:"end_users,omitempty"`
	// ExpiresAt is an RFC 3339 instant as a JSON string, or null (or "")
	// for never; left out (nil), the expiry is not changed.
	ExpiresAt json.RawMessage `json:"expires_at,omitempty"`
	Disabled  *bool           `json:"disabled,omitempty"`
}

// WindowRequest is a token window of an KeyRequest. Bucket may
// be left out: the window's length / 60, rounded to a divisor.
type WindowRequest struct {
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
	Bucket string `json:"bucket,omitempty"`
}

// Created is the answer to POST /admin/keys and POST
// /admin/keys/{id}/rotate: the only ones that hold the key's secret.
type Created struct {
	Key    Key    `json:"key"`
	Secret string `json:"secret"`
}

// RotateRequest is the body of POST /admin/keys/{id}/rotate: how
// long the secret it replaces keeps working, a Go duration ("24h") of at
// most keystore.MaxGrace; left out (or no body), it stops at once.
type RotateRequest struct {
	Grace string `json:"grace,omitempty"`
}

// Keys is the answer to GET /admin/keys: a page of keys, and the cursor
// of the next one, left out on the last.
type Keys struct {
	Keys       []Key  `json:"keys"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Team is the one JSON shape of a team with its usage (TEAM in the
// package documentation), built by NewTeam: its policy, as an
// Key's, with the usage of all its keys together, and the ids of its
// keys. The command line's --json output prints it too.
type Team struct {
	ID                string       `json:"id"`
	Name              string       `json:"name"`
	Models            []string     `json:"models"` // [] for any model
	Windows           []Window     `json:"windows"`
	Binding           int          `json:"binding"`                // the index in Windows of the binding window (keystore.Usage.Bind)
	Budgets           []Budget     `json:"budgets"`                // [] for none
	RequestsPerMinute int64        `json:"requests_per_minute"`    // 0: no limit
	MaxConcurrent     int          `json:"max_concurrent"`         // 0: no limit
	ModelLimits       []ModelLimit `json:"model_limits,omitempty"` // left out for none
	EndUsers          *EndUsers    `json:"end_users,omitempty"`    // left out for none
	InFlight          int          `json:"in_flight"`              // requests of its keys admitted and not finished
	CreatedAt         *time.Time   `json:"created_at"`
	KeyCount          int          `json:"key_count"` // how many keys belong to it (GET /admin/keys?team=ID lists them)
}

// Teams is the answer to GET /admin/teams: a page of teams, and the
// cursor of the next one, left out on the last.
type Teams struct {
	Teams      []Team `json:"teams"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// TeamRequest is the body of POST /admin/teams and PATCH
// /admin/teams/{id}, for clients: a field left out is not set (POST: the
// team has none), as in an KeyRequest.
type TeamRequest struct {
	Name              *string          `json:"name,omitempty"`
	Models            *[]string        `json:"models,omitempty"` // []: any model
	Windows           *[]WindowRequest `json:"windows,omitempty"`
	RequestsPerMinute *int64           `json:"requests_per_minute,omitempty"`
	MaxConcurrent     *int             `json:"max_concurrent,omitempty"`
	Budgets           *[]BudgetRequest `json:"budgets,omitempty"`      // []: none
	ModelLimits       *[]ModelLimit    `json:"model_limits,omitempty"` // []: none
	EndUsers          *EndUsers        `json:"end_users,omitempty"`    // &EndUsers{}: none
}

// Live is the answer to GET /admin/live: the gateway's traffic over the
// last seconds, for the console's live page.
type Live struct {
	Time              time.Time `json:"time"`
	RequestsPerSecond float64   `json:"requests_per_second"` // requests ended, refused ones too, not the admin API's
	TokensPerSecond   float64   `json:"tokens_per_second"`   // tokens charged to keys
	InFlight          int64     `json:"in_flight"`           // requests begun and not ended, the admin API's left out
}

// Prices is the answer to POST /admin/prices/reload: how many models the
// table now prices.
type Prices struct {
	Models int `json:"models"`
}
