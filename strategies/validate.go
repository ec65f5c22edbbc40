package strategies

import (
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/text"
)

// MaxWindow is the longest window or period a configuration may span:
// a fixed, sliding or rolling window, or the time a GCRA burst takes to drain
// (Burst/Rate). 100 years is far beyond any rate limit, and bounding it
// keeps instant-plus-window sums of every realistic instant (and twice a
// window, which the sliding window needs) inside int64 nanoseconds.
const MaxWindow = 100 * 365 * 24 * time.Hour

// invalid returns an error about a configuration, matching ErrInvalid.
func invalid(k *kind, format string, args ...any) error {
	return fmt.Errorf("strategies: %v: %s: %w", k, fmt.Sprintf(format, args...), ErrInvalid)
}

// checkRate requires a positive finite rate.
func checkRate(k *kind, rate float64) error {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return invalid(k, "rate must be a positive finite number, got %v", rate)
	}
	return nil
}

// checkAtLeastOne requires a burst, capacity or limit of at least 1.
func checkAtLeastOne(k *kind, field string, v int64) error {
	if v < 1 {
		return invalid(k, "%s must be at least 1, got %d", field, v)
	}
	return nil
}

// checkWindow requires a window in (0, MaxWindow].
func checkWindow(k *kind, field string, d time.Duration) error {
	if d <= 0 || d > MaxWindow {
		return invalid(k, "%s must be in (0, %v], got %v", field, MaxWindow, d)
	}
	return nil
}

// maxQuotaName is the longest quota name.
const maxQuotaName = 32

// validQuotaName reports whether name is 1-32 of [A-Za-z0-9_.:@+-] (see
// text.Name).
func validQuotaName(name string) bool { return text.Name(name, maxQuotaName) }
