package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ratestore/ratestore/strategies"
)

// spec is a strategy as an HTTP request gives it, by its "type" and the
// fields of that type, in the JSON names of the strategies' fields;
// durations are Go duration strings ("1m30s"):
//
//	{"type": "gcra", "rate": 10, "burst": 20}
//	{"type": "token_bucket", "rate": 10, "burst": 20}
//	{"type": "leaky_bucket", "rate": 10, "capacity": 20}
//	{"type": "fixed_window", "quotas": [{"name": "minute", "limit": 100, "window": "1m"}, ...]}
//	{"type": "sliding_window", "limit": 100, "window": "1m"}
//	{"type": "sliding_log", "limit": 100, "window": "1m"}
//	{"type": "rolling_window", "limit": 100000, "window": "5h", "bucket": "5m"}
//	{"type": "composite", "primary": {...}, "secondary": {...}}
type spec struct {
	Type      string      `json:"type"`
	Rate      float64     `json:"rate,omitempty"`
	Burst     int64       `json:"burst,omitempty"`
	Capacity  int64       `json:"capacity,omitempty"`
	Limit     int64       `json:"limit,omitempty"`
	Window    duration    `json:"window,omitempty"`
	Bucket    duration    `json:"bucket,omitempty"`
	Quotas    []quotaSpec `json:"quotas,omitempty"`
	Primary   *spec       `json:"primary,omitempty"`
	Secondary *spec       `json:"secondary,omitempty"`
}

type quotaSpec struct {
	Name   string   `json:"name"`
	Limit  int64    `json:"limit"`
	Window duration `json:"window"`
}

// duration is a time.Duration written as a Go duration string.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"1m30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// strategy returns the configuration sp describes. Validate is the
// caller's: DB.Limiter runs it.
func (sp *spec) strategy() (strategies.Strategy, error) {
	switch sp.Type {
	case "gcra":
		return strategies.GCRA{Rate: sp.Rate, Burst: sp.Burst}, nil
	case "token_bucket":
		return strategies.TokenBucket{Rate: sp.Rate, Burst: sp.Burst}, nil
	case "leaky_bucket":
		return strategies.LeakyBucket{Rate: sp.Rate, Capacity: sp.Capacity}, nil
	case "fixed_window":
		qs := make([]strategies.Quota, len(sp.Quotas))
		for i, q := range sp.Quotas {
			qs[i] = strategies.Quota{Name: q.Name, Limit: q.Limit, Window: time.Duration(q.Window)}
		}
		return strategies.FixedWindow{Quotas: qs}, nil
	case "sliding_window":
		return strategies.SlidingWindow{Limit: sp.Limit, Window: time.Duration(sp.Window)}, nil
	case "sliding_log":
		return strategies.SlidingLog{Limit: sp.Limit, Window: time.Duration(sp.Window)}, nil
	case "rolling_window":
		return strategies.RollingWindow{Limit: sp.Limit, Window: time.Duration(sp.Window), Bucket: time.Duration(sp.Bucket)}, nil
	case "composite":
		if sp.Primary == nil || sp.Secondary == nil {
			return nil, fmt.Errorf("composite: want a primary and a secondary")
		}
		a, err := sp.Primary.strategy()
		if err != nil {
			return nil, fmt.Errorf("composite: primary: %w", err)
		}
		b, err := sp.Secondary.strategy()
		if err != nil {
			return nil, fmt.Errorf("composite: secondary: %w", err)
		}
		return strategies.Composite{Primary: a, Secondary: b}, nil
	}
	return nil, fmt.Errorf("unknown type %q: want gcra, token_bucket, leaky_bucket, fixed_window, sliding_window, sliding_log, rolling_window or composite", sp.Type)
}
