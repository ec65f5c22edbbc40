package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The end-user directory: a record per (key, end user), with the end
// user's all-time totals and the time of its latest entry, for the admin
// API's list of a key's end users. It is one record for every writer, not
// one per writer as the rollups are: a writer's id is drawn at each Open,
// so a record per writer would grow with the restarts, and a page of
// names would read a record per name and writer. A writer changes it in
// the batch of the entry, under the key's lock (the key store's batches,
// Add and Flush hold it), which on a shared store keeps the other
// processes' batches off the record while the batch reads and writes it:
// read, added to, put, in the batch that writes the entry, with no write
// of its own. It is kept for good, as the rollups are.
//
//	L/d/key/enduser   totals, then the latest entry's time
//
// The records of a key sort by the end user's name, its bytes: a page is
// one ScanFrom of the key's prefix (and q's) from after the last name of
// the page before.
const directoryPrefix = "L/d/"

// EndUserQuery selects a page of a key's end users, ordered by name.
type EndUserQuery struct {
	Key    string // required
	Q      string // a prefix of the end user's name, case-sensitive; "": all
	Limit  int    // 1 to MaxLimit; 0: 100
	Cursor string // an EndUserPage's Next, to continue after it
}

// EndUserTotals are an end user's totals over all time, refusals
// included, and when its latest entry was written (zero: none, only
// refusals).
type EndUserTotals struct {
	Key, EndUser string
	Totals
	LastUsed time.Time
}

// EndUserPage is a page of end users, ordered by name, and the cursor of
// the next one ("" when there is none).
type EndUserPage struct {
	EndUsers []EndUserTotals
	Next     string
}

// ErrNotFound is matched by the error of EndUser for an end user the
// ledger never saw.
var ErrNotFound = errors.New("ledger: not found")

// directoryKey is the record key of key's end user.
func directoryKey(key, endUser string) []byte {
	return append(append(append([]byte(directoryPrefix), key...), '/'), endUser...)
}

// appendDirectory appends a directory record's value.
func appendDirectory(b []byte, t *Totals, lastUsed int64) []byte {
	b = append(b, codecVersion)
	b = appendTotals(b, t)
	return binary.AppendUvarint(b, uint64(max(lastUsed, 0)))
}

// decodeDirectory decodes a directory record's value (nil: none yet).
func decodeDirectory(v []byte) (Totals, int64, error) {
	if v == nil {
		return Totals{}, 0, nil
	}
	r := reader{b: v}
	if r.byte() != codecVersion {
		return Totals{}, 0, fmt.Errorf("%w: directory version", errCorrupt)
	}
	t := r.totals()
	last := r.int()
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	return t, last, r.err
}

// addDirectory adds t to key's end user's record in w, and makes at
// (Unix ms; 0 for a refusal) its last use if later. The key's own
// traffic (end user "") has none. The caller holds l.mu, so that on a DB,
// whose batches do not check what they read, two batches do not both add
// to the same value read.
func (l *Ledger) addDirectory(w batch, key, endUser string, t *Totals, at int64) error {
	if endUser == "" {
		return nil
	}
	k := directoryKey(key, endUser)
	v, err := w.Get(k)
	if err != nil {
		return err
	}
	sum, last, err := decodeDirectory(v)
	if err != nil {
		return fmt.Errorf("ledger: directory %q: %w", k, err)
	}
	sum.add(t)
	return w.Put(k, appendDirectory(nil, &sum, max(last, at)))
}

// EndUser returns the totals of key's end user endUser; an error
// matching ErrNotFound if the ledger never saw it.
func (l *Ledger) EndUser(ctx context.Context, key, endUser string) (EndUserTotals, error) {
	if err := checkID("key", key, true); err != nil {
		return EndUserTotals{}, err
	}
	if err := checkEndUser(endUser); err != nil {
		return EndUserTotals{}, err
	}
	v, err := l.db.Get(ctx, directoryKey(key, endUser))
	if err != nil {
		return EndUserTotals{}, err
	}
	if v == nil || endUser == "" {
		return EndUserTotals{}, fmt.Errorf("ledger: end user %.40q of key %s: %w", endUser, key, ErrNotFound)
	}
	t, last, err := decodeDirectory(v)
	if err != nil {
		return EndUserTotals{}, fmt.Errorf("ledger: end user %.40q of key %s: %w", endUser, key, err)
	}
	return endUserTotals(key, endUser, t, last), nil
}

func endUserTotals(key, endUser string, t Totals, last int64) EndUserTotals {
	u := EndUserTotals{Key: key, EndUser: endUser, Totals: t}
	if last > 0 {
		u.LastUsed = time.UnixMilli(last).UTC()
	}
	return u
}

// EndUsers returns a page of q.Key's end users whose names start with
// q.Q, ordered by name. A page reads at most Limit+1 records, from after
// the cursor's name: end users added meanwhile are listed if their names
// come after it, and none is listed twice.
func (l *Ledger) EndUsers(ctx context.Context, q EndUserQuery) (EndUserPage, error) {
	after, err := checkEndUserQuery(&q)
	if err != nil {
		return EndUserPage{}, err
	}
	prefix := directoryKey(q.Key, q.Q)
	start := prefix
	if after != "" {
		start = append(directoryKey(q.Key, after), 0) // the first name after it
	}
	var page EndUserPage
	names := len(directoryKey(q.Key, ""))
	err = l.db.ScanFrom(ctx, prefix, start, func(k, v []byte) error {
		if len(page.EndUsers) == q.Limit {
			page.Next = endUserCursor(q, page.EndUsers[q.Limit-1].EndUser)
			return errStop
		}
		t, last, err := decodeDirectory(v)
		if err != nil {
			return fmt.Errorf("ledger: directory %q: %w", k, err)
		}
		page.EndUsers = append(page.EndUsers, endUserTotals(q.Key, string(k[names:]), t, last))
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return EndUserPage{}, err
	}
	return page, nil
}

// checkEndUserQuery checks q, fills in its Limit, and returns the name
// its cursor continues after ("": none).
func checkEndUserQuery(q *EndUserQuery) (string, error) {
	if err := checkID("key", q.Key, true); err != nil {
		return "", err
	}
	if len(q.Q) > MaxEndUser || strings.ContainsFunc(q.Q, func(c rune) bool { return c < ' ' }) {
		return "", &QueryError{Param: "q", Msg: fmt.Sprintf("%.40q: want at most %d bytes, no control character", q.Q, MaxEndUser)}
	}
	switch {
	case q.Limit == 0:
		q.Limit = 100
	case q.Limit < 0 || q.Limit > MaxLimit:
		return "", &QueryError{Param: "limit", Msg: fmt.Sprintf("%d: want 1 to %d", q.Limit, MaxLimit)}
	}
	if q.Cursor == "" {
		return "", nil
	}
	return parseEndUserCursor(*q)
}

// An end-user cursor is the last name of its page and a hash binding it
// to its query's key and q, in URL-safe base64: opaque to a client, and
// one edited, or given with another key or q, is refused rather than
// read from a place the query never reached. It holds no secret: what it
// could point to, a name of the same key, a client may ask for with q.
func endUserCursor(q EndUserQuery, last string) string {
	b := append([]byte{1}, last...)
	b = append(b, cursorHash(q, last)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cursorHash is the hash of a cursor's query and name: 8 bytes of
// SHA-256.
func cursorHash(q EndUserQuery, last string) []byte {
	h := sha256.New()
	for _, s := range []string{q.Key, q.Q, last} {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	return h.Sum(nil)[:8]
}

// parseEndUserCursor returns the name q.Cursor continues after, or a
// QueryError naming the cursor.
func parseEndUserCursor(q EndUserQuery) (string, error) {
	bad := &QueryError{Param: "cursor", Msg: fmt.Sprintf("%.40q: not one this ledger gave for key %s and q %.40q", q.Cursor, q.Key, q.Q)}
	b, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(b) < 1+8 || b[0] != 1 {
		return "", bad
	}
	last := string(b[1 : len(b)-8])
	if !bytes.Equal(b[len(b)-8:], cursorHash(q, last)) || !strings.HasPrefix(last, q.Q) {
		return "", bad
	}
	return last, nil
}
