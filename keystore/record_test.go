package keystore

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/strategies"
)

const testID = "key_00112233445566ff"

// withPolicy returns r with the policy p as records store it.
func withPolicy(r record, p Policy) record {
	r.pol = &policy{pub: p, enc: string(appendPolicy(nil, &p))}
	return r
}

// samplePolicies are policies as normalize leaves them.
var samplePolicies = []Policy{
	{Windows: []Window{{Limit: 100_000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}}},
	{
		Windows: []Window{
			{Limit: math.MaxInt64, Window: time.Hour, Bucket: time.Minute},
			{Limit: 1, Window: 7 * 24 * time.Hour, Bucket: 2 * time.Hour},
		},
		RequestsPerMinute: 60,
		MaxConcurrent:     4,
		Models:            []string{"gpt-4o", "claude-*"},
	},
	// Budgets alone, and no limit at all: no token window.
	{Budgets: []Budget{{Limit: 5_000_000_000, Window: 24 * time.Hour, Bucket: 24 * time.Minute}}, MaxConcurrent: 2},
	{},
}

// sampleRecords are version 3 records: every field set, and few; one
// with a previous secret (Rotate); two without a token window.
func sampleRecords() []record {
	full := record{
		name: "team-a ✓", model: "glm-4.7", lifetime: math.MaxInt64,
		expiresAt: math.MaxInt64, createdAt: math.MinInt64, lastUsed: -1,
		hasExpiry: true, hasCreated: true, hasUsed: true, disabled: true, legacy: true,
	}
	for i := range full.hash {
		full.hash[i] = byte(i * 7)
	}
	rotated := record{lifetime: 7, hasCreated: true, createdAt: 1768723200000000000, spent: 5,
		prev: &prevSecret{ends: 1768809600000000000}}
	rotated.hash[0], rotated.prev.hash[0], rotated.prev.hash[31] = 9, 3, 4
	return []record{
		withPolicy(full, samplePolicies[1]),
		withPolicy(record{}, samplePolicies[0]),
		withPolicy(record{lifetime: 12, hasCreated: true, createdAt: 1768723200000000000}, samplePolicies[0]),
		withPolicy(rotated, samplePolicies[0]),
		withPolicy(record{lifetime: 9, spent: 7}, samplePolicies[2]),
		withPolicy(record{team: "team_0123456789abcdef"}, samplePolicies[3]),
	}
}

// v1Record is a record as version 1 stored it.
type v1Record struct {
	record
	limit  int64
	window []byte
}

// encodeV1 writes r as the version 1 record.go did: version, flags, hash,
// uvarint token limit, uvarint lifetime, zigzag varints for the instants
// set, then length-prefixed name, model and window.
func (r *v1Record) encodeV1() []byte {
	b := append([]byte{recordV1, r.flags()}, r.hash[:]...)
	b = binary.AppendUvarint(b, uint64(r.limit))
	b = binary.AppendUvarint(b, uint64(r.lifetime))
	for _, t := range r.times() {
		if *t.on {
			b = binary.AppendVarint(b, *t.ns)
		}
	}
	for _, s := range []string{r.name, r.model, string(r.window)} {
		b = appendBytes(b, s)
	}
	return b
}

// sampleV1 are version 1 records, one with a usage window.
func sampleV1(t testing.TB) []v1Record {
	rw := strategies.RollingWindow{Limit: 1000, Window: 5 * time.Hour, Bucket: 5 * time.Minute}
	d := rw.Prepare()
	st := d.NewState()
	_, err := d.Decide(st, strategies.Call{Now: 1768723200000000000, N: 902, Record: true})
	require.NoError(t, err)
	full := v1Record{
		record: record{name: "old ✓", model: "glm-4.7", lifetime: 1_234_567, hasCreated: true, createdAt: 1768723200000000000,
			hasUsed: true, lastUsed: 1768726800000000000, legacy: true},
		limit:  100_000,
		window: st.AppendEncode(nil),
	}
	full.hash[0], full.hash[31] = 1, 2
	return []v1Record{full, {limit: 1}, {record: record{disabled: true, hasExpiry: true, expiresAt: -5}, limit: math.MaxInt64}}
}

// reencode encodes what decodeRecord returned the way it was read: version
// 2 with its policy, or version 1 with its limit and window.
func reencode(st *stored, version byte) []byte {
	if version == recordV1 {
		v1 := v1Record{record: st.record, limit: st.v1Limit, window: st.v1Window}
		return v1.encodeV1()
	}
	r := withPolicy(st.record, st.policy)
	if version == recordV2 {
		return r.encodeV2()
	}
	return r.appendEncode(nil)
}

// encodeV2 is r as version 2 wrote it: no spend, and a policy without
// budgets (r has none).
func (r *record) encodeV2() []byte {
	b := append([]byte{recordV2, r.flags()}, r.hash[:]...)
	b = binary.AppendUvarint(b, uint64(r.lifetime))
	for _, t := range r.times() {
		if *t.on {
			b = binary.AppendVarint(b, *t.ns)
		}
	}
	b = appendBytes(appendBytes(b, r.name), r.model)
	return appendBytes(b, r.pol.enc[:len(r.pol.enc)-1]) // the budget count, 0
}

// TestRecordRoundTrip asserts that a version 2 record decodes to what was
// encoded, and encodes back to the same bytes.
func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		b := r.encode()
		require.Equal(t, byte(recordVersion), b[0])
		st, err := decodeRecord(testID, b, nil)
		require.NoError(t, err)
		want := r
		want.pol = nil
		require.Equal(t, want, st.record)
		require.Equal(t, r.pol.pub, st.policy)
		require.Zero(t, st.v1Limit)
		require.Empty(t, st.v1Window)
		require.Equal(t, b, reencode(st, recordVersion))
	}
}

// TestRecordKnownPolicy: a current record whose policy a Store already
// holds gets that policy without decoding it; any other is decoded as
// without known, and known is not asked about an older version's policy,
// whose encoding differs.
func TestRecordKnownPolicy(t *testing.T) {
	for _, r := range sampleRecords() {
		var asked []string
		known := func(enc []byte) *policy {
			asked = append(asked, string(enc))
			return r.pol
		}
		st, err := decodeRecord(testID, r.encode(), known)
		require.NoError(t, err)
		require.Equal(t, []string{r.pol.enc}, asked)
		require.Same(t, r.pol, st.pol)
		require.Zero(t, st.policy, "not decoded")
		want := r
		want.pol = st.pol
		require.Equal(t, want, st.record)

		none := func([]byte) *policy { return nil }
		st, err = decodeRecord(testID, r.encode(), none)
		require.NoError(t, err)
		require.Nil(t, st.pol)
		require.Equal(t, r.pol.pub, st.policy)

		if r.prev != nil || len(r.pol.pub.Windows) == 0 {
			continue // version 2 had no previous secret, and a window always
		}
		asked = nil
		st, err = decodeRecord(testID, r.encodeV2(), known)
		require.NoError(t, err)
		require.Empty(t, asked, "version 2")
		require.Nil(t, st.pol)
	}
}

// TestRecordV1 asserts that a version 1 record decodes to its fields, its
// token limit and its usage window.
func TestRecordV1(t *testing.T) {
	for _, r := range sampleV1(t) {
		b := r.encodeV1()
		st, err := decodeRecord(testID, b, nil)
		require.NoError(t, err)
		require.Equal(t, r.record, st.record)
		require.Equal(t, r.limit, st.v1Limit)
		require.Equal(t, string(r.window), string(st.v1Window))
		require.Zero(t, st.policy)
		require.Equal(t, b, reencode(st, recordV1))
	}
}

// TestRecordCorrupt asserts that damaged records are errors matching
// ErrCorrupt that name the key.
func TestRecordCorrupt(t *testing.T) {
	r := sampleRecords()[2]
	valid := r.encode() // 3, flags, hash, lifetime (1 byte), created (9 bytes), name, model, policy, spend (1 byte)
	const afterHash = 2 + 32
	edit := func(i int, b ...byte) []byte {
		return append(append(bytes.Clone(valid[:i]), b...), valid[i+len(b):]...)
	}
	withPol := func(p []byte) []byte {
		end := len(valid) - len(r.pol.enc) - 2
		return append(appendBytes(bytes.Clone(valid[:end]), string(p)), 0)
	}
	badWindowPolicy := func(w Window) []byte {
		return appendPolicy(nil, &Policy{Windows: []Window{w}})
	}
	v1 := sampleV1(t)[0]
	v1valid := v1.encodeV1()
	rotated := sampleRecords()[3].encode() // ..., spend, previous hash, previous end (9 bytes)
	v2prev := sampleRecords()[2].encodeV2()
	v2prev[1] |= flagPrevious
	v2prev = binary.AppendVarint(append(v2prev, rotated[len(rotated)-41:len(rotated)-9]...), 1)
	nameControl := append(append(bytes.Clone(valid[:afterHash+10]), 1, '\n', 0), valid[len(valid)-len(r.pol.enc)-1:]...)
	v2 := r.encodeV2() // ..., policy without budgets (its length 1 byte)
	v2NoWindow := appendBytes(bytes.Clone(v2[:len(v2)-len(r.pol.enc)]), "\x00\x00\x00\x00")
	for name, b := range map[string][]byte{
		"empty":               {},
		"version 0":           edit(0, 0),
		"version 4":           edit(0, 4),
		"unknown flag":        edit(1, flagPrevious<<1|flagCreated),
		"previous in v2":      v2prev,
		"cut in previous":     rotated[:len(rotated)-20],
		"cut in previous end": rotated[:len(rotated)-1],
		"previous, no fields": edit(1, flagPrevious|flagCreated),
		"cut in the hash":     valid[:20],
		"non-minimal":         edit(afterHash, 0x8c, 0x00),
		"lifetime overflow":   append(append(bytes.Clone(valid[:afterHash]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02), valid[afterHash+1:]...),
		"lifetime over int64": append(append(bytes.Clone(valid[:afterHash]), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), valid[afterHash+1:]...),
		"trailing":            append(bytes.Clone(valid), 0),
		"cut in the spend":    valid[:len(valid)-1],
		"cut in the policy":   append(bytes.Clone(valid[:len(valid)-2]), 0),
		"budget limit 0":      withPol(appendPolicy(nil, &Policy{Windows: samplePolicies[0].Windows, Budgets: []Budget{{Window: time.Hour, Bucket: time.Minute}}})),
		"budget kind 7":       withPol(append(append([]byte(r.pol.enc[:len(r.pol.enc)-1]), 1, 1), 7)),
		"budget zone unknown": withPol(append(append([]byte(r.pol.enc[:len(r.pol.enc)-1]), 1, 1), 1, 3, 3, 'N', 'o', '/')),
		"policy trailing":     withPol(append([]byte(r.pol.enc), 0)),
		"no window in v2":     v2NoWindow,
		"17 windows":          withPol(appendPolicy(nil, &Policy{Windows: make([]Window, MaxWindows+1)})),
		"zero limit":          withPol(badWindowPolicy(Window{Limit: 0, Window: time.Hour, Bucket: time.Minute})),
		"zero window":         withPol(badWindowPolicy(Window{Limit: 1, Window: 0, Bucket: time.Minute})),
		"zero bucket":         withPol(badWindowPolicy(Window{Limit: 1, Window: time.Hour, Bucket: 0})),
		"257 models":          withPol(appendPolicy(nil, &Policy{Windows: samplePolicies[0].Windows, Models: make([]string, MaxModels+1)})),
		"model pattern ctl":   withPol(appendPolicy(nil, &Policy{Windows: samplePolicies[0].Windows, Models: []string{"a\x01"}})),
		"max concurrent":      withPol(maxConcurrentPolicy(1 << 31)),
		"name too long":       append(bytes.Clone(valid[:afterHash+10]), 0x81, 0x02),
		"name control":        nameControl,
		"name not utf-8":      append(append(bytes.Clone(valid[:afterHash+10]), 1, 0xff, 0), valid[len(valid)-len(r.pol.enc)-1:]...),
		"v1 limit 0":          append(append(bytes.Clone(v1valid[:afterHash]), 0), v1valid[afterHash+3:]...),
		"v1 cut in window":    v1valid[:len(v1valid)-1],
		"v1 trailing":         append(bytes.Clone(v1valid), 0),
	} {
		_, err := decodeRecord(testID, b, nil)
		require.ErrorIs(t, err, strategies.ErrCorrupt, name)
		require.ErrorContains(t, err, testID, name)
	}
	// The first error, as it was, whatever is read after it.
	_, err := decodeRecord(testID, nameControl, nil)
	require.EqualError(t, err, "keystore: key "+testID+": record: name holds the control character U+000A: corrupt state")
}

// maxConcurrentPolicy is the encoding of a policy of one window whose
// concurrency cap is n.
func maxConcurrentPolicy(n uint64) []byte {
	p := appendPolicy(nil, &Policy{Windows: samplePolicies[0].Windows})
	p = p[:len(p)-2] // up to the requests per minute
	return append(binary.AppendUvarint(p, n), 0)
}

// FuzzDecodeRecord asserts that decoding never panics, that its errors
// match ErrCorrupt, and that what decodes encodes back to the same bytes
// (in its own version: 1, 2 or 3): the encoding is canonical.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(r.encode())
	}
	for _, r := range sampleV1(f) {
		f.Add(r.encodeV1())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeRecord(testID, b, nil)
		if err != nil {
			require.ErrorIs(t, err, strategies.ErrCorrupt)
			require.ErrorContains(t, err, testID)
			return
		}
		require.Equal(t, b, reencode(st, b[0]))
	})
}
