package keystore

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/text"
	"github.com/ratestore/ratestore/internal/varint"
	"github.com/ratestore/ratestore/legacy"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// Limits of what a record and a legacy record hold.
const (
	// MaxName is the longest Name or Model, in bytes.
	MaxName = 256
	// MaxLegacyWindows is the most legacy usage windows one key may carry.
	MaxLegacyWindows = legacy.MaxWindows

	maxWindowBytes = 16 << 20 // a version 1 usage window of 65536 buckets, written as text, with room to spare
	maxPolicyBytes = 1 << 20
)

// Record versions: 1 held the usage window (now an engine state) and one
// token limit; 2 holds a Policy; 3 a Policy with its Budgets, the lifetime
// spend and, when flagPrevious is set, the previous secret Rotate left
// working.
const (
	recordV1      = 1
	recordV2      = 2
	recordVersion = 3
)

// Record flags.
const (
	flagDisabled = 1 << iota
	flagExpires
	flagCreated
	flagLastUsed
	flagLegacy
	flagPrevious // version 3 only: the previous secret's hash and end follow the spend
	flagTeam     // version 3 only: the id of the key's team follows, last

	flagsKnown = flagDisabled | flagExpires | flagCreated | flagLastUsed | flagLegacy | flagPrevious | flagTeam
	flagsV3    = flagPrevious | flagTeam
)

// record is a key as stored at k/<id>.
type record struct {
	hash       [sha256.Size]byte
	name       string
	model      string
	pol        *policy
	lifetime   int64
	spent      int64 // nano-dollars, in all (record version 3)
	expiresAt  int64 // Unix ns, when hasExpiry
	createdAt  int64 // when hasCreated
	lastUsed   int64 // when hasUsed
	hasExpiry  bool
	hasCreated bool
	hasUsed    bool
	disabled   bool
	legacy     bool // l/<id> holds usage windows not merged yet

	// gone is not stored: the key was deleted, and a caller that found its
	// entry before must not use it. It sits here, in the padding after the
	// flags, rather than in the entry: a key costs 8 bytes less.
	gone bool
	// v1 is not stored either: on a read-only Store, the stored record is
	// still version 1, and its usage window, which upgrade would have
	// moved into the engine, is the state of the first window (see
	// unwritten). In the padding too.
	v1 bool

	prev *prevSecret // the previous secret after a Rotate with a grace; nil: none
	team string      // the id of the key's team; "" for none
}

// prevSecret is a key's previous secret after a Rotate with a grace: its
// hash, also indexed at h/<hash>, and the instant (Unix ns) it stops
// authenticating. Few keys have one, so a record points to it rather than
// holding its 40 bytes. It is never changed in place: copies of a record
// share it.
type prevSecret struct {
	hash [sha256.Size]byte
	ends int64
}

// sameHash reports whether p and q are both none, or secrets of one hash.
func (p *prevSecret) sameHash(q *prevSecret) bool {
	return p == nil && q == nil || p != nil && q != nil && p.hash == q.hash
}

func (r *record) flags() byte {
	var f byte
	for _, b := range [...]struct {
		on  bool
		bit byte
	}{
		{r.disabled, flagDisabled}, {r.hasExpiry, flagExpires}, {r.hasCreated, flagCreated},
		{r.hasUsed, flagLastUsed}, {r.legacy, flagLegacy}, {r.prev != nil, flagPrevious}, {r.team != "", flagTeam},
	} {
		if b.on {
			f |= b.bit
		}
	}
	return f
}

// times are the optional instants of r, in the order they are stored.
func (r *record) times() [3]struct {
	on *bool
	ns *int64
} {
	return [3]struct {
		on *bool
		ns *int64
	}{{&r.hasExpiry, &r.expiresAt}, {&r.hasCreated, &r.createdAt}, {&r.hasUsed, &r.lastUsed}}
}

// appendEncode appends the record's encoding (version 3) to dst.
func (r *record) appendEncode(dst []byte) []byte {
	dst = append(dst, recordVersion, r.flags())
	dst = append(dst, r.hash[:]...)
	dst = binary.AppendUvarint(dst, uint64(r.lifetime))
	for _, t := range r.times() {
		if *t.on {
			dst = binary.AppendVarint(dst, *t.ns)
		}
	}
	dst = appendBytes(dst, r.name)
	dst = appendBytes(dst, r.model)
	dst = appendBytes(dst, r.pol.enc)
	dst = binary.AppendUvarint(dst, uint64(r.spent))
	if p := r.prev; p != nil {
		dst = append(dst, p.hash[:]...)
		dst = binary.AppendVarint(dst, p.ends)
	}
	if r.team != "" {
		dst = appendBytes(dst, r.team)
	}
	return dst
}

// encode returns the record's encoding.
func (r *record) encode() []byte {
	return r.appendEncode(make([]byte, 0, 48+sha256.Size+10+len(r.name)+len(r.model)+len(r.pol.enc)))
}

// appendPolicy appends the encoding of p, which is normalized, to dst.
func appendPolicy(dst []byte, p *Policy) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p.Windows)))
	for _, w := range p.Windows {
		dst = binary.AppendUvarint(dst, uint64(w.Limit))
		dst = binary.AppendUvarint(dst, uint64(w.Window))
		dst = binary.AppendUvarint(dst, uint64(w.Bucket))
	}
	dst = binary.AppendUvarint(dst, uint64(p.RequestsPerMinute))
	dst = binary.AppendUvarint(dst, uint64(p.MaxConcurrent))
	dst = binary.AppendUvarint(dst, uint64(len(p.Models)))
	for _, m := range p.Models {
		dst = appendBytes(dst, m)
	}
	return appendSubs(appendBudgets(dst, p.Budgets), p)
}

func appendBytes(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// stored is a record as decoded, before its policy is made the Store's:
// the Policy, and for a version 1 record the limit and usage window it
// held.
type stored struct {
	record
	policy   Policy
	v1Limit  int64  // version 1: the token limit
	v1Window []byte // version 1: the usage window's state, encoded; empty: nothing in use
}

// decodePolicy reads the policy of a record of version v from d: into
// r.pol when known has a policy of that encoding, else into r.policy.
// Every key of a store usually shares one of a few policies (Store.policy
// keeps one of each), so most records are the first case: Open then
// neither decodes nor validates a key's policy again, and makes none of
// the short-lived allocations that would otherwise sit between the keys'
// strings in the heap. Only the current version stores the policy as
// Store.policy encodes it.
func (r *stored) decodePolicy(d *decoder, v byte, known func(enc []byte) *policy) {
	enc := d.bytes("policy", maxPolicyBytes)
	if d.err != nil {
		return
	}
	if v == recordVersion && known != nil {
		if r.pol = known(enc); r.pol != nil {
			return
		}
	}
	p := decoder{id: d.id, what: "record: policy", b: enc}
	r.policy = p.policy(v >= recordVersion)
	if v >= recordVersion {
		p.subs(&r.policy)
	}
	d.err = p.done()
}

// decodeRecord parses the record of id, version 1, 2 or 3. Its errors match
// ErrCorrupt and name id. The policy is checked by Store.policy
// and a version 1 window by its strategy, later, unless known (nil: none)
// knows the policy's encoding: see stored.decodePolicy.
func decodeRecord(id string, b []byte, known func(enc []byte) *policy) (*stored, error) {
	d := decoder{id: id, what: "record", b: b}
	v := d.byte("version")
	if d.err == nil && v != recordV1 && v != recordV2 && v != recordVersion {
		return nil, corrupt(id, "record: unsupported version %d", v)
	}
	flags := d.byte("flags")
	if d.err == nil && (flags&^flagsKnown != 0 || v != recordVersion && flags&flagsV3 != 0) {
		return nil, corrupt(id, "record: unknown flags %#02x in version %d", flags, v)
	}
	r := &stored{record: record{
		disabled:   flags&flagDisabled != 0,
		hasExpiry:  flags&flagExpires != 0,
		hasCreated: flags&flagCreated != 0,
		hasUsed:    flags&flagLastUsed != 0,
		legacy:     flags&flagLegacy != 0,
	}}
	copy(r.hash[:], d.fixed("hash", sha256.Size))
	if v == recordV1 {
		r.v1Limit = d.int("token limit", 1)
	}
	r.lifetime = d.int("lifetime tokens", 0)
	for _, t := range r.times() {
		if *t.on {
			*t.ns = d.varint("instant")
		}
	}
	r.name = d.text("name")
	r.model = d.text("model")
	if v == recordV1 {
		r.v1Window = d.bytes("window", maxWindowBytes)
	} else {
		r.decodePolicy(&d, v, known)
	}
	if v >= recordVersion {
		r.spent = d.int("lifetime spend", 0)
	}
	if flags&flagPrevious != 0 {
		p := &prevSecret{}
		copy(p.hash[:], d.fixed("previous secret hash", sha256.Size))
		p.ends = d.varint("previous secret end")
		r.prev = p
	}
	if flags&flagTeam != 0 {
		if r.team = d.text("team"); d.err == nil && !validTeamID(r.team) {
			d.fail("team", fmt.Sprintf("%q is not a team id", r.team))
		}
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return r, nil
}

// policy reads a Policy as appendPolicy writes it, with its budgets when
// budgets is set (record version 3, and team records). Its values are
// checked by normalize later. A policy with budgets may have no token
// window; a version 2 policy, which had no budgets, always had one.
func (d *decoder) policy(budgets bool) Policy {
	var p Policy
	least := int64(1)
	if budgets {
		least = 0
	}
	n := d.int("window count", least)
	if d.err == nil && n > MaxWindows {
		d.fail("window count", fmt.Sprintf("%d is over %d", n, MaxWindows))
	}
	for i := int64(0); i < n && d.err == nil; i++ {
		p.Windows = append(p.Windows, Window{
			Limit:  d.int("window limit", 1),
			Window: time.Duration(d.int("window length", 1)),
			Bucket: time.Duration(d.int("window bucket", 1)),
		})
	}
	p.RequestsPerMinute = d.int("requests per minute", 0)
	maxConc := d.int("max concurrent", 0)
	if d.err == nil && maxConc > MaxMaxConcurrent {
		d.fail("max concurrent", fmt.Sprintf("%d is out of range", maxConc))
	}
	p.MaxConcurrent = int(maxConc)
	models := d.int("model count", 0)
	if d.err == nil && models > MaxModels {
		d.fail("model count", fmt.Sprintf("%d is over %d", models, MaxModels))
	}
	for i := int64(0); i < models && d.err == nil; i++ {
		p.Models = append(p.Models, d.text("model pattern"))
	}
	if budgets {
		p.Budgets = d.budgets()
	}
	return p
}

// Budget kinds, as a record stores them.
const (
	budgetRolling  = 0
	budgetCalendar = 1
)

// appendBudgets appends the encoding of bs, which are normalized: each
// its limit, its kind, and a rolling window's length and bucket or a
// calendar period and its zone's name ("" for UTC).
func appendBudgets(dst []byte, bs []Budget) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(bs)))
	for _, b := range bs {
		dst = binary.AppendUvarint(dst, uint64(b.Limit))
		if b.Period == 0 {
			dst = append(dst, budgetRolling)
			dst = binary.AppendUvarint(dst, uint64(b.Window))
			dst = binary.AppendUvarint(dst, uint64(b.Bucket))
			continue
		}
		zone := ""
		if b.Location != nil {
			zone = b.Location.String()
		}
		dst = append(dst, budgetCalendar, byte(b.Period))
		dst = appendBytes(dst, zone)
	}
	return dst
}

// budgets reads the budgets appendBudgets wrote.
func (d *decoder) budgets() []Budget {
	n := d.int("budget count", 0)
	if d.err == nil && n > MaxBudgets {
		d.fail("budget count", fmt.Sprintf("%d is over %d", n, MaxBudgets))
	}
	var bs []Budget
	for i := int64(0); i < n && d.err == nil; i++ {
		b := Budget{Limit: pricing.USD(d.int("budget limit", 1))}
		switch kind := d.byte("budget kind"); {
		case d.err != nil:
		case kind == budgetRolling:
			b.Window = time.Duration(d.int("budget window", 1))
			b.Bucket = time.Duration(d.int("budget bucket", 1))
		case kind == budgetCalendar:
			b.Period = strategies.Period(d.byte("budget period"))
			if zone := d.text("budget zone"); d.err == nil && zone != "" {
				loc, err := time.LoadLocation(zone)
				if err != nil {
					d.fail("budget zone", err.Error())
				}
				b.Location = loc
			}
		default:
			d.fail("budget kind", fmt.Sprintf("%d is unknown", kind))
		}
		bs = append(bs, b)
	}
	return bs
}

// corrupt returns an error about the stored data of key id, matching
// ErrCorrupt.
func corrupt(id, format string, args ...any) error {
	return fmt.Errorf("keystore: key %s: %s: %w", id, fmt.Sprintf(format, args...), ErrCorrupt)
}

// corruptWrap returns err, which is about the stored data of key id, as an
// error matching ErrCorrupt.
func corruptWrap(id, what string, err error) error {
	if errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("keystore: key %s: %s: %w", id, what, err)
	}
	return fmt.Errorf("keystore: key %s: %s: %v: %w", id, what, err, ErrCorrupt)
}

// decoder reads the fields of one record. Its first error sticks: later
// reads return zero values.
type decoder struct {
	id, what string
	b        []byte
	err      error
}

func (d *decoder) fail(field, why string) {
	if d.err == nil {
		d.err = corrupt(d.id, "%s: %s %s", d.what, field, why)
	}
}

func (d *decoder) byte(field string) byte {
	if b := d.fixed(field, 1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) fixed(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail(field, "is cut short")
		return nil
	}
	f := d.b[:n]
	d.b = d.b[n:]
	return f
}

// uvarint reads a minimal unsigned varint.
func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n, why := varint.Read(d.b)
	if why != "" {
		d.fail(field, why)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a minimal zigzag varint.
func (d *decoder) varint(field string) int64 { return varint.Unzigzag(d.uvarint(field)) }

// int reads an unsigned varint within [lo, math.MaxInt64].
func (d *decoder) int(field string, lo int64) int64 {
	u := d.uvarint(field)
	if d.err == nil && (u > math.MaxInt64 || int64(u) < lo) {
		d.fail(field, fmt.Sprintf("%d is out of range [%d, %d]", u, lo, int64(math.MaxInt64)))
		return 0
	}
	return int64(u)
}

// bytes reads a length-prefixed field of at most max bytes.
func (d *decoder) bytes(field string, max int) []byte {
	if d.err != nil {
		return nil
	}
	n := d.uvarint(field)
	if d.err != nil {
		d.err = fmt.Errorf("%w (its length)", d.err)
		return nil
	}
	if n > uint64(max) {
		d.fail(field, fmt.Sprintf("length %d is over %d", n, max))
		return nil
	}
	return d.fixed(field, int(n))
}

// text reads a name, model or model pattern, which may hold what only
// new text is refused (see storedText).
func (d *decoder) text(field string) string {
	b := d.bytes(field, MaxName)
	if d.err == nil {
		if why := storedText(string(b)); why != "" {
			d.fail(field, why)
			return ""
		}
	}
	return string(b)
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) > 0 {
		d.err = corrupt(d.id, "%s: %d trailing bytes", d.what, len(d.b))
	}
	return d.err
}

// badText says what is wrong with a name, model or model pattern an
// operator sets, or returns "" (text.Problem).
func badText(s string) string { return text.Problem(s, MaxName) }

// storedText says what is wrong with a name, model or model pattern as a
// record holds it, or returns "" (text.Stored): one stored before
// badText refused the format characters still reads, as it was.
func storedText(s string) string { return text.Stored(s, MaxName) }

// The instants a time.Time can be stored as: Unix nanoseconds in int64.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// checkTime says what is wrong with an instant to store, or returns "";
// the zero Time (not set) is fine.
func checkTime(t time.Time) string {
	if !t.IsZero() && (t.Before(minTime) || t.After(maxTime)) {
		return fmt.Sprintf("%v is outside the years 1678 to 2262", t)
	}
	return ""
}

// timeOf returns the instant ns, or the zero Time when has is false.
func timeOf(ns int64, has bool) time.Time {
	if !has {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nanos returns t in Unix nanoseconds and whether it is set (not zero).
// t must have passed checkTime.
func nanos(t time.Time) (int64, bool) {
	if t.IsZero() {
		return 0, false
	}
	return t.UnixNano(), true
}
