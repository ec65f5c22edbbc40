// Package redisstore keeps ratestore's limiter states in Redis (or Valkey),
// so that several instances of a program, on several machines, share one
// set of limits: the same strategies, the same Results, one state per key.
//
// # Decisions
//
// The strategies' math runs in Go, in package strategies, and nowhere
// else: a decision in Redis is the Go decision made on the key's current
// state, stored only if that state is still the one it was made on. Each
// DB keeps the last state it saw of each key it uses (Options.MaxCachedKeys
// of them) and decides on it; one script (EVALSHA, loaded once) compares
// the stored state with the one decided on and, when they are equal,
// stores the new one, all atomically in Redis. When another instance has
// changed the key since, the script answers with the state it found, and
// the call is decided again on that: a retry that only happens because
// another call on the key succeeded.
//
// Concurrent calls share round trips. The calls of one DB on one key are
// decided one after the other on the state, in Go, and stored by one
// swap: n calls on a hot key in one round trip. The swaps of different
// keys go to Redis as one pipeline. Neither waits on a timer: a lone call
// is sent at once, and under load a batch is whatever arrived during the
// round trip before it. A call therefore costs at most one round trip when
// this DB made the key's last change, as for a key used by one instance
// at a time, and two when another instance has changed it since, each
// shared with the calls sent with it. The DB also notes when Redis expires
// each state it wrote (see Keys), and decides on none once that has
// passed. Every strategy works the same way, a Composite included, and the
// Results are those of a ratestore.DB given the same calls at the same
// instants; package tests hold the two to that, call by call.
//
// # Time
//
// A call is decided at an instant of the instance's clock (Options.Now),
// and each stored state carries the instant of the call that wrote it. An
// instance whose clock is behind that instant, by no more than the
// strategy's longest wait (strategies.Decider.Horizon), decides at the
// stored instant instead, as a ratestore.DB does for a clock that steps
// back: a key follows the fastest clock that used it, and never gains from
// a slower one. So for instances whose clocks differ by d, up to that
// longest wait, a key allows at most d's worth of its rate more than on
// one clock (r·d for a GCRA of rate r), once, and the slower instance's
// callers wait up to d longer. A clock further behind is taken as it is,
// and the state clamped to it (strategies.Decider.Clamp): then each time
// the instances alternate on a key, it may grant its whole burst again, an
// over-issue without bound.
//
// Options.RedisClock removes the difference: every instance decides on
// Redis's clock, its own corrected by the offset measured from TIME at
// Open and every ClockSync. d is then the offsets' error: half the round
// trip that measured each, plus the drift since, about a millisecond.
//
// # Keys
//
// The state of key under limiter name is the Redis key Prefix + "{" + key
// + "}" + name, holding the instant and the state's versioned encoding
// (see strategies/DATA_FORMAT.md), "<unix ns>;<encoding>". The hash tag
// puts every state of one key in one slot of a Redis Cluster. Each write
// sets a TTL of the state's ResetAfter, plus a second for the clocks of
// other instances: a key idle that long has expired, as it would have been
// deleted from a ratestore.DB's disk. A record of Update is Prefix + "{" +
// tag + "}/r/" + its key, where the tag is what follows the record key's
// last "/" (the key store's "k/<id>" has the tag <id>), and a lock is
// likewise "/l/": a key's records, states and lock share its slot, and a
// script of an Update may use them together on a Cluster (see layout.go).
//
// The records that exist are listed in an index, a sorted set per segment
// of their keys (what precedes the first "/": "k/", "L/"), which the
// commits keep: in the commit script on one Redis, and on a Cluster, where
// the index is in another slot, in steps ordered so that a record stored
// is always listed (see index.go). Scan, ScanFrom and RereadPrefix read a
// range of it a page at a time and then the records, so that a page of n
// records costs O(n + log N), and never list the keyspace. A topic's
// announcements are a Stream, added to by the commit script on one Redis
// (see changes.go).
//
// The first Open after an upgrade brings the keys to this layout, once:
// it moves the records of the layout before hash tags ("r:" + key) to
// their keys, and lists every record in the index (one SCAN of the
// keyspace).
//
// # Failures
//
// Each call's round trips are bounded by Options.Timeout. When Redis cannot
// answer in time, the call fails closed by default: an error, and the
// Result of a denial. With Options.FailOpen it is allowed instead, and the
// failure logged, as envoy's rate limit filter offers: a gateway that
// prefers serving unmetered to refusing everyone. A call whose write may
// have reached Redis before the failure is reported with an error matching
// backend.ErrUncertain, as a commit of a ratestore.DB that may have
// reached the disk is.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/attach"
)

// Defaults of Options.
const (
	DefaultPrefix        = "ratestore:"
	DefaultTimeout       = 100 * time.Millisecond
	DefaultMaxCachedKeys = 1 << 16
)

// pipelines is how many pipelines of swaps a DB has in flight at once
// (see combine.go). One does best: every swap that arrives while it is in
// flight goes in the next, so the pipelines are as long as they can be and
// Redis reads and answers each with one system call. (Four instances of 16
// goroutines on 10k keys, bench/REPORT.md: 46k decisions/s with one, 33k
// with two, 29k with four, 18k with sixteen.)
const pipelines = 1

// ttlSlack is added to each state's TTL: how far behind another instance's
// clock may be and still find the state.
const ttlSlack = time.Second

// Options configures a DB. The zero value is the defaults.
type Options struct {
	// Prefix starts every Redis key of the DB; DefaultPrefix when empty.
	// It must not contain a brace, which would change the keys' hash tags.
	Prefix string
	// Timeout bounds a call's round trips to Redis; DefaultTimeout when 0.
	Timeout time.Duration
	// FailOpen allows a call that Redis could not decide (unreachable, too
	// slow, an error), logging the failure at Warn, instead of failing it.
	FailOpen bool
	// LockTTL is how long the locks of an Update last when their holder
	// never releases them (it crashed); DefaultLockTTL when 0.
	LockTTL time.Duration
	// MaxCachedKeys bounds the keys whose last seen state the DB keeps to
	// decide on; DefaultMaxCachedKeys when 0. A key not kept costs one more
	// round trip on its next call when it is stored in Redis.
	MaxCachedKeys int
	// Now is the clock; nil means backend.SystemClock.
	Now func() time.Time
	// RedisClock decides on Redis's clock instead of Now: on Now corrected
	// by its offset from Redis's TIME, measured at Open and every
	// ClockSync after. Instances whose clocks differ then decide on one
	// clock, to within the error of the offsets (see the package doc).
	RedisClock bool
	// After is the timer Limiter.Wait sleeps on, on the clock of Now; nil
	// means time.After.
	After func(d time.Duration) <-chan time.Time
	// Logger receives the failures of FailOpen calls; nil discards them.
	Logger *slog.Logger
	// TLSConfig is the TLS configuration of a rediss:// URL, for a private
	// CA (RootCAs) or a client certificate; nil means the system's roots.
	// Its ServerName defaults to the URL's host. It is an error with a
	// redis:// URL, which would not use it.
	TLSConfig *tls.Config
}

// DB is a connection to Redis holding limiter states. It is safe for
// concurrent use.
type DB struct {
	client   redis.UniversalClient
	cluster  bool       // client is a Cluster's
	attached attach.Set // see Attach
	opts     Options
	now      func() time.Time
	after    func(d time.Duration) <-chan time.Time
	log      *slog.Logger
	cache    cache
	pipe     pipe
	segs     segments // see indexBefore
	gaps     gaps     // see Batch.announce
	closed   atomic.Bool
}

// ErrClosed is backend.ErrClosed: returned by every call after Close.
var ErrClosed = backend.ErrClosed

// Open connects to the Redis at addr, a URL as go-redis parses it:
// "redis://[user:password@]host:port/db" or "rediss://" for TLS, and a
// Redis Cluster as one node's URL with the others as addr parameters:
// "redis://host1:7000?addr=host2:7000&addr=host3:7000". It checks that
// Redis answers (PING, within Options.Timeout) before it returns. Redis
// is to be 7.0 or later (the feeds' ids are XADD's "<ms>-*").
func Open(ctx context.Context, addr string, opts Options) (*DB, error) {
	o, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	client, err := newClient(addr, o.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("redisstore: open %s: %w: %w", redact(addr), err, backend.ErrInvalid)
	}
	db := &DB{client: client, opts: o, now: o.Now, log: o.Logger}
	_, db.cluster = client.(*redis.ClusterClient)
	if db.now == nil {
		db.now = backend.SystemClock()
	}
	if db.after = o.After; db.after == nil {
		db.after = time.After
	}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	db.cache.init(o.MaxCachedKeys)
	db.pipe.max = pipelines
	if err := db.start(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("redisstore: open %s: %w", redact(addr), err)
	}
	return db, nil
}

// start checks that Redis answers (PING, within Options.Timeout), moves
// the records of an earlier layout (see layout.go), and with
// Options.RedisClock measures the clock's offset.
func (db *DB) start(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	if err := db.client.Ping(pctx).Err(); err != nil {
		return err
	}
	if err := db.migrate(ctx); err != nil {
		return err
	}
	if !db.opts.RedisClock {
		return nil
	}
	c := &redisClock{db: db, local: db.now}
	if err := c.measure(pctx); err != nil {
		return err
	}
	db.now = c.now
	return nil
}

// newClient returns the client of addr: a cluster client when the URL
// names more than one node. tlsConfig replaces go-redis's for rediss://.
func newClient(addr string, tlsConfig *tls.Config) (redis.UniversalClient, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	if tlsConfig != nil {
		if u.Scheme != "rediss" {
			return nil, errors.New("Options.TLSConfig is set, but the URL is not rediss://")
		}
		tlsConfig = tlsConfig.Clone()
		if tlsConfig.ServerName == "" {
			tlsConfig.ServerName = u.Hostname()
		}
	}
	if u.Query().Has("addr") {
		o, err := redis.ParseClusterURL(addr)
		if err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled = true
		if tlsConfig != nil {
			o.TLSConfig = tlsConfig
		}
		return redis.NewClusterClient(o), nil
	}
	o, err := redis.ParseURL(addr)
	if err != nil {
		return nil, err
	}
	o.ContextTimeoutEnabled = true // Options.Timeout, through each call's context
	if tlsConfig != nil {
		o.TLSConfig = tlsConfig
	}
	return redis.NewClient(o), nil
}

// redact is addr without its password, for errors.
func redact(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "(an invalid URL)"
	}
	return u.Redacted()
}

// withDefaults validates o and fills in its zero fields.
func withDefaults(o Options) (Options, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxCachedKeys == 0 {
		o.MaxCachedKeys = DefaultMaxCachedKeys
	}
	if o.LockTTL == 0 {
		o.LockTTL = DefaultLockTTL
	}
	switch {
	case strings.ContainsAny(o.Prefix, "{}"):
		return Options{}, fmt.Errorf("redisstore: Prefix %q contains a brace: %w", o.Prefix, backend.ErrInvalid)
	case o.Timeout < 0:
		return Options{}, fmt.Errorf("redisstore: negative Timeout %v: %w", o.Timeout, backend.ErrInvalid)
	case o.LockTTL < time.Millisecond:
		return Options{}, fmt.Errorf("redisstore: LockTTL %v is under a millisecond: %w", o.LockTTL, backend.ErrInvalid)
	case o.MaxCachedKeys < 0:
		return Options{}, fmt.Errorf("redisstore: negative MaxCachedKeys %d: %w", o.MaxCachedKeys, backend.ErrInvalid)
	}
	return o, nil
}

// Client returns the go-redis client the DB talks to Redis with: to add
// hooks (tracing, metrics such as redisotel's, counting round trips) or to
// run commands of one's own. Keys under Options.Prefix are the DB's.
func (db *DB) Client() redis.UniversalClient { return db.client }

// Close closes the connections to Redis. Calls made after it fail with
// ErrClosed; the states stay in Redis.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	return db.client.Close()
}

// Now reads the DB's clock (Options.Now). Packages built on a DB use it so
// that an injected clock rules them too.
func (db *DB) Now() time.Time { return db.now() }

// Attach returns the value attached to db under key, calling open to make
// it the first time, as ratestore.DB.Attach does: one key store per DB.
//
// Attach on a nil *DB is an error matching ErrInvalid: it is the first
// call of a package opened on a DB (keystore.Open), which so reports a DB
// that failed to open rather than panic on it.
func (db *DB) Attach(key any, open func() (any, error)) (any, error) {
	if db == nil {
		return nil, fmt.Errorf("redisstore: nil DB: %w", backend.ErrInvalid)
	}
	return db.attached.Get(key, open)
}

var (
	_ backend.Store   = (*DB)(nil)
	_ backend.Limiter = (*Limiter)(nil)
)
