package rollingwindow

import (
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/errs"
)

// MaxBuckets is the most buckets a window may hold: Window/Bucket <= MaxBuckets.
// The package doc says why 65536.
const MaxBuckets = 1 << 16

var (
	// ErrInvalid is matched (errors.Is) by the errors of Config.Validate,
	// and so of New, Rebuild and Reconfigure, for a bad configuration.
	ErrInvalid = errs.ErrInvalid

	// ErrCorrupt is matched by the errors of Append and Rebuild for a
	// sequence of buckets that no State could have produced.
	ErrCorrupt = errs.ErrCorrupt
)

// Config is the shape of a window: Window long, counted in buckets of
// Bucket. Bucket must divide Window, into at most MaxBuckets buckets.
type Config struct {
	Window time.Duration
	Bucket time.Duration
}

// Validate reports, as an error matching ErrInvalid that names the field,
// a Bucket or Window that is not positive, a Window that is not a multiple
// of Bucket, or one that holds more than MaxBuckets buckets.
func (c Config) Validate() error {
	switch {
	case c.Bucket <= 0:
		return invalid("Bucket must be positive, got %v", c.Bucket)
	case c.Window <= 0:
		return invalid("Window must be positive, got %v", c.Window)
	case c.Window%c.Bucket != 0:
		return invalid("Window %v is not a multiple of Bucket %v", c.Window, c.Bucket)
	case c.Window/c.Bucket > MaxBuckets:
		return invalid("Window %v holds %d buckets of Bucket %v, more than MaxBuckets (%d)",
			c.Window, c.Window/c.Bucket, c.Bucket, MaxBuckets)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("rollingwindow: %s: %w", fmt.Sprintf(format, args...), ErrInvalid)
}

// Buckets returns Window/Bucket, the most buckets a State of c keeps, for a
// valid c.
func (c Config) Buckets() int {
	if c.Bucket <= 0 {
		return 0
	}
	return int(c.Window / c.Bucket)
}

// BucketStart returns the start of the bucket that holds the instant t:
// floor(t/Bucket)*Bucket. An instant before the first whole bucket of the
// int64 range, whose start would not fit, gets that first whole bucket.
// For a Bucket that is not positive it returns t.
func (c Config) BucketStart(t int64) int64 {
	b := int64(c.Bucket)
	if b <= 0 {
		return t
	}
	r := t % b
	if r < 0 {
		r += b // floor, not truncation: the remainder is in [0, b)
	}
	if t < math.MinInt64+r {
		return t + (b - r) // t - r would not fit
	}
	return t - r
}
