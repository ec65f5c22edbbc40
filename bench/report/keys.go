package main

import (
	"fmt"
	"strings"
)

// The key store's benchmarks (bench/keys_test.go): their names, the
// section of the report and the DESIGN.md targets they check.

// keysWindows are BenchmarkKeysCheck's legacy window counts.
var keysWindows = []int{10, 10_000, 100_000}

// The key store's sides, baseline first.
const (
	keysCheckRecord  = "KeysAdmitFinish/impl=check+record"
	keysAdmitFinish  = "KeysAdmitFinish/impl=admit+finish"
	keysSyncLimiter  = "KeysSyncRecord/impl=limiter-record/callers=64"
	keysSyncKeystore = "KeysSyncRecord/impl=keystore/callers=64"
	keysMemory       = "KeysMemory/keys=100000"
)

func keysCheckName(impl string, windows int) string {
	return fmt.Sprintf("KeysCheck/impl=%s/windows=%d", impl, windows)
}

// keyChecks are the DESIGN.md targets of the key store ("Targets added with
// the key store"), then those of the scale benchmarks (scale.go), which
// come in here because checks, in targets.go, calls this one.
func (v *view) keyChecks() []check {
	return append(v.keyStoreChecks(), v.scaleChecks()...)
}

// keyStoreChecks are the key store's targets.
func (v *view) keyStoreChecks() []check {
	var cs []check
	ks := func(n int) string { return keysCheckName("keystore", n) }

	a, b := ks(100_000), ks(10)
	flat, _, _, ok := v.ix.ratio(a, b, 0, "ns/op")
	cs = append(cs, check{id: "keys-flat", what: "key check: 100k legacy windows over 10 <= 1.2",
		measured: v.ratio(a, b, 0, "ns/op"), ok: ok, met: flat <= 1.2})

	a, b = keysCheckName("legacy", 10_000), ks(10_000)
	x, _, _, ok := v.ix.ratio(a, b, 0, "ns/op")
	measured := v.ratio(a, b, 0, "ns/op")
	if _, _, _, ok100k := v.ix.ratio(keysCheckName("legacy", 100_000), ks(100_000), 0, "ns/op"); ok100k {
		measured += "; at 100k windows " + v.ratio(keysCheckName("legacy", 100_000), ks(100_000), 0, "ns/op")
	}
	cs = append(cs, check{id: "keys-x-legacy", what: "key check: >= 100× the legacy filter-and-sum at 10k windows",
		measured: measured, ok: ok, met: x >= 100})

	worstAllocs, allocsOK := 0.0, false
	for _, n := range keysWindows {
		if al, ok := v.any(ks(n), "allocs/op"); ok {
			worstAllocs, allocsOK = max(worstAllocs, al), true
		}
	}
	cs = append(cs, check{id: "keys-allocs", what: "key check: <= 2 allocations",
		measured: fmt.Sprintf("%.0f allocs", worstAllocs), ok: allocsOK, met: worstAllocs <= 2})

	// The largest of the medians over the window counts.
	var worst float64
	var parts []string
	peekOK := false
	for _, n := range keysWindows {
		r, _, _, ok := v.ix.ratio(ks(n), keysCheckName("sha256+peek", n), 0, "ns/op")
		if ok {
			worst, peekOK = max(worst, r), true
			parts = append(parts, fmtInt(n)+" windows "+v.ratio(ks(n), keysCheckName("sha256+peek", n), 0, "ns/op"))
		}
	}
	cs = append(cs, check{id: "keys-vs-peek", what: "key check: within 2× of sha256 + one Limiter.Peek",
		measured: strings.Join(parts, ", "), ok: peekOK, met: worst <= 2})

	r, _, _, ok := v.ix.ratio(keysAdmitFinish, keysCheckRecord, 0, "ns/op")
	cs = append(cs, check{id: "keys-admit", what: "Admit + Finish <= 2× Check + RecordUsage (one key, Async)",
		measured: v.ratio(keysAdmitFinish, keysCheckRecord, 0, "ns/op"), ok: ok, met: r <= 2})

	r, _, _, ok = v.ix.ratio(keysSyncKeystore, keysSyncLimiter, 0, "ns/op")
	rate, _ := v.any(keysSyncKeystore, "decisions/s")
	cs = append(cs, check{id: "keys-sync", what: "Sync bolt, 64 callers: RecordUsage within 1.5× of Limiter.Record (time per record)",
		measured: fmt.Sprintf("%s, %s", v.ratio(keysSyncKeystore, keysSyncLimiter, 0, "ns/op"), fmtRate(rate)), ok: ok, met: r <= 1.5})

	perKey, ok := v.any(keysMemory, "B/key")
	strs, _ := v.any(keysMemory, "strings-B/key")
	cs = append(cs, check{id: "keys-memory", what: "memory per loaded key: <= 300 B plus its strings (100k keys)",
		measured: fmt.Sprintf("%.0f B + %.0f B of strings (id, name)", perKey-strs, strs), ok: ok, met: perKey-strs <= 300})
	return cs
}

// keys renders the key store's section, if its families ran, then the
// Scale section (scale.go), which Render, in render.go, reaches through
// this call.
func (v *view) keys(b *strings.Builder) {
	v.keyStore(b)
	v.scale(b)
}

func (v *view) keyStore(b *strings.Builder) {
	if _, ok := v.any(keysCheckName("keystore", 10), "ns/op"); !ok {
		if _, ok := v.any(keysMemory, "B/key"); !ok {
			return // the family did not run
		}
	}
	b.WriteString("## Key store (BenchmarkKeysCheck, BenchmarkKeysAdmitFinish, BenchmarkKeysSyncRecord, BenchmarkKeysMemory)\n\n")
	b.WriteString("**Check.** keystore.Store.Check (authenticate the secret, then the key's token window) on one key " +
		"whose n legacy usage windows were imported and migrated, Async bbolt, the system clock. *legacy* is the " +
		"O(n) filter-and-sum over the same windows (no authentication); *sha256 + peek* is sha256 of the secret and " +
		"one Limiter.Peek of a rolling window holding the same history. *x legacy* is legacy's time over the key " +
		"store's, *vs sha256 + peek* the key store's over that baseline's, both within one invocation. Targets: flat " +
		"(100k over 10 <= 1.2), >= 100× legacy at 10k windows, <= 2 allocs, <= 2× sha256 + peek.\n\n")
	t := &table{head: []string{"windows", "legacy", "sha256 + peek", "keystore Check", "allocs", "x legacy", "vs sha256 + peek"}}
	for _, n := range keysWindows {
		legacy, _ := v.any(keysCheckName("legacy", n), "ns/op")
		peek, _ := v.any(keysCheckName("sha256+peek", n), "ns/op")
		ours, ok := v.any(keysCheckName("keystore", n), "ns/op")
		if !ok {
			continue
		}
		allocs, _ := v.any(keysCheckName("keystore", n), "allocs/op")
		t.add(fmtInt(n), fmtNs(legacy), fmtNs(peek), fmtNs(ours), fmt.Sprintf("%.0f", allocs),
			v.ratio(keysCheckName("legacy", n), keysCheckName("keystore", n), 0, "ns/op"),
			v.ratio(keysCheckName("keystore", n), keysCheckName("sha256+peek", n), 0, "ns/op"))
	}
	b.WriteString(t.String())
	v.keyRecords(b)
	v.keyMemory(b)
}

// keyRecords is the key store's table of a request's life (Admit +
// Finish) and of fsynced records, each against its baseline.
func (v *view) keyRecords(b *strings.Builder) {
	b.WriteString("**A request's life, and fsynced records.** Admit (reserving 100 tokens) + Finish (charging 37) " +
		"against Check + RecordUsage of 37, one key, Async bbolt (target <= 2×); RecordUsage against the engine's " +
		"Limiter.Record of the same rolling window, Sync bbolt, 64 callers on 64 keys (target <= 1.5× the time per " +
		"record). *x* is the row's time over its baseline's (the row above it), within one invocation.\n\n")
	t := &table{head: []string{"benchmark", "ns/op", "records/s", "p50 / p99", "allocs", "x"}}
	for _, r := range []struct{ label, name, base string }{
		{"Check + RecordUsage", keysCheckRecord, ""},
		{"Admit + Finish", keysAdmitFinish, keysCheckRecord},
		{"Limiter.Record, Sync, 64 callers", keysSyncLimiter, ""},
		{"RecordUsage, Sync, 64 callers", keysSyncKeystore, keysSyncLimiter},
	} {
		ns, ok := v.any(r.name, "ns/op")
		if !ok {
			continue
		}
		allocs, _ := v.any(r.name, "allocs/op")
		rate, lat := "–", "–"
		if x, ok := v.any(r.name, "decisions/s"); ok {
			p50, _ := v.any(r.name, "p50-us")
			p99, _ := v.any(r.name, "p99-us")
			rate, lat = fmtRate(x), fmtNs(p50*1e3)+" / "+fmtNs(p99*1e3)
		}
		x := "–"
		if r.base != "" {
			x = v.ratio(r.name, r.base, 0, "ns/op")
		}
		t.add(r.label, fmtNs(ns), rate, lat, fmt.Sprintf("%.0f", allocs), x)
	}
	b.WriteString(t.String())
}

// keyMemory is BenchmarkKeysMemory's paragraph, if it ran.
func (v *view) keyMemory(b *strings.Builder) {
	if perKey, ok := v.any(keysMemory, "B/key"); ok {
		live, _ := v.any(keysMemory, "live-B/key")
		strs, _ := v.any(keysMemory, "strings-B/key")
		load, _ := v.any(keysMemory, "ns/op")
		fmt.Fprintf(b, "**Memory.** 100k keys imported, the database reopened, then keystore.Open loads every key "+
			"record and the index of secret hashes: %.0f B of heap in use per key (%.0f B of live objects), of which "+
			"%.0f B are the bytes of its strings (id and name; no model), in %s. Target: <= 300 B per key plus its "+
			"strings.\n\n", perKey, live, strs, fmtNs(load))
	}
}
