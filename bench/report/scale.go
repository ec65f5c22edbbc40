package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The scale benchmarks (bench/scale_test.go, and BenchmarkPeers at its
// largest key count): does a decision cost the same at 10 million keys as
// at 10 thousand? Their names, the report's Scale section and the targets
// it checks.

// The scale targets: ratestore's time over its baseline's, within one
// invocation, and the heap per key at 10M keys beyond the key's bytes.
const (
	steadyMax     = 1.3 // over the fastest in-memory peer, at 1M and 10M keys
	firstTouchMax = 1.5 // over x/time/rate's new key
	missMax       = 1.5 // over one raw bbolt View + Get
	scaleHeapMax  = 160 // B of heap per key, plus the key's bytes
)

// The ratestore sides checked for the steady state, BenchmarkScale's
// sides, and the cells (GOMAXPROCS, key choice) of both.
var (
	asyncImpls = []string{"ratestore-async-bolt", "ratestore-async-badger"}
	scalePeers = []string{"xrate", "golimiter"} // BenchmarkScale's baselines
	scaleOurs  = "ratestore-async-bolt"
	procsList  = []int{1, 2}
	distList   = []string{"uniform", "zipf"}
)

// The sides of BenchmarkFirstTouch and BenchmarkMiss, baseline first.
const (
	firstTouchXrate = "FirstTouch/impl=xrate"
	firstTouchOurs  = "FirstTouch/impl=ratestore-async-bolt"
	missBase        = "bolt-view-get"
	missOurs        = "ratestore-async-bolt"
)

func missName(keys int, impl string) string { return fmt.Sprintf("Miss/keys=%d/impl=%s", keys, impl) }
func scaleName(keys int, dist, impl string) string {
	return fmt.Sprintf("Scale/keys=%d/dist=%s/impl=%s", keys, dist, impl)
}

// familyKeys is the largest key count of the results of family fam, 0
// where it did not run.
func (v *view) familyKeys(fam string) int {
	ks := v.paramValues(fam, "keys")
	if len(ks) == 0 {
		return 0
	}
	return ks[len(ks)-1]
}

// steadyKeys is BenchmarkPeers' largest key count, the one measured in its
// steady state, or 0 where only the cheap counts (up to 10k) ran.
func (v *view) steadyKeys() int {
	if v.bigKeys > 10_000 {
		return v.bigKeys
	}
	return 0
}

// orDefault is n, or def where n is 0 (the stage did not run): the key
// count a label names.
func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// ratioToBest is a's unit over the lowest of bs' in the same invocation,
// then summarized over invocations: ratestore against whichever peer was
// fastest in its run.
func (ix index) ratioToBest(a string, bs []string, procs int, unit string) (med, lo, hi float64, ok bool) {
	var vs []float64
	for _, ra := range ix[key(a, procs)] {
		va, oka := ra.Metrics[unit]
		best := math.Inf(1)
		for _, b := range bs {
			for _, rb := range ix[key(b, procs)] {
				if vb, okb := rb.Metrics[unit]; okb && rb.Run == ra.Run && vb > 0 {
					best = min(best, vb)
				}
			}
		}
		if oka && !math.IsInf(best, 1) {
			vs = append(vs, va/best)
		}
	}
	return summarize(vs)
}

// fastest is the result among names with the lowest median ns/op at procs,
// formatted "golimiter 525 ns", or "not run".
func (v *view) fastest(names []string, procs int) string {
	best, bestNs := "", math.Inf(1)
	for _, n := range names {
		if ns, ok := v.ix.median(n, procs, "ns/op"); ok && ns < bestNs {
			best, bestNs = n, ns
		}
	}
	if best == "" {
		return "not run"
	}
	return implOf(best) + " " + fmtNs(bestNs)
}

// implOf is the impl of a result's name: "xrate" for "FirstTouch/impl=xrate".
func implOf(name string) string { return Result{Name: name}.Param("impl") }

// peerNamesAt are BenchmarkPeers' in-memory peers at keys and dist.
func peerNamesAt(keys int, dist string) []string {
	var ns []string
	for _, p := range peerNames {
		ns = append(ns, peerName(keys, dist, p))
	}
	return ns
}

// scaleChecks are the targets of the scale issue: the steady state at 1M
// keys per backend, first touch, miss, and the steady state and memory at
// 10M keys.
func (v *view) scaleChecks() []check {
	cs := []check{v.steadyCheck(asyncImpls[0]), v.steadyCheck(asyncImpls[1])}

	r, _, _, ok := v.ix.ratio(firstTouchOurs, firstTouchXrate, 0, "ns/op")
	ours, _ := v.any(firstTouchOurs, "ns/op")
	base, _ := v.any(firstTouchXrate, "ns/op")
	cs = append(cs, check{id: "first-touch", what: fmt.Sprintf("first touch of a key, Async bolt: <= %.1f× x/time/rate's "+
		"map insert + NewLimiter + Allow (same run)", firstTouchMax),
		measured: fmt.Sprintf("%s (%s against %s)", v.ratio(firstTouchOurs, firstTouchXrate, 0, "ns/op"), fmtNs(ours), fmtNs(base)),
		ok:       ok, met: r <= firstTouchMax})

	n := v.familyKeys("Miss")
	a, b := missName(n, missOurs), missName(n, missBase)
	r, _, _, ok = v.ix.ratio(a, b, 0, "ns/op")
	ours, _ = v.any(a, "ns/op")
	base, _ = v.any(b, "ns/op")
	cs = append(cs, check{id: "miss", what: fmt.Sprintf("miss (a stored key not in memory, %s keys, cache of 1024), Async bolt: "+
		"<= %.1f× one raw bbolt View + Get of it (same run)", fmtInt(orDefault(n, 1_000_000)), missMax),
		measured: fmt.Sprintf("%s (%s against %s)", v.ratio(a, b, 0, "ns/op"), fmtNs(ours), fmtNs(base)),
		ok:       ok, met: r <= missMax})
	n = v.familyKeys("Scale")
	name := func(dist, impl string) string { return scaleName(n, dist, impl) }
	return append(cs, v.vsFastestCheck("steady-10m", n, 10_000_000, name, scalePeers, scaleOurs), v.scaleMemoryCheck())
}

// steadyCheck is the target of the steady state at BenchmarkPeers' largest
// key count for the ratestore side impl.
func (v *view) steadyCheck(impl string) check {
	keys := v.steadyKeys()
	name := func(dist, impl string) string { return peerName(keys, dist, impl) }
	return v.vsFastestCheck("steady-"+strings.TrimPrefix(impl, "ratestore-async-"), keys, 1_000_000, name, peerNames, impl)
}

// vsFastestCheck is a steady-state target at keys keys (0: not run; def
// names the count in the label): the result name(dist, impl) within
// steadyMax of the fastest of peers in the same invocation, for every key
// choice and GOMAXPROCS measured.
func (v *view) vsFastestCheck(id string, keys, def int, name func(dist, impl string) string, peers []string, impl string) check {
	c := check{id: id, met: true,
		what: fmt.Sprintf("%s keys, steady state: %s <= %.1f× the fastest in-memory peer (same run; each key choice and GOMAXPROCS)",
			fmtInt(orDefault(keys, def)), impl, steadyMax)}
	var parts []string
	for _, dist := range distList {
		var peerRes []string
		for _, p := range peers {
			peerRes = append(peerRes, name(dist, p))
		}
		for _, procs := range procsList {
			med, lo, hi, ok := v.ix.ratioToBest(name(dist, impl), peerRes, procs, "ns/op")
			if keys == 0 || !ok {
				continue
			}
			c.ok, c.met = true, c.met && med <= steadyMax
			parts = append(parts, fmt.Sprintf("%s/%d %s", dist, procs, fmtSpread(med, lo, hi, ok)))
		}
	}
	c.measured = strings.Join(parts, ", ")
	return c
}

// scaleMemoryCheck is the target of memory at BenchmarkScale's key count:
// ratestore's heap per key within scaleHeapMax plus the key's bytes.
func (v *view) scaleMemoryCheck() check {
	n := v.familyKeys("Scale")
	m, ok := v.scaleMemory(n, scaleOurs)
	return check{id: "scale-memory", what: fmt.Sprintf("memory at %s keys, Async bolt, every key in memory: <= %d B of heap per key plus the key's bytes",
		fmtInt(orDefault(n, 10_000_000)), scaleHeapMax),
		measured: fmt.Sprintf("%.0f B + %.0f B of key (RSS %.0f B per key)", m.heap-m.key, m.key, m.rss), ok: ok, met: m.heap <= scaleHeapMax+m.key}
}

// memPerKey is BenchmarkScale's memory per key of one side, in bytes: the
// heap, the key, the resident set and its file-backed part (ok false: not
// reported, by a run before the metric).
type memPerKey struct {
	heap, key, rss, file float64
	fileOK               bool
}

// scaleMemory is BenchmarkScale's memory per key of impl at n keys, each
// figure the median over the runs of either key choice (both report the
// same measurement of the side).
func (v *view) scaleMemory(n int, impl string) (m memPerKey, ok bool) {
	for _, dist := range distList {
		name := scaleName(n, dist, impl)
		if m.heap, ok = v.any(name, "heap-B/key"); ok {
			m.key, _ = v.any(name, "key-B/key")
			m.rss, _ = v.any(name, "rss-B/key")
			m.file, m.fileOK = v.any(name, "rss-file-B/key")
			return m, true
		}
	}
	return memPerKey{}, false
}

// scale is the report's Scale section: every table says "not run" for what
// is absent from the raw output, so that the section keeps its shape.
func (v *view) scale(b *strings.Builder) {
	b.WriteString("## Scale: the steady state at 1M and 10M keys, first touch, miss (BenchmarkPeers, BenchmarkScale, " +
		"BenchmarkFirstTouch, BenchmarkMiss)\n\n")
	b.WriteString("Does a decision cost the same at 10 million keys as at 10 thousand? Every ratio is ratestore's time over " +
		"its baseline's within one invocation (median, lowest–highest over invocations). *vs fastest* is against the " +
		"fastest in-memory peer of the same invocation. Targets: steady state at 1M and 10M keys <= 1.3× the fastest peer, " +
		"first touch <= 1.5× x/time/rate's, miss <= 1.5× a raw bbolt read, <= 160 B of heap per key plus the key's " +
		"bytes at 10M keys.\n\n")
	v.steadyTable(b)
	v.scaleTable(b)
	v.scaleMemoryTable(b)
	v.firstTouchTable(b)
	v.missTable(b)
	v.storeWriteTable(b)
}

// storeWriteTable is BenchmarkStoreWrite: the store's work per dirty key
// at each size of file, against the smallest.
func (v *view) storeWriteTable(b *strings.Builder) {
	b.WriteString("**Store writes per dirty key** (BenchmarkStoreWrite: commits of 1024 random keys and a Sync, as " +
		"the committer makes them, into bbolt files of each size, the checkpoints they start and the final Close " +
		"included; *CPU* counts every goroutine of the process: the caller, the background checkpoints, the GC).\n\n")
	t := &table{head: []string{"file keys", "ns/key", "CPU ns/key", "CPU vs the smallest"}}
	sizes := v.paramValues("StoreWrite", "keys")
	if len(sizes) == 0 {
		t.add("not run", "–", "–", "–")
	}
	name := func(n int) string { return fmt.Sprintf("StoreWrite/keys=%d", n) }
	for _, n := range sizes {
		ns, _ := v.any(name(n), "ns/key")
		cpu, _ := v.any(name(n), "cpu-ns/key")
		t.add(fmtInt(n), fmtNs(ns), fmtNs(cpu), v.ratio(name(n), name(sizes[0]), 0, "cpu-ns/key"))
	}
	b.WriteString(t.String())
}

// paramValues is the values of the integer parameter param among family
// fam's results, in increasing order.
func (v *view) paramValues(fam, param string) []int {
	var ns []int
	for _, r := range v.Results {
		if n, err := strconv.Atoi(r.Param(param)); r.Family() == fam && err == nil {
			ns = append(ns, n)
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// steadyTable is ratestore-async at BenchmarkPeers' largest key count
// against the fastest peer, per key choice and GOMAXPROCS.
func (v *view) steadyTable(b *strings.Builder) {
	keys := v.steadyKeys()
	fmt.Fprintf(b, "**Steady state, %s keys** (BenchmarkPeers: every key created, an untimed pass of up to 2^20 decisions, "+
		"then %s timed decisions per sub-benchmark; the Peers section has every row).\n\n", fmtInt(orDefault(keys, 1_000_000)),
		fmtInt(orDefault(int(v.timedDecisions("Peers", keys)), 5_000_000)))
	t := &table{head: []string{"key choice", "GOMAXPROCS", "fastest peer"}}
	for _, impl := range asyncImpls {
		t.head = append(t.head, impl, "allocs", "vs fastest")
	}
	for _, dist := range distList {
		for _, procs := range procsList {
			row := []string{dist, strconv.Itoa(procs), "not run"}
			if keys > 0 {
				row[2] = v.fastest(peerNamesAt(keys, dist), procs)
			}
			for _, impl := range asyncImpls {
				row = append(row, v.vsBest(peerName(keys, dist, impl), peerNamesAt(keys, dist), procs, keys > 0)...)
			}
			t.add(row...)
		}
	}
	b.WriteString(t.String())
}

// timedDecisions is the largest b.N of family fam's results at keys keys,
// 0 if none ran.
func (v *view) timedDecisions(fam string, keys int) int64 {
	var n int64
	for _, r := range v.Results {
		if r.Family() == fam && r.Param("keys") == strconv.Itoa(keys) {
			n = max(n, r.Iters)
		}
	}
	return n
}

// vsBest is the cells of one ratestore side against the fastest of peers:
// ns/op, allocs, ratio; "not run" where it did not.
func (v *view) vsBest(name string, peers []string, procs int, ran bool) []string {
	ns, ok := v.ix.median(name, procs, "ns/op")
	if !ran || !ok {
		return []string{"not run", "–", "–"}
	}
	allocs, _ := v.ix.median(name, procs, "allocs/op")
	return []string{fmtNs(ns), fmtAllocs(allocs), fmtSpread(v.ix.ratioToBest(name, peers, procs, "ns/op"))}
}

// scaleTable is BenchmarkScale's time per decision.
func (v *view) scaleTable(b *strings.Builder) {
	n := v.familyKeys("Scale")
	fmt.Fprintf(b, "**Steady state, %s keys** (BenchmarkScale, run by `go run ./report -full`: the same workload with "+
		"the two fastest peers, a key sequence of one index per key, %s timed decisions per sub-benchmark).\n\n",
		fmtInt(orDefault(n, 10_000_000)), fmtInt(orDefault(int(v.timedDecisions("Scale", n)), 5_000_000)))
	t := &table{head: []string{"key choice", "GOMAXPROCS"}}
	t.head = append(append(t.head, scalePeers...), scaleOurs, "allocs", "vs fastest")
	for _, dist := range distList {
		for _, procs := range procsList {
			row := []string{dist, strconv.Itoa(procs)}
			var peers []string
			for _, p := range scalePeers {
				peers = append(peers, scaleName(n, dist, p))
				cell := "not run"
				if ns, ok := v.ix.median(scaleName(n, dist, p), procs, "ns/op"); ok && n > 0 {
					cell = fmtNs(ns)
				}
				row = append(row, cell)
			}
			t.add(append(row, v.vsBest(scaleName(n, dist, scaleOurs), peers, procs, n > 0)...)...)
		}
	}
	b.WriteString(t.String())
}

// scaleMemoryTable is BenchmarkScale's memory per key, every side.
func (v *view) scaleMemoryTable(b *strings.Builder) {
	b.WriteString("**Memory per key** (BenchmarkScale: what building the side with every key added, after a GC: the Go " +
		"heap in use, and the resident set; *of it, file* is the resident set's file-backed part, ratestore's pages of " +
		"the mapped bbolt file, which the kernel may drop; *key* is the key's length, bytes the caller already holds " +
		"and x/time/rate's map shares).\n\n")
	t := &table{head: []string{"impl", "heap B/key", "RSS B/key", "of it, file", "key B", "heap beyond the key"}}
	n := v.familyKeys("Scale")
	for _, impl := range append(slices.Clone(scalePeers), scaleOurs) {
		m, ok := v.scaleMemory(n, impl)
		if !ok {
			t.add(impl, "not run", "–", "–", "–", "–")
			continue
		}
		file := "–"
		if m.fileOK {
			file = fmt.Sprintf("%.0f", m.file)
		}
		t.add(impl, fmt.Sprintf("%.0f", m.heap), fmt.Sprintf("%.0f", m.rss), file, fmt.Sprintf("%.0f", m.key), fmt.Sprintf("%.0f", m.heap-m.key))
	}
	b.WriteString(t.String())
}

// firstTouchTable is BenchmarkFirstTouch.
func (v *view) firstTouchTable(b *strings.Builder) {
	b.WriteString("**First touch** (BenchmarkFirstTouch: one goroutine, every decision on a key never seen before; " +
		"ratestore Async on an empty bbolt file with a cache that holds them all; *loads* is the share of decisions " +
		"that read the store).\n\n")
	v.sideTable(b, []string{firstTouchXrate, firstTouchOurs})
}

// missTable is BenchmarkMiss.
func (v *view) missTable(b *strings.Builder) {
	n := v.familyKeys("Miss")
	fmt.Fprintf(b, "**Miss** (BenchmarkMiss: %s keys stored, one goroutine, keys in uniform random order; ratestore "+
		"Async with a cache of 1024 keys, so that nearly every decision loads its key and evicts another, and writes "+
		"the state it changed; the baseline is one bbolt View + Get of the key on the same file).\n\n",
		fmtInt(orDefault(n, 1_000_000)))
	v.sideTable(b, []string{missName(n, missBase), missName(n, missOurs)})
}

// sideTable is a baseline (the first name) and ratestore: ns/op, allocs,
// B/op, loads and evictions per decision, and ratestore's time over the
// baseline's.
func (v *view) sideTable(b *strings.Builder, names []string) {
	t := &table{head: []string{"impl", "ns/op", "allocs", "B/op", "loads", "evictions", "x"}}
	for i, name := range names {
		impl := implOf(name)
		ns, ok := v.any(name, "ns/op")
		if !ok {
			t.add(impl, "not run", "–", "–", "–", "–", "–")
			continue
		}
		m := func(unit string) string {
			if x, ok := v.any(name, unit); ok {
				return fmtAllocs(x)
			}
			return "–"
		}
		x := "–"
		if i > 0 {
			x = v.ratio(name, names[0], 0, "ns/op")
		}
		t.add(impl, fmtNs(ns), m("allocs/op"), m("B/op"), m("loads/op"), m("evictions/op"), x)
	}
	b.WriteString(t.String())
}

// fmtAllocs formats a count per operation: "3", or "0.63" when it is not
// whole (the committer's allocations spread over many decisions).
func fmtAllocs(x float64) string {
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.2f", x)
}
