package console

import (
	"log/slog"
	"net/netip"
	"time"
)

// window is FailureWindow in nanoseconds, the unit of a tally's times.
const window = int64(FailureWindow)

// throttle counts the wrong admin tokens of the last FailureWindow by
// client address (throttleKey), and writes the log of them. Only a
// failure is counted, and only one that was checked: an attempt refused
// unchecked is not, so that an address may try again a FailureWindow
// after its oldest counted failure, however often it knocks meanwhile.
// Nothing one address does changes what another may do.
//
// Memory is bounded: the table holds at most max addresses, each with
// MaxFailures times and its log's counts, and forgets an address a
// FailureWindow after its last counted failure or log line, oldest
// first, as later attempts find them due. When the table is full of
// addresses that are not due, a wrong token from an address outside it
// is checked (the right token is accepted) and not counted. The
// alternatives are worse: making room by forgetting an address that is
// not due would let an attacker wipe its own count by guessing from max
// other addresses, and refusing the addresses outside the table would
// let one that fills it lock out every other address, the operator's
// included. So an attacker who keeps max addresses busy guessing (a
// guess from each every minute) may guess from others uncounted: the
// throttle slows down an attacker with few addresses, and the admin
// token's length (MinTokenLength random bytes) is what withstands one
// with many. Those uncounted tokens are logged like an address's.
//
// The log names each address once a minute at most twice: its first
// wrong or refused token at once, and the rest as one line of counts
// when the address next appears after the minute, or when it is
// forgotten. The uncounted tokens of all addresses are logged the same
// way, as one more address.
type throttle struct {
	max        int
	byKey      map[netip.Prefix]*tally
	head, tail *tally    // the tallies in order of end, soonest first
	uncounted  lineCount // the wrong tokens not counted: the table was full
}

// tally is what the throttle knows of one address.
type tally struct {
	key        netip.Prefix
	fails      [MaxFailures]int64 // the counted failures within the window, oldest first, in Unix ns; n of them
	n          int
	end        int64 // when it is forgotten: a window after its last failure or log line
	log        lineCount
	prev, next *tally
}

// lineCount is the log of an address's tokens within one minute: the
// first was logged when the minute started, the others are counted.
type lineCount struct {
	start          int64 // when the minute started, in Unix ns; 0: none is open
	wrong, refused int   // not logged yet
}

// line is a log line the throttle asks for, written once its lock is
// released.
type line struct {
	msg   string
	attrs []slog.Attr
}

func newThrottle(max int) throttle {
	return throttle{max: max, byKey: make(map[netip.Prefix]*tally)}
}

// attempt decides on a token from client, sent to path at now, right
// reporting whether it is the admin token. wait > 0 when client's
// address must wait that long, and the token is refused unchecked; a
// wrong token is counted against the address. lines are what to log.
func (t *throttle) attempt(client netip.Addr, path string, now time.Time, right bool) (wait time.Duration, lines []line) {
	ns, key := now.UnixNano(), throttleKey(client)
	lines = t.expire(ns, nil)
	e := t.byKey[key]
	if e != nil {
		e.drop(ns)
		if e.n == MaxFailures {
			wait = time.Duration(min(e.fails[0]+window-ns, window))
			first := line{"console: too many wrong admin tokens: refused unchecked", []slog.Attr{
				slog.String("client", clientString(client)), slog.String("path", path), slog.Int64("retry_after", retrySeconds(wait))}}
			return wait, t.note(e, ns, true, first, lines)
		}
	}
	if right {
		return 0, lines
	}
	if e == nil {
		if e = t.add(key); e == nil {
			return 0, t.noteUncounted(client, path, ns, lines)
		}
	}
	e.fails[e.n] = ns
	e.n++
	t.touch(e, ns)
	first := line{"console: wrong admin token", []slog.Attr{slog.String("client", clientString(client)), slog.String("path", path)}}
	return 0, t.note(e, ns, false, first, lines)
}

// note logs a wrong token (or a refused one) of e at now: first when it
// opens a minute, after the counts of the minute it closes; otherwise it
// is only counted.
func (t *throttle) note(e *tally, ns int64, refused bool, first line, lines []line) []line {
	opened, closed := e.log.count(ns, refused)
	if closed.pending() {
		lines = append(lines, closed.summary("console: wrong admin tokens from one address in a minute", keyString(e.key)))
	}
	if opened {
		t.touch(e, ns)
		lines = append(lines, first)
	}
	return lines
}

// noteUncounted logs a wrong token of client that the full table did not
// count, as note does an address's.
func (t *throttle) noteUncounted(client netip.Addr, path string, ns int64, lines []line) []line {
	opened, closed := t.uncounted.count(ns, false)
	if closed.pending() {
		lines = append(lines, closed.uncountedSummary(t.max))
	}
	if opened {
		lines = append(lines, line{"console: wrong admin token, not counted: too many addresses have sent wrong tokens this minute", []slog.Attr{
			slog.String("client", clientString(client)), slog.String("path", path), slog.Int("addresses", t.max)}})
	}
	return lines
}

// expire forgets the addresses due at ns, appending to lines the counts
// their minutes left unlogged, and those of the uncounted tokens once
// their minute is over.
func (t *throttle) expire(ns int64, lines []line) []line {
	for e := t.head; e != nil && e.end <= ns; e = t.head {
		if e.log.pending() {
			lines = append(lines, e.log.summary("console: wrong admin tokens from one address in a minute", keyString(e.key)))
		}
		t.unlink(e)
		delete(t.byKey, e.key)
	}
	if u := t.uncounted; u.start != 0 && ns >= u.start+window {
		if u.pending() {
			lines = append(lines, u.uncountedSummary(t.max))
		}
		t.uncounted = lineCount{}
	}
	return lines
}

// add returns a new tally of key, or nil when the table is full.
func (t *throttle) add(key netip.Prefix) *tally {
	if len(t.byKey) >= t.max {
		return nil
	}
	e := &tally{key: key}
	t.byKey[key] = e
	return e
}

// touch makes e due a window after ns: last in the order of ends.
func (t *throttle) touch(e *tally, ns int64) {
	e.end = ns + window
	if t.tail == e {
		return
	}
	if e.prev != nil || t.head == e {
		t.unlink(e)
	}
	e.prev, t.tail = t.tail, e
	if e.prev != nil {
		e.prev.next = e
	} else {
		t.head = e
	}
}

// unlink takes e out of the order of ends.
func (t *throttle) unlink(e *tally) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		t.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		t.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// drop forgets the failures of e a window old at ns.
func (e *tally) drop(ns int64) {
	i := 0
	for i < e.n && e.fails[i]+window <= ns {
		i++
	}
	e.n = copy(e.fails[:], e.fails[i:e.n])
}

// count counts a token at ns into l. opened reports that it opens a
// minute, whose first line the caller writes; closed is the minute it
// closed, whose counts are left to log.
func (l *lineCount) count(ns int64, refused bool) (opened bool, closed lineCount) {
	if l.start != 0 && ns < l.start+window {
		if refused {
			l.refused++
		} else {
			l.wrong++
		}
		return false, lineCount{}
	}
	closed, *l = *l, lineCount{start: ns}
	return true, closed
}

// pending reports whether l has tokens left to log.
func (l lineCount) pending() bool { return l.wrong+l.refused > 0 }

// summary is the line of l's counts for the address named client.
func (l lineCount) summary(msg, client string) line {
	return line{msg, []slog.Attr{slog.String("client", client), slog.Int("wrong", l.wrong), slog.Int("refused", l.refused),
		slog.Time("since", time.Unix(0, l.start).UTC())}}
}

// uncountedSummary is the line of the counts of the uncounted tokens.
func (l lineCount) uncountedSummary(max int) line {
	return line{"console: wrong admin tokens not counted in a minute: too many addresses", []slog.Attr{
		slog.Int("wrong", l.wrong), slog.Int("addresses", max), slog.Time("since", time.Unix(0, l.start).UTC())}}
}
