package audit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/backend"
)

// DefaultRetention is how long events are kept when Options.Retention is
// zero: a year and a month, so that last year's change is there when this
// year's is questioned.
const DefaultRetention = 400 * 24 * time.Hour

// DefaultSweepInterval is how often a Log drops the events past its
// retention when Options.SweepInterval is zero.
const DefaultSweepInterval = time.Hour

// Bounds of an event, checked by Record: an event is the record of one
// change to one key or team, whose fields the key store bounds already;
// these keep a caller's mistake from storing megabytes.
const (
	MaxActor   = 128     // bytes of Event.Actor
	MaxAddress = 64      // bytes of Event.Address: an IPv6 address and port fit
	MaxName    = 64      // bytes of Event.Action, Event.Target and a field's name
	MaxFields  = 64      // fields of Event.Changes
	MaxEvent   = 1 << 20 // bytes of an event as stored
)

// ErrReadOnly is matched by Record on a Log opened ReadOnly.
var ErrReadOnly = errors.New("audit: opened read-only")

// Event is one change an operator made: when, who, what and to what.
// Its JSON is the shape GET /admin/audit answers.
type Event struct {
	// Time is when the change was recorded, by the store's clock; Record
	// sets it.
	Time time.Time `json:"time"`
	// Actor is who made the change ("admin-token", "cli",
	// "session:1a2b3c4d"): never a credential.
	Actor string `json:"actor"`
	// Action is what was done, as "key.update" (the admin API lists
	// them).
	Action string `json:"action"`
	// Target is the id of what changed ("key_...", "team_..."), or a
	// name of what has none ("prices"); "" for nothing in particular.
	Target string `json:"target"`
	// Changes are the fields that changed, by name, each from its value
	// before to its value after, as JSON; {} when the action says all.
	Changes map[string]Change `json:"changes"`
	// Address is where the change came from (the caller's network
	// address), when known.
	Address string `json:"address,omitempty"`
}

// Change is the values of one field before and after a change, each as
// the JSON of the API that made it; null for none (before a creation,
// after a deletion).
type Change struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// Options configure a Log.
type Options struct {
	// Retention is how long events are kept; 0: DefaultRetention.
	Retention time.Duration
	// ReadOnly opens the log for queries only: Record fails with
	// ErrReadOnly and nothing is swept (a console that only looks).
	ReadOnly bool
	// SweepInterval is how often the events past the retention are
	// dropped, in the background, from Open on; 0: DefaultSweepInterval,
	// negative: never (a command that runs for a moment; Sweep drops them
	// when called).
	SweepInterval time.Duration
	// Log receives the sweep's failures; nil: slog.Default().
	Log *slog.Logger
}

// Log is the audit log kept in a store. Its methods are safe for
// concurrent use, and so are several Logs on one shared store.
type Log struct {
	db     backend.Store
	opts   Options
	writer string        // 16 hex digits, drawn at Open: the events of this Log
	seq    atomic.Uint32 // the next event's number among this writer's

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Open returns the audit log kept in db, which must stay open while the
// Log is used, and starts its sweep (Options.SweepInterval).
func Open(db backend.Store, opts Options) (*Log, error) {
	if db == nil {
		return nil, fmt.Errorf("audit: open: nil database: %w", backend.ErrInvalid)
	}
	if opts.Retention < 0 {
		return nil, fmt.Errorf("audit: open: retention %v: want >= 0: %w", opts.Retention, backend.ErrInvalid)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	var id [8]byte
	rand.Read(id[:])
	l := &Log{db: db, opts: opts, writer: hex.EncodeToString(id[:]),
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.ReadOnly || opts.SweepInterval < 0 {
		close(l.done)
		return l, nil
	}
	go l.background()
	return l, nil
}

// Retention returns how long the log keeps events.
func (l *Log) Retention() time.Duration { return l.opts.Retention }

// Close stops the sweep, waiting for it until ctx ends. It does not close
// the store.
func (l *Log) Close(ctx context.Context) error {
	l.once.Do(func() { close(l.stop) })
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Record stores e as made now, by the store's clock, and returns it with
// its Time. It returns once the event is stored as durably as the store
// stores a change (on disk, for a DB in Sync mode), so that a caller that
// records a change before acknowledging it never acknowledges a change
// without its event. An event out of its bounds (an empty Actor or
// Action, a name too long, too many fields) is an error matching
// backend.ErrInvalid and stores nothing.
func (l *Log) Record(ctx context.Context, e Event) (Event, error) {
	if l.opts.ReadOnly {
		return Event{}, ErrReadOnly
	}
	if err := check(e); err != nil {
		return Event{}, err
	}
	now := l.db.Now()
	e.Time = time.Unix(0, max(now.UnixNano(), 0)).UTC()
	if e.Changes == nil {
		e.Changes = map[string]Change{}
	}
	v, err := encode(e)
	if err != nil {
		return Event{}, err
	}
	if len(v) > MaxEvent {
		return Event{}, fmt.Errorf("audit: event of %d bytes: want at most %d: %w", len(v), MaxEvent, backend.ErrInvalid)
	}
	p := l.position(e.Time)
	err = l.db.Update(ctx, nil, func(b backend.Batch) error {
		if err := b.Put(p.key(eventPrefix), v); err != nil {
			return err
		}
		if e.Target == "" {
			return nil
		}
		return b.Put(p.key(targetPrefix(e.Target)), v)
	})
	if err != nil {
		return Event{}, fmt.Errorf("audit: record %s of %s: %w", e.Action, e.Target, err)
	}
	return e, nil
}

// position is the place in the log of this writer's next event, made at
// t.
func (l *Log) position(t time.Time) position {
	return position{ns: t.UnixNano(), writer: l.writer, seq: l.seq.Add(1)}
}

// check refuses an event out of its bounds.
func check(e Event) error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("audit: event: "+what+": %w", append(args, backend.ErrInvalid)...)
	}
	switch {
	case e.Actor == "" || len(e.Actor) > MaxActor:
		return bad("actor of %d bytes: want 1 to %d", len(e.Actor), MaxActor)
	case !isName(e.Action):
		return bad("action %.40q: want 1 to %d letters, digits or _.:@+-", e.Action, MaxName)
	case e.Target != "" && !isName(e.Target):
		return bad("target %.40q: want 1 to %d letters, digits or _.:@+-", e.Target, MaxName)
	case len(e.Address) > MaxAddress:
		return bad("address of %d bytes: want at most %d", len(e.Address), MaxAddress)
	case len(e.Changes) > MaxFields:
		return bad("%d changed fields: want at most %d", len(e.Changes), MaxFields)
	}
	for name := range e.Changes {
		if !isName(name) {
			return bad("field %.40q: want 1 to %d letters, digits or _.:@+-", name, MaxName)
		}
	}
	return nil
}

// isName reports whether s is 1 to MaxName letters, digits or _.:@+-:
// an id, an action or a field's name, which a record's key may hold.
func isName(s string) bool {
	if s == "" || len(s) > MaxName {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '@' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}
