package alert

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/internal/errs"
)

// ErrInvalid is matched (errors.Is) by every error of New: an option out
// of range. The message names the field.
var ErrInvalid = errs.ErrInvalid

// Defaults of the zero Options fields.
const (
	DefaultQueue      = 1024
	DefaultRetries    = 8
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 5 * time.Minute
	DefaultTimeout    = 10 * time.Second // of the default Client
	DefaultMaxStates  = 100_000
	DefaultRearm      = time.Minute
)

// MaxThreshold is the largest threshold: 10 times the limit.
const MaxThreshold = 10

// Options configure a Notifier. Only URL is required.
type Options struct {
	URL string // required: an http or https URL, the webhook
	// Thresholds are fractions of a limit, each in (0, 10], rounded to
	// permille (0.8 is 800‰); duplicates once rounded count once. Empty:
	// 0.8 and 1.0.
	Thresholds []float64
	Client     *http.Client // nil: a client with a DefaultTimeout timeout
	Log        *slog.Logger // nil: slog.Default()
	// Queue is how many alerts may wait to be sent; 0: DefaultQueue.
	// When it is full, an alert is dropped, counted and logged.
	Queue int
	// Retries is how many times a failed POST is tried again; 0:
	// DefaultRetries.
	Retries int
	// Backoff is the wait before the first retry, doubling for each
	// next one up to MaxBackoff; zero: DefaultBackoff, DefaultMaxBackoff.
	// Each wait is shortened by a random jitter of up to 10%.
	Backoff, MaxBackoff time.Duration
	// Sleep waits d or until ctx ends (then it returns ctx's error); nil:
	// a timer. Tests inject one that does not sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxStates bounds the crossings remembered at once (see the package
	// documentation); 0: DefaultMaxStates. When it is reached, a new
	// crossing forgets the state of a period that has ended, or else the
	// oldest state of its shard, whose limit may then alert once more.
	MaxStates int
	// Rearm is how long after a rolling window was last seen at or above
	// a threshold an observation below it re-arms the threshold; 0:
	// DefaultRearm. Concurrent requests report their usage out of order,
	// so a usage below the threshold seen right after one above it is
	// taken as stale, not as the window rolling.
	Rearm time.Duration
	Now   func() time.Time // the clock; nil: time.Now
}

// Notifier detects threshold crossings and sends them to a webhook. Its
// methods are safe for concurrent use, and on a nil *Notifier they do
// nothing, so a gateway without a webhook can call them unconditionally.
type Notifier struct {
	url        string
	permille   []int64 // thresholds, ascending
	client     *http.Client
	log        *slog.Logger
	retries    int
	backoff    time.Duration
	maxBackoff time.Duration
	sleep      func(context.Context, time.Duration) error
	maxStates  int64
	rearm      time.Duration
	now        func() time.Time

	seed   maphash.Seed
	shards [numShards]shard
	states atomic.Int64 // states held in all shards; 0 is the fast path

	mu      sync.RWMutex // closed, and the sends on queue
	closed  bool
	queue   chan Alert
	closing chan struct{} // closed by Close
	done    chan struct{} // closed when the sender returns
	ctx     context.Context
	cancel  context.CancelFunc
	once    sync.Once

	crossings, sent, failed, dropped, retried, evicted atomic.Int64
}

// Stats are a Notifier's counters since New.
type Stats struct {
	Crossings int64 // alerts fired: thresholds crossed, after deduplication
	Sent      int64 // alerts delivered (2xx)
	Failed    int64 // alerts taken for delivery and not delivered: every attempt failed, or Close's ctx ended
	Dropped   int64 // alerts never sent: the queue was full, the Notifier closed, or Close's ctx ended first
	Retries   int64 // attempts after an alert's first
	Evicted   int64 // crossings forgotten or not remembered because MaxStates was reached
	States    int64 // crossings remembered now
}

// New validates opts and starts the Notifier's sender, a goroutine that
// lives until Close.
func New(opts Options) (*Notifier, error) {
	o, permille, err := normalize(opts)
	if err != nil {
		return nil, err
	}
	n := &Notifier{
		url: o.URL, permille: permille, client: o.Client, log: o.Log,
		retries: o.Retries, backoff: o.Backoff, maxBackoff: o.MaxBackoff,
		sleep: o.Sleep, maxStates: int64(o.MaxStates), rearm: o.Rearm, now: o.Now,
		seed:    maphash.MakeSeed(),
		queue:   make(chan Alert, o.Queue),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go n.run()
	return n, nil
}

// invalid is the error of an option out of range.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("alert: Options.%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// normalize checks o and fills in its defaults; it returns the thresholds
// in permille, ascending.
func normalize(o Options) (Options, []int64, error) {
	if err := checkURL(o.URL); err != nil {
		return o, nil, err
	}
	permille, err := thresholds(o.Thresholds)
	if err != nil {
		return o, nil, err
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Queue", int64(o.Queue)}, {"Retries", int64(o.Retries)}, {"Backoff", int64(o.Backoff)},
		{"MaxBackoff", int64(o.MaxBackoff)}, {"MaxStates", int64(o.MaxStates)}, {"Rearm", int64(o.Rearm)},
	} {
		if f.v < 0 {
			return o, nil, invalid(f.name, "must not be negative, got %d", f.v)
		}
	}
	o.Queue = cmpOr(o.Queue, DefaultQueue)
	o.Retries = cmpOr(o.Retries, DefaultRetries)
	o.MaxStates = cmpOr(o.MaxStates, DefaultMaxStates)
	o.Backoff = cmpOr(o.Backoff, DefaultBackoff)
	o.MaxBackoff = cmpOr(o.MaxBackoff, DefaultMaxBackoff)
	o.Rearm = cmpOr(o.Rearm, DefaultRearm)
	if o.MaxBackoff < o.Backoff {
		return o, nil, invalid("MaxBackoff", "%v is below Backoff %v", o.MaxBackoff, o.Backoff)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: DefaultTimeout}
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, permille, nil
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkURL checks the webhook's URL. Its errors quote it with any
// password redacted.
func checkURL(s string) error {
	if s == "" {
		return invalid("URL", "required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return invalid("URL", "not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalid("URL", "%q: the scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return invalid("URL", "%q: no host", u.Redacted())
	}
	return nil
}

// thresholds returns ts in permille, ascending, without duplicates; the
// defaults when ts is empty.
func thresholds(ts []float64) ([]int64, error) {
	if len(ts) == 0 {
		return []int64{800, 1000}, nil
	}
	out := make([]int64, 0, len(ts))
	for i, t := range ts {
		field := fmt.Sprintf("Thresholds[%d]", i)
		if math.IsNaN(t) || t <= 0 || t > MaxThreshold {
			return nil, invalid(field, "%v is not in (0, %d]", t, MaxThreshold)
		}
		p := int64(math.Round(t * 1000))
		if p < 1 {
			return nil, invalid(field, "%v rounds to 0‰", t)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the counters.
func (n *Notifier) Stats() Stats {
	if n == nil {
		return Stats{}
	}
	return Stats{
		Crossings: n.crossings.Load(),
		Sent:      n.sent.Load(),
		Failed:    n.failed.Load(),
		Dropped:   n.dropped.Load(),
		Retries:   n.retried.Load(),
		Evicted:   n.evicted.Load(),
		States:    n.states.Load(),
	}
}

// Close stops accepting alerts (later crossings are dropped) and delivers
// those queued, retries included, until ctx ends; it then abandons the
// rest (counted Dropped, the one being sent Failed) and returns ctx's
// error. Close may be called more than once.
func (n *Notifier) Close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.once.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		close(n.closing)
	})
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-n.done: // done and ctx ended at once: all was delivered
		return nil
	default:
	}
	n.cancel()
	<-n.done
	return fmt.Errorf("alert: close: alerts abandoned: %w", ctx.Err())
}
