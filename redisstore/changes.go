package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/ratestore/ratestore"
	"github.com/redis/go-redis/v9"
)

// A topic's feed of changes (Batch.Announce, DB.Changes) is a Redis
// Stream at P{topic}/f, trimmed to about feedLen messages: a reader that
// falls further behind gets ErrGap and reads what it keeps again.
const feedLen = 100_000

// feedKey is the Redis key of topic's feed.
func (db *DB) feedKey(topic string) string { return db.opts.Prefix + "{" + topic + "}/f" }

// announcement is a message of Batch.Announce, sent once the batch is
// stored.
type announcement struct{ topic, msg string }

// Announce adds msg to topic's feed once the batch's commit has stored
// its changes (see ratestore.StoreBatch.Announce).
func (b *Batch) Announce(topic string, msg []byte) error {
	if err := ratestore.ValidTopic(topic); err != nil {
		return err
	}
	b.announced = append(b.announced, announcement{topic, string(msg)})
	return nil
}

// announce sends the batch's announcements, in one round trip. It runs
// after the commit stored the batch: a failure is logged, not returned,
// for the change is stored; the readers of the feed miss it.
func (b *Batch) announce() {
	if len(b.announced) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), b.db.opts.Timeout)
	defer cancel()
	_, err := b.db.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, a := range b.announced {
			p.XAdd(ctx, &redis.XAddArgs{Stream: b.db.feedKey(a.topic), MaxLen: feedLen, Approx: true, Values: []string{"m", a.msg}})
		}
		return nil
	})
	if err != nil {
		b.db.log.Error("redisstore: a batch was stored, but announcing its changes failed: other processes may not see them until they read everything again",
			"error", err.Error())
	}
}

// Changes returns the messages of topic's feed after position after (see
// ratestore.Store.Changes). A position is a Stream entry id.
func (db *DB) Changes(ctx context.Context, topic, after string, max int) ([][]byte, string, error) {
	if db.closed.Load() {
		return nil, "", ErrClosed
	}
	if err := ratestore.ValidTopic(topic); err != nil {
		return nil, "", err
	}
	if max < 1 {
		return nil, "", fmt.Errorf("redisstore: changes: max %d: want at least 1: %w", max, ratestore.ErrInvalid)
	}
	ctx, cancel := context.WithTimeout(ctx, db.opts.Timeout)
	defer cancel()
	key := db.feedKey(topic)
	info, err := db.client.XInfoStream(ctx, key).Result()
	switch {
	case err != nil && strings.Contains(err.Error(), "no such key"):
		info, err = &redis.XInfoStream{LastGeneratedID: "0-0", MaxDeletedEntryID: "0-0"}, nil
	case err != nil:
		return nil, "", fmt.Errorf("redisstore: changes of %s: %w", topic, err)
	}
	if after == "" {
		return nil, info.LastGeneratedID, nil
	}
	if !validStreamID(after) {
		return nil, "", fmt.Errorf("redisstore: changes of %s: position %.40q is not one Changes returned: %w", topic, after, ratestore.ErrInvalid)
	}
	if gap(info, after) {
		return nil, "", fmt.Errorf("redisstore: changes of %s after %s: %w", topic, after, ratestore.ErrGap)
	}
	entries, err := db.client.XRangeN(ctx, key, "("+after, "+", int64(max)).Result()
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: changes of %s: %w", topic, err)
	}
	msgs := make([][]byte, 0, len(entries))
	next := after
	for _, e := range entries {
		m, _ := e.Values["m"].(string)
		msgs = append(msgs, []byte(m))
		next = e.ID
	}
	return msgs, next, nil
}

// gap reports whether messages of the stream info after position after
// are gone. Trimming (XADD's MAXLEN) does not move max-deleted-entry-id,
// which only XDEL does: the messages trimmed are those before the first
// one kept (or all, when none is), and there are some when more were
// added than are kept. A reader positioned at the last message trimmed
// has missed none, but cannot be told from one that has: it reads
// everything again, as after a gap.
func gap(info *redis.XInfoStream, after string) bool {
	if streamIDLess(after, info.MaxDeletedEntryID) {
		return true
	}
	if info.EntriesAdded <= info.Length {
		return false // none trimmed
	}
	if info.Length == 0 {
		return streamIDLess(after, info.LastGeneratedID)
	}
	return streamIDLess(after, info.FirstEntry.ID)
}

// validStreamID reports whether id has the form of a Stream entry id:
// two decimal numbers joined by "-".
func validStreamID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	return ok && decimal(ms) && decimal(seq)
}

func decimal(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// streamIDLess reports whether Stream entry id a comes before b.
func streamIDLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if c := cmpDecimal(am, bm); c != 0 {
		return c < 0
	}
	return cmpDecimal(as, bs) < 0
}

// cmpDecimal compares two decimal numbers without leading zeros.
func cmpDecimal(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}
