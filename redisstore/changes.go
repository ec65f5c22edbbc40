package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/ratestore/ratestore/backend"
	"github.com/redis/go-redis/v9"
)

// A topic's feed of changes (Batch.Announce, DB.Changes) is a Redis
// Stream at P{topic}/f, trimmed to about feedLen messages: a reader that
// falls further behind gets ErrGap and reads what it keeps again.
//
// Its entries are numbered one by one: the id of each is the Stream's
// epoch (the microsecond of Redis's TIME its first entry was added at)
// and its number, from 0 (feedAddLua). A position is the id of the last
// entry read, and the next is the one numbered after it: a reader finds
// it missing when it was trimmed (which Redis's max-deleted-entry-id does
// not tell) or deleted, and finds another epoch when the Stream was lost
// and made again, and each is ErrGap.
//
// On one Redis, the commit script adds a batch's messages to their feeds
// with its changes, atomically: a message is in its feed exactly when the
// changes it names are stored. On a Cluster a feed is in its topic's slot,
// not the batch's, and the messages are added once the commit has stored
// the batch (or may have). When that fails, the DB owes each topic it
// failed a gap instead: an entry added and deleted at once (gapScript),
// a number missing for every reader behind it. It pays them at once, and
// else with its next announcement or Changes: a message is then late,
// never lost, unless the process ends first.
const feedLen = 100_000

// feedAddLua defines feedAdd(key, len, field, value), which adds an entry
// of field and value to the feed key, trimmed to about len entries, with
// the feed's epoch (a new one for a feed that does not exist) and the next
// number, and returns its id.
const feedAddLua = `
local function feedAdd(key, len, field, value)
  local epoch
  if redis.call('EXISTS', key) == 1 then
    local info = redis.call('XINFO', 'STREAM', key)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then epoch = string.match(info[i + 1], '^(%d+)-') end
    end
  end
  if not epoch then
    local t = redis.call('TIME')
    epoch = t[1] .. string.format('%06d', tonumber(t[2]))
  end
  return redis.call('XADD', key, 'MAXLEN', '~', len, epoch .. '-*', field, value)
end
`

// maxGaps bounds the topics a DB owes a gap.
const maxGaps = 1024

// feedKey is the Redis key of topic's feed.
func (db *DB) feedKey(topic string) string { return db.opts.Prefix + "{" + topic + "}/f" }

// announcement is a message of Batch.Announce.
type announcement struct{ topic, msg string }

// Announce adds msg to topic's feed with the batch's changes, when its
// commit stores them (see backend.Batch.Announce, and feedLen for
// a Cluster).
func (b *batch) Announce(topic string, msg []byte) error {
	if err := backend.ValidTopic(topic); err != nil {
		return err
	}
	b.announced = append(b.announced, announcement{topic, string(msg)})
	return nil
}

// announceScript adds ARGV[2...] to the feed KEYS[1], trimmed to about
// ARGV[1] entries.
var announceScript = redis.NewScript(feedAddLua + `
for i = 2, #ARGV do feedAdd(KEYS[1], ARGV[1], 'm', ARGV[i]) end
return 1
`)

// gapScript adds an entry to the feed KEYS[1] (trimmed to about ARGV[1])
// and deletes it: its number is missing for every reader behind it.
var gapScript = redis.NewScript(feedAddLua + `
redis.call('XDEL', KEYS[1], feedAdd(KEYS[1], ARGV[1], 'gap', ''))
return 1
`)

// announce adds the batch's messages to their feeds, on a Cluster, after
// the commit: in one round trip, and the gaps the DB owes with them. A
// topic whose messages fail is owed a gap.
func (b *batch) announce() {
	if !b.db.cluster || len(b.announced) == 0 {
		return
	}
	var calls []scriptCall
	var topics []string
	at := map[string]int{}
	for _, a := range b.announced {
		i, ok := at[a.topic]
		if !ok {
			i = len(calls)
			at[a.topic] = i
			calls = append(calls, scriptCall{[]string{b.db.feedKey(a.topic)}, []any{feedLen}})
			topics = append(topics, a.topic)
		}
		calls[i].args = append(calls[i].args, a.msg)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	for i, c := range b.db.runScripts(ctx, announceScript, calls) {
		if err := c.Err(); err != nil {
			b.db.log.Error("redisstore: a batch was stored, but announcing its changes failed: the readers of the feed will be told of a gap",
				"topic", topics[i], "error", err.Error())
			b.db.gaps.owe(topics[i])
		}
	}
	b.db.payGaps(ctx)
}

// gaps are the topics a DB owes a gap (see feedLen).
type gaps struct {
	mu     sync.Mutex
	topics map[string]bool
}

func (g *gaps) owe(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.topics == nil {
		g.topics = map[string]bool{}
	}
	if len(g.topics) < maxGaps {
		g.topics[topic] = true
	}
}

// owed returns the topics owed a gap.
func (g *gaps) owed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for t := range g.topics {
		out = append(out, t)
	}
	return out
}

func (g *gaps) paid(topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.topics, topic)
}

// payGaps adds the gaps the DB owes to their feeds, in one round trip;
// those that fail stay owed.
func (db *DB) payGaps(ctx context.Context) {
	topics := db.gaps.owed()
	if len(topics) == 0 {
		return
	}
	calls := make([]scriptCall, len(topics))
	for i, t := range topics {
		calls[i] = scriptCall{[]string{db.feedKey(t)}, []any{feedLen}}
	}
	for i, c := range db.runScripts(ctx, gapScript, calls) {
		if c.Err() == nil {
			db.gaps.paid(topics[i])
		}
	}
}

// Changes returns the messages of topic's feed after position after (see
// backend.Store.Changes). The messages and the Stream's last id are read
// in one step (MULTI); the messages after `after` must be numbered on from
// it in its epoch, and a number missing is ErrGap (see feedLen).
func (db *DB) Changes(ctx context.Context, topic, after string, max int) ([][]byte, string, error) {
	if db.closed.Load() {
		return nil, "", ErrClosed
	}
	if err := backend.ValidTopic(topic); err != nil {
		return nil, "", err
	}
	if max < 1 {
		return nil, "", fmt.Errorf("redisstore: changes: max %d: want at least 1: %w", max, backend.ErrInvalid)
	}
	pos, ok := parseID(after)
	if after != "" && !ok {
		return nil, "", fmt.Errorf("redisstore: changes of %s: position %.40q is not one Changes returned: %w", topic, after, backend.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	db.payGaps(ctx)
	last, entries, err := db.readFeed(ctx, db.feedKey(topic), after, max)
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("redisstore: changes of %s: %w", topic, err)
	case after == "":
		return nil, last, nil
	}
	msgs := make([][]byte, 0, len(entries))
	next := after
	want, ok := pos.next(last)
	for _, e := range entries {
		if e.ID != want.String() {
			break // missing: the next call fails
		}
		m, _ := e.Values["m"].(string)
		msgs = append(msgs, []byte(m))
		next = e.ID
		want.seq++
	}
	if !ok || len(msgs) == 0 && next != last {
		return nil, "", fmt.Errorf("redisstore: changes of %s after %s: the feed holds %s next, and %s last: %w",
			topic, after, firstID(entries), last, backend.ErrGap)
	}
	return msgs, next, nil
}

// readFeed reads, in one step, the last id of the Stream key (XINFO
// STREAM; 0-0 when it does not exist) and, after a position, its next max
// entries.
func (db *DB) readFeed(ctx context.Context, key, after string, max int) (string, []redis.XMessage, error) {
	var info *redis.XInfoStreamCmd
	var rng *redis.XMessageSliceCmd
	_, _ = db.client.TxPipelined(ctx, func(p redis.Pipeliner) error { // each command holds its error
		info = p.XInfoStream(ctx, key)
		if after != "" {
			rng = p.XRangeN(ctx, key, "("+after, "+", int64(max))
		}
		return nil
	})
	last := "0-0"
	switch i, err := info.Result(); {
	case err == nil:
		last = i.LastGeneratedID
	case !strings.Contains(err.Error(), "no such key"):
		return "", nil, err
	}
	if rng == nil {
		return last, nil, nil
	}
	entries, err := rng.Result()
	return last, entries, err
}

// firstID is the id of the first of entries, or "none".
func firstID(entries []redis.XMessage) string {
	if len(entries) == 0 {
		return "none"
	}
	return entries[0].ID
}

// streamID is a Stream entry id: a feed's epoch and an entry's number.
type streamID struct{ epoch, seq uint64 }

func (id streamID) String() string {
	return strconv.FormatUint(id.epoch, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

// parseID parses a Stream entry id, two decimal numbers joined by "-".
func parseID(s string) (streamID, bool) {
	e, q, ok := strings.Cut(s, "-")
	epoch, err1 := strconv.ParseUint(e, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	return streamID{epoch, seq}, ok && err1 == nil && err2 == nil && s == streamID{epoch, seq}.String()
}

// next is the id of the entry after the position p in a feed whose last
// id is last, and false when last is of another epoch (the feed was lost,
// and perhaps made again) or before p. The position 0-0, of a feed that
// did not exist, is before the first entry of every epoch.
func (p streamID) next(last string) (streamID, bool) {
	l, ok := parseID(last)
	switch {
	case !ok:
		return streamID{}, false
	case p == streamID{}:
		return streamID{l.epoch, 0}, true
	}
	return streamID{p.epoch, p.seq + 1}, l.epoch == p.epoch && l.seq >= p.seq
}
