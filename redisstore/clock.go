package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// ClockSync is how often a DB with Options.RedisClock measures again the
// offset of its clock from Redis's.
const ClockSync = 30 * time.Second

// redisClock is Options.Now corrected by its offset from Redis's clock, as
// last measured: the time Redis's TIME gives, less the instant of Now half
// way through the round trip that asked. The offset is off by at most half
// that round trip, plus what the two clocks drifted apart since: a few
// hundred microseconds on loopback or a LAN, and quartz drifts by tens of
// microseconds a second at most, about a millisecond over ClockSync.
type redisClock struct {
	db       *DB
	local    func() time.Time
	offset   atomic.Int64 // ns
	measured atomic.Int64 // on the cache's clock, ns; -1 while measuring
}

// now is Redis's time by local's, measuring the offset again, off the
// caller's path, once it is ClockSync old.
func (c *redisClock) now() time.Time {
	if m := c.measured.Load(); m >= 0 && c.db.cache.clock() >= time.Duration(m)+ClockSync && c.measured.CompareAndSwap(m, -1) {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.db.opts.Timeout)
			defer cancel()
			if err := c.measure(ctx); err != nil {
				c.db.log.Warn("redisstore: measuring the offset from Redis's clock; keeping the last", "err", err)
				c.measured.Store(int64(c.db.cache.clock()))
			}
		}()
	}
	return c.local().Add(time.Duration(c.offset.Load()))
}

// measure sets the offset of local from Redis's clock.
func (c *redisClock) measure(ctx context.Context) error {
	sent := c.local()
	rt, err := c.db.client.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("redisstore: reading Redis's clock (TIME): %w", err)
	}
	got := c.local()
	mid := sent.Add(got.Sub(sent) / 2)
	c.offset.Store(int64(rt.Sub(mid)))
	c.measured.Store(int64(c.db.cache.clock()))
	return nil
}
