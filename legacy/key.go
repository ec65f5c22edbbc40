package legacy

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// Key is one entry of a legacy key file: as Parse reads it, and as
// keystore.Store.Import takes it (keystore.Imported). Times are in UTC and
// zero when absent. Secret is the plaintext secret, which the key store
// keeps working and stores only as its hash: it is never printed, logged
// or marshalled (String, Format and LogValue redact it, and its JSON tag
// leaves it out).
type Key struct {
	Secret         string `json:"-"` // "key"
	Name           string // "name"
	Model          string // "model"
	TokenLimit     int64  // "token_limit_per_5h", > 0
	ExpiresAt      time.Time
	CreatedAt      time.Time
	LastUsed       time.Time
	LifetimeTokens int64 // "total_lifetime_tokens", >= 0, kept as it is
	Windows        []Window
}

// Window is one legacy usage window: Tokens (>= 0) used in the fixed
// window that starts at Start.
type Window struct {
	Start  time.Time
	Tokens int64
}

const redacted = "[redacted]"

// String describes the key with its secret redacted.
func (k Key) String() string {
	return "legacy.Key{Secret:" + redacted +
		" Name:" + strconv.Quote(k.Name) +
		" Model:" + strconv.Quote(k.Model) +
		" TokenLimit:" + strconv.FormatInt(k.TokenLimit, 10) +
		" ExpiresAt:" + timeString(k.ExpiresAt) +
		" CreatedAt:" + timeString(k.CreatedAt) +
		" LastUsed:" + timeString(k.LastUsed) +
		" LifetimeTokens:" + strconv.FormatInt(k.LifetimeTokens, 10) +
		" Windows:" + strconv.Itoa(len(k.Windows)) + "}"
}

// Format prints String for every verb (%v, %+v, %#v, %s, %q, %x, ...), so
// that no verb reaches the secret through reflection.
func (k Key) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// LogValue logs the key with its secret redacted.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("secret", redacted),
		slog.String("name", k.Name),
		slog.String("model", k.Model),
		slog.Int64("token_limit", k.TokenLimit),
		slog.Time("expires_at", k.ExpiresAt),
		slog.Time("created_at", k.CreatedAt),
		slog.Time("last_used", k.LastUsed),
		slog.Int64("lifetime_tokens", k.LifetimeTokens),
		slog.Int("windows", len(k.Windows)),
	)
}

// Issue returns an issue of a report about k, the entry at index of
// "keys", naming it as Parse names the entries it keeps.
func (k Key) Issue(index int, field, reason string) Issue {
	return Issue{Index: index, Name: clip(k.Name), Field: field, Reason: reason}
}

func timeString(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

// diff names the first field (by its legacy name) in which k and o differ,
// "" when they hold the same data; instants are compared, not their spelling.
func (k Key) diff(o Key) string {
	switch {
	case k.Secret != o.Secret:
		return "key"
	case k.Name != o.Name:
		return "name"
	case k.Model != o.Model:
		return "model"
	case k.TokenLimit != o.TokenLimit:
		return "token_limit_per_5h"
	case !k.ExpiresAt.Equal(o.ExpiresAt):
		return "expiry_date"
	case !k.CreatedAt.Equal(o.CreatedAt):
		return "created_at"
	case !k.LastUsed.Equal(o.LastUsed):
		return "last_used"
	case k.LifetimeTokens != o.LifetimeTokens:
		return "total_lifetime_tokens"
	case len(k.Windows) != len(o.Windows):
		return "usage_windows"
	}
	for i, w := range k.Windows {
		if !w.Start.Equal(o.Windows[i].Start) || w.Tokens != o.Windows[i].Tokens {
			return "usage_windows[" + strconv.Itoa(i) + "]"
		}
	}
	return ""
}
