package alert

import (
	"context"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"sync"
	"time"
)

// Types of limit.
const (
	TypeBudget = "budget" // money: Limit and Spent in pricing.USD nano-dollars
	TypeWindow = "window" // tokens
)

// Level is the usage of one limit after a request.
type Level struct {
	Type         string // TypeBudget or TypeWindow; a Level of another type is ignored
	Name         string // names the limit: "window 5h0m0s", "budget month Europe/Paris"
	Team         bool   // the team's limit, not the key's
	Limit, Spent int64  // tokens, or pricing.USD nano-dollars for a budget; Limit <= 0 is ignored
	// ResetsAt is when the window or period resets: the end of a
	// calendar period, or when a rolling window's usage would be back to
	// zero. Zero: unknown.
	ResetsAt time.Time
	// Period marks a calendar period: a crossing is remembered per
	// period, identified by ResetsAt. Otherwise the limit is a rolling
	// window: a crossing is remembered until the usage is seen below the
	// threshold again, Options.Rearm after it was last seen above.
	Period bool
}

// numShards is the number of locks and maps the states are spread over,
// by subject, so that observations of different keys rarely contend.
const numShards = 32

// shard holds the states of the subjects that hash to it.
type shard struct {
	mu  sync.Mutex
	m   map[stateKey]state
	seq uint64 // the last state's insertion number
}

// stateKey identifies a threshold of a limit of a subject.
type stateKey struct {
	subject, name string
	team          bool
	permille      int64
}

// state is a crossing remembered: the threshold was reached and alerted.
type state struct {
	seq       uint64    // insertion order in its shard: the smallest is the oldest
	resetsAt  time.Time // the period's end (its identity), or the window's latest reset
	lastAbove time.Time // when the usage was last seen at or above the threshold
}

// Observe checks the usage levels of the limits of key, a key of team ("":
// none), after a request, and sends an alert for each threshold newly
// reached. It never waits for the webhook, and allocates nothing when no
// threshold is crossed. A level of a team's limit is ignored when team is
// "", as is a key's when key is "".
func (n *Notifier) Observe(key, team string, levels []Level) {
	if n == nil {
		return
	}
	armed := n.states.Load() > 0
	for i := range levels {
		l := &levels[i]
		if l.Limit <= 0 || l.Type != TypeWindow && l.Type != TypeBudget {
			continue
		}
		if !armed && !reaches(l.Spent, l.Limit, n.permille[0]) {
			continue
		}
		subject := key
		if l.Team {
			subject = team
		}
		if subject != "" {
			n.observe(key, team, subject, l)
		}
	}
}

// reaches reports whether spent has reached permille‰ of limit > 0:
// spent*1000 >= limit*permille, in 128 bits, so exact for any int64.
func reaches(spent, limit, permille int64) bool {
	if spent <= 0 {
		return false // permille > 0 and limit > 0: the threshold is above 0
	}
	shi, slo := bits.Mul64(uint64(spent), 1000)
	lhi, llo := bits.Mul64(uint64(limit), uint64(permille))
	return shi > lhi || shi == lhi && slo >= llo
}

// observe checks level l of subject against every threshold, under its
// shard's lock, then, unlocked, fires the alerts of the crossings found
// and logs the states forgotten to make room for them.
func (n *Notifier) observe(key, team, subject string, l *Level) {
	sh := &n.shards[maphash.String(n.seed, subject)%numShards]
	var (
		buf     [4]Alert
		fired   = buf[:0]
		evicted []eviction
	)
	sh.mu.Lock()
	for _, p := range n.permille {
		k := stateKey{subject: subject, name: l.Name, team: l.Team, permille: p}
		fire, ev := n.step(sh, k, l)
		if fire {
			fired = append(fired, Alert{
				Type: l.Type, Threshold: float64(p) / 1000, Key: key, Team: team,
				TeamLimit: l.Team, Name: l.Name, Limit: l.Limit, Spent: l.Spent, ResetsAt: l.ResetsAt,
			})
		}
		if ev.happened {
			evicted = append(evicted, ev)
		}
	}
	sh.mu.Unlock()
	for _, ev := range evicted {
		n.logEviction(ev)
	}
	for i := range fired {
		n.fire(&fired[i])
	}
}

// eviction records that MaxStates was reached when crossing k was
// remembered: victim was forgotten for it, or, when none could be, k was
// not remembered.
type eviction struct {
	happened  bool
	k, victim stateKey
	forgot    bool // victim is set
}

// step updates the state of k for level l, under sh's lock, and reports
// whether l is a new crossing of k: reached, and not remembered for this
// period, nor since the window was last seen below the threshold, at
// least Options.Rearm after it was last seen at or above it.
func (n *Notifier) step(sh *shard, k stateKey, l *Level) (bool, eviction) {
	reached := reaches(l.Spent, l.Limit, k.permille)
	st, ok := sh.m[k]
	if !ok && !reached {
		return false, eviction{}
	}
	samePeriod := ok && (!l.Period || st.resetsAt.Equal(l.ResetsAt))
	switch {
	case !reached:
		if !samePeriod || !l.Period && n.now().Sub(st.lastAbove) >= n.rearm {
			delete(sh.m, k) // re-armed: a new period, or the window rolled below
			n.states.Add(-1)
		}
		return false, eviction{}
	case samePeriod: // alerted already
		st.resetsAt, st.lastAbove = l.ResetsAt, n.now()
		sh.m[k] = st
		return false, eviction{}
	case ok: // a new period: its state replaces the previous period's
		sh.m[k] = state{seq: sh.next(), resetsAt: l.ResetsAt, lastAbove: n.now()}
		return true, eviction{}
	}
	ev := n.makeRoom(sh, k)
	if !ev.happened || ev.forgot {
		if sh.m == nil {
			sh.m = make(map[stateKey]state)
		}
		sh.m[k] = state{seq: sh.next(), resetsAt: l.ResetsAt, lastAbove: n.now()}
	}
	return true, ev
}

// next returns the next insertion number.
func (sh *shard) next() uint64 {
	sh.seq++
	return sh.seq
}

// makeRoom takes a slot for k, a new state in sh, under sh's lock: a free
// one while fewer than MaxStates are held (counted in n.states, exactly,
// by compare-and-swap), or else one it frees in sh: a state whose reset
// time has passed, or failing one, sh's oldest, which may then alert once
// more. When sh is empty (all states are in other shards) there is no
// slot: k's crossing is alerted but not remembered.
func (n *Notifier) makeRoom(sh *shard, k stateKey) eviction {
	for {
		c := n.states.Load()
		if c >= n.maxStates {
			break
		}
		if n.states.CompareAndSwap(c, c+1) {
			return eviction{}
		}
	}
	n.evicted.Add(1)
	ev := eviction{happened: true, k: k}
	if ev.victim, ev.forgot = sh.victim(n.now()); ev.forgot {
		delete(sh.m, ev.victim)
	}
	return ev
}

// logEviction logs ev at warn level.
func (n *Notifier) logEviction(ev eviction) {
	attrs := []slog.Attr{
		slog.Int64("max_states", n.maxStates), slog.Int64("evicted", n.evicted.Load()),
		slog.String("subject", ev.k.subject), slog.String("name", ev.k.name),
	}
	msg := "alert: too many crossings remembered; this one is not"
	if ev.forgot {
		msg = "alert: too many crossings remembered; an old one is forgotten"
		attrs = append(attrs, slog.String("forgotten_subject", ev.victim.subject),
			slog.String("forgotten_name", ev.victim.name))
	}
	n.log.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// victim returns the state of sh to forget: one whose reset time has
// passed, else the oldest; false when sh is empty.
func (sh *shard) victim(now time.Time) (stateKey, bool) {
	var (
		best   stateKey
		oldest uint64
		found  bool
	)
	for k, st := range sh.m {
		if !st.resetsAt.IsZero() && st.resetsAt.Before(now) {
			return k, true
		}
		if !found || st.seq < oldest {
			best, oldest, found = k, st.seq, true
		}
	}
	return best, found
}

// fire counts and logs alert a, and queues it, or drops it when the queue
// is full or the Notifier closed.
func (n *Notifier) fire(a *Alert) {
	n.crossings.Add(1)
	n.log.LogAttrs(context.Background(), slog.LevelWarn, "alert: threshold reached", a.attrs()...)
	n.mu.RLock()
	queued := false
	if !n.closed {
		select {
		case n.queue <- *a:
			queued = true
		default:
		}
	}
	closed := n.closed
	n.mu.RUnlock()
	if queued {
		return
	}
	n.dropped.Add(1)
	why := "the queue is full"
	if closed {
		why = "the notifier is closed"
	}
	n.log.LogAttrs(context.Background(), slog.LevelError, "alert: dropped, "+why, a.attrs()...)
}
