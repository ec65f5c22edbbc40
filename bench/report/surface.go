package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The operator's surface (bench/adminkeys_test.go, adminledger_test.go,
// adminsmall_test.go): the admin API as it is served, its names, the
// section of the report and the targets of DESIGN.md it checks ("Operator's
// surface"): at 1M keys a page of 100 keys, any sort or search, < 50 ms; a
// walk of every page at 10M keys in bounded heap (<= 64 MiB beyond the key
// store's own); the ledger's worst allowed query < 1 s at 10M entries, on
// bolt and on Redis; and nothing the operator does slower at 10 keys than
// at 786b47c, the commit before the surface was rebuilt.
const (
	surfacePageMs      = 50
	surfacePageKeys    = 1_000_000
	surfaceWalkMiB     = 64
	surfaceWalkKeys    = 10_000_000
	surfaceLedgerMs    = 1000
	surfaceLedgerCount = 10_000_000
	// surfaceSmallRatio is "not slower" on a shared machine: the median
	// within one invocation of the two sides, 10% for its noise.
	surfaceSmallRatio = 1.1
	surfaceBase       = "786b47c" // BenchmarkAdminSmall's baseline
	surfaceHead       = "head"
)

func surfacePageName(keys int, via, query string) string {
	return fmt.Sprintf("AdminKeysPage/keys=%d/via=%s/%s", keys, via, query)
}
func surfaceListName(keys int) string {
	return fmt.Sprintf("AdminKeysPage/keys=%d/impl=list+usage", keys)
}
func surfaceWalkName(keys int, cache string) string {
	return fmt.Sprintf("AdminKeysWalk/keys=%d/cache=%s", keys, cache)
}
func surfaceLedgerName(entries int, backend, q string) string {
	return fmt.Sprintf("AdminLedger/entries=%d/backend=%s/q=%s", entries, backend, q)
}
func surfaceSmallName(dur, op, impl string) string {
	return fmt.Sprintf("AdminSmall/dur=%s/op=%s/impl=%s", dur, op, impl)
}

// surfaceBackends are BenchmarkAdminLedger's backends; surfaceDurs
// BenchmarkAdminSmall's durabilities.
var (
	surfaceBackends = []string{"bolt", "redis"}
	surfaceDurs     = []string{"sync", "async"}
)

// suffixes is, in the order they first ran, what follows prefix in the
// names of the results that start with it: the queries of a family.
func (v *view) suffixes(prefix string) []string {
	var out []string
	for _, r := range v.Results {
		if s, ok := strings.CutPrefix(r.Name, prefix); ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// surfaceChecks are the operator's surface's targets.
func (v *view) surfaceChecks() []check {
	cs := []check{v.pageCheck(), v.walkCheck()}
	for _, backend := range surfaceBackends {
		cs = append(cs, v.ledgerCheck(backend))
	}
	for _, dur := range surfaceDurs {
		cs = append(cs, v.smallCheck(dur))
	}
	return cs
}

// pageCheck: the slowest first page of any query, either way served, at
// 1M keys.
func (v *view) pageCheck() check {
	c := check{id: "surface-page", what: fmt.Sprintf("GET /admin/keys?limit=100 at %s keys, any sort or search, in process "+
		"and over loopback: < %d ms", fmtInt(surfacePageKeys), surfacePageMs)}
	worst, where := 0.0, ""
	for _, via := range []string{"serve", "client"} {
		prefix := surfacePageName(surfacePageKeys, via, "")
		for _, q := range v.suffixes(prefix) {
			if ms, ok := v.any(prefix+q, "ms/page"); ok && ms >= worst {
				worst, where, c.ok = ms, q+", "+via, true
			}
		}
	}
	c.met = worst < surfacePageMs
	c.measured = fmt.Sprintf("slowest %s (%s)", fmtMs(worst), where)
	if ms, ok := v.any(surfaceListName(surfacePageKeys), "ms/page"); ok {
		c.measured += fmt.Sprintf("; the whole list before pages: %s", fmtMs(ms))
	}
	return c
}

// walkCheck: the heap a walk of every page at 10M keys adds beyond the key
// store's, with the engine's cache bounded low so that it is the walk's.
func (v *view) walkCheck() check {
	c := check{id: "surface-walk", what: fmt.Sprintf("a walk of every page of GET /admin/keys at %s keys: <= %d MiB of heap "+
		"beyond the key store's (the engine's cache bounded to 1024 states)", fmtInt(surfaceWalkKeys), surfaceWalkMiB)}
	own, ok := v.any(surfaceWalkName(surfaceWalkKeys, "1024"), "walk-heap-MiB")
	c.ok, c.met = ok, own <= surfaceWalkMiB
	c.measured = fmt.Sprintf("%.0f MiB", own)
	if all, ok := v.any(surfaceWalkName(surfaceWalkKeys, "default"), "walk-heap-MiB"); ok {
		states, _ := v.any(surfaceWalkName(surfaceWalkKeys, "default"), "cached-states-added")
		c.measured += fmt.Sprintf("; with the default cache %.0f MiB, the %s states it added included", all, fmtInt(int(states)))
	}
	return c
}

// ledgerCheck: the slowest of the worst allowed ledger queries on
// backend, at 10M entries.
func (v *view) ledgerCheck(backend string) check {
	c := check{id: "surface-ledger-" + backend, what: fmt.Sprintf("the worst allowed GET /admin/requests and /admin/spend at "+
		"%s entries, %s: each < 1 s", fmtInt(surfaceLedgerCount), backend)}
	prefix := surfaceLedgerName(surfaceLedgerCount, backend, "")
	worst, where, over := 0.0, "", 0
	for _, q := range v.suffixes(prefix) {
		if ms, ok := v.any(prefix+q, "ms/op"); ok {
			c.ok = true
			if ms >= surfaceLedgerMs {
				over++
			}
			if ms >= worst {
				worst, where = ms, q
			}
		}
	}
	c.met = over == 0
	c.measured = fmt.Sprintf("slowest %s (%s); %d of %d over 1 s", fmtMs(worst), where, over, len(v.suffixes(prefix)))
	return c
}

// smallCheck: every call at 10 keys against 786b47c's, within one
// invocation.
func (v *view) smallCheck(dur string) check {
	c := check{id: "surface-small-" + dur, what: fmt.Sprintf("the admin API at 10 keys, %s: every call within %.1f× of %s's "+
		"(create, get, list, patch, spend, requests, sign-in, a console GET)", dur, surfaceSmallRatio, surfaceBase)}
	worst, where := 0.0, ""
	var slower []string
	for _, op := range v.smallOps(dur) {
		r, _, _, ok := v.ix.ratio(surfaceSmallName(dur, op, surfaceHead), surfaceSmallName(dur, op, surfaceBase), 0, "ns/op")
		if !ok {
			continue
		}
		c.ok = true
		if r > surfaceSmallRatio {
			slower = append(slower, fmt.Sprintf("%s %.2f×", op, r))
		}
		if r >= worst {
			worst, where = r, op
		}
	}
	c.met = len(slower) == 0
	c.measured = fmt.Sprintf("slowest %s %.2f×", where, worst)
	if len(slower) > 0 {
		c.measured = "over: " + strings.Join(slower, ", ")
	}
	return c
}

// smallOps are BenchmarkAdminSmall's calls at durability dur, in the
// order they ran.
func (v *view) smallOps(dur string) []string {
	var ops []string
	for _, s := range v.suffixes(fmt.Sprintf("AdminSmall/dur=%s/op=", dur)) {
		if op, _, ok := strings.Cut(s, "/"); ok && !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops
}

// fmtMs formats milliseconds: "0.42 ms", "12.3 ms", "1.18 s".
func fmtMs(ms float64) string {
	switch {
	case ms >= 1000:
		return fmt.Sprintf("%.2f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.2f ms", ms)
}

// fmtTimes formats a summary of large ratios, whole: "12937×" or "12937×
// (9000–15000)".
func fmtTimes(med, lo, hi float64, ok bool) string {
	switch {
	case !ok:
		return "–"
	case lo == hi:
		return fmt.Sprintf("%.0f×", med)
	}
	return fmt.Sprintf("%.0f× (%.0f–%.0f)", med, lo, hi)
}

// fmtBytes formats a byte count: "512 B", "48.9 kB", "495.5 MB".
func fmtBytes(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", n/1e3)
	}
	return fmt.Sprintf("%.0f B", n)
}

// surfaceHeading is the heading of the operator's surface's section.
const surfaceHeading = "## Operator's surface (BenchmarkAdminKeysPage, BenchmarkAdminKeysWalk, BenchmarkAdminLedger, BenchmarkAdminSmall)"

// surface renders the operator's surface's section, if its families ran.
// A section rendered alone (SurfaceSection) says so in alone, and holds
// its targets, met or missed.
func (v *view) surface(b *strings.Builder, alone string) {
	if len(v.suffixes("Admin")) == 0 {
		return
	}
	b.WriteString(surfaceHeading + "\n\n")
	b.WriteString("The admin API as it is served: admin.New over the key store (and the ledger), its answers JSON. " +
		"Targets (DESIGN.md, \"Operator's surface\"): at 1M keys a page of 100 keys, any sort or search, < 50 ms; a walk " +
		"of every page at 10M keys in bounded heap (<= 64 MiB beyond the key store's own); the ledger's worst allowed " +
		"query < 1 s at 10M entries, on bolt and on Redis; and nothing the operator does slower at 10 keys than at " +
		"786b47c, the commit before the surface was rebuilt.\n\n")
	if alone != "" {
		b.WriteString(alone + "\n\n")
		checksTable(b, v.surfaceChecks(), "###")
	}
	v.surfaceRuns(b)
	v.pagesTable(b)
	v.walkTable(b)
	v.ledgerTables(b)
	v.smallTable(b)
}

// surfaceRuns names the invocations of the section's families and the
// load average when each began.
func (v *view) surfaceRuns(b *strings.Builder) {
	var runs []string
	seen := map[int]bool{}
	for _, r := range v.Results {
		if strings.HasPrefix(r.Family(), "Admin") && !seen[r.Run] {
			seen[r.Run] = true
			runs = append(runs, fmt.Sprintf("%s (run %d): %s", r.Family(), r.Run, cmp.Or(v.RunLoad[r.Run], "not recorded")))
		}
	}
	fmt.Fprintf(b, "Load average (1, 5, 15 min) as each invocation began: %s.\n\n", strings.Join(runs, "; "))
}

// pagesTable is BenchmarkAdminKeysPage's table, at its largest key count.
func (v *view) pagesTable(b *strings.Builder) {
	sizes := v.paramValues("AdminKeysPage", "keys")
	if len(sizes) == 0 {
		return
	}
	n := sizes[len(sizes)-1]
	fmt.Fprintf(b, "**A page of keys** (BenchmarkAdminKeysPage, %s keys: six in ten named Prod-API-…, one in 20,000 "+
		"Rare-…, a team of ~100 keys and one of n/20, one in 20 charged, one in 33 disabled, one in ten expiring "+
		"within 10 days either side of when the store was built). GET /admin/keys?limit=100 and the query, the first "+
		"page: *in process* is API.ServeHTTP writing the JSON answer; *loopback* is admin.Client.Keys over an httptest "+
		"server, the answer decoded. *× list* is the whole list before pages (keystore List and Usage of every key, "+
		"each converted, one JSON answer: what GET /admin/keys answered at 786b47c) over the page in process, within "+
		"one invocation. Target: < 50 ms at 1M keys.\n\n", fmtInt(n))
	t := &table{head: []string{"query", "in process", "keys", "answer", "loopback", "× list"}}
	for _, q := range v.suffixes(surfacePageName(n, "serve", "")) {
		name := surfacePageName(n, "serve", q)
		ms, _ := v.any(name, "ms/page")
		keys, _ := v.any(name, "keys/page")
		size, _ := v.any(name, "B/answer")
		client, _ := v.any(surfacePageName(n, "client", q), "ms/page")
		t.add(q, fmtMs(ms), fmt.Sprintf("%.0f", keys), fmtBytes(size), fmtMs(client),
			fmtTimes(v.ix.ratio(surfaceListName(n), name, 0, "ms/page")))
	}
	if ms, ok := v.any(surfaceListName(n), "ms/page"); ok {
		keys, _ := v.any(surfaceListName(n), "keys/page")
		size, _ := v.any(surfaceListName(n), "B/answer")
		alloc, _ := v.any(surfaceListName(n), "B/op")
		t.add(fmt.Sprintf("*the whole list (baseline), %s allocated*", fmtBytes(alloc)), fmtMs(ms), fmt.Sprintf("%.0f", keys),
			fmtBytes(size), "–", "–")
	}
	b.WriteString(t.String())
}

// walkTable is BenchmarkAdminKeysWalk's table, or why it is missing.
func (v *view) walkTable(b *strings.Builder) {
	b.WriteString("**A walk of every page** (BenchmarkAdminKeysWalk: GET /admin/keys?limit=1000, sort by name, following " +
		"next_cursor to the end, through API.ServeHTTP, each answer's ids and cursor decoded; the store of the page " +
		"benchmark's shape, opened again for each side). *walk heap* is the most heap in use the walk added to what it " +
		"started from, after a collection every 500 pages; *store heap* what the open key store held before it; " +
		"*states added* the engine states reading every key's usage brought into the engine's cache, bounded by " +
		"MaxCachedKeys: with the default cache (262,144) they are part of walk heap, with 1024 hardly; so the 1024 row " +
		"is the walk's own heap and the difference the bounded cache's. *page* is a page's mean time, the collections " +
		"left out. Target: <= 64 MiB beyond the key store's.\n\n")
	t := &table{head: []string{"keys", "cache", "walk heap", "store heap", "states added", "page", "pages", "allocated/page", "RSS after", "peak RSS"}}
	for _, n := range v.paramValues("AdminKeysWalk", "keys") {
		for _, cache := range []string{"default", "1024"} {
			name := surfaceWalkName(n, cache)
			m := func(unit, format string) string {
				if x, ok := v.any(name, unit); ok {
					return fmt.Sprintf(format, x)
				}
				return "–"
			}
			if _, ok := v.any(name, "walk-heap-MiB"); ok {
				t.add(fmtInt(n), cache, m("walk-heap-MiB", "%.0f MiB"), m("store-heap-MiB", "%.0f MiB"),
					m("cached-states-added", "%.0f"), m("page-ms", "%.1f ms"), m("pages", "%.0f"), m("B/page", "%.0f B"),
					m("rss-MiB", "%.0f MiB"), m("hwm-MiB", "%.0f MiB"))
			}
		}
	}
	if len(t.rows) == 0 {
		t.add("not run (RATESTORE_BENCH_10M=1: `go run ./report -full`)", "–", "–", "–", "–", "–", "–", "–", "–", "–")
	}
	b.WriteString(t.String())
}

// ledgerTables is BenchmarkAdminLedger's table, one per entry count.
func (v *view) ledgerTables(b *strings.Builder) {
	counts := v.paramValues("AdminLedger", "entries")
	if len(counts) == 0 {
		return
	}
	b.WriteString("**The ledger's worst queries** (BenchmarkAdminLedger: 100k keys in 100 teams, 50 models, the entries " +
		"spread over 90 days; API.ServeHTTP over a ledger opened read-only at the last day; *redis* is the same records " +
		"copied into a redis-server on loopback, read through redisstore's index of records). Requests: 1000 entries " +
		"(the most a page holds) from the retention's start to now + 1 day; spend: 1000 groups (the most) over 3660 " +
		"days (the most) to now + 1 day, and by hour, which reads the entries, over the last 24 hours of entries (the most). *reads* are the " +
		"records the query read, *rows* the entries or rows answered. Target: < 1 s each at 10M entries, on both.\n\n")
	for _, n := range counts {
		fmt.Fprintf(b, "%s entries:\n\n", fmtInt(n))
		t := &table{head: []string{"query", "bolt", "reads", "redis", "reads", "rows", "answer"}}
		for _, q := range v.suffixes(surfaceLedgerName(n, "bolt", "")) {
			row := []string{q}
			for _, backend := range surfaceBackends {
				name := surfaceLedgerName(n, backend, q)
				ms, ok := v.any(name, "ms/op")
				reads, _ := v.any(name, "reads/op")
				if !ok {
					row = append(row, "–", "–")
					continue
				}
				row = append(row, fmtMs(ms), strconv.FormatFloat(reads, 'f', 0, 64))
			}
			rows, _ := v.any(surfaceLedgerName(n, "bolt", q), "rows")
			size, _ := v.any(surfaceLedgerName(n, "bolt", q), "B/answer")
			t.add(append(row, fmt.Sprintf("%.0f", rows), fmtBytes(size))...)
		}
		b.WriteString(t.String())
	}
}

// smallTable is BenchmarkAdminSmall's table: each call at head and at
// 786b47c, and their ratio within one invocation.
func (v *view) smallTable(b *strings.Builder) {
	if len(v.smallOps("sync"))+len(v.smallOps("async")) == 0 {
		return
	}
	b.WriteString("**At 10 keys, against " + surfaceBase + "** (BenchmarkAdminSmall: the handler of a gateway's port as " +
		"`ratestore gateway` builds it, served in process, one call at a time, on a store of 10 keys with 10 requests " +
		"each in the ledger. *head* is the console guarding the admin API, with the audit log and the sessions kept " +
		"in the store; *786b47c* is gateway.New with an AdminToken, which served the same routes itself, sessions in " +
		"memory, no audit log: its test binary is built from that commit with `go run ./report -base786`, and both run " +
		"in the same invocation, the baseline first; signin is run apart, 5000 sign-ins an invocation, since past the " +
		"console's 10,000 sessions head's sign-in forgets the oldest by a scan of the store that takes longer the more " +
		"changes are not yet checkpointed, see bench/README.md). *×* is head's time over 786b47c's within one invocation, median " +
		"(lowest–highest). Target: every call within 1.1× (not slower, but for the noise of a shared machine).\n\n")
	t := &table{head: []string{"durability", "call", surfaceBase, "allocs", "head", "allocs", "×"}}
	for _, dur := range surfaceDurs {
		for _, op := range v.smallOps(dur) {
			base, head := surfaceSmallName(dur, op, surfaceBase), surfaceSmallName(dur, op, surfaceHead)
			bns, _ := v.any(base, "ns/op")
			hns, _ := v.any(head, "ns/op")
			ba, bok := v.any(base, "allocs/op")
			ha, _ := v.any(head, "allocs/op")
			allocs := "–"
			if bok {
				allocs = fmt.Sprintf("%.0f", ba)
			}
			t.add(dur, op, fmtNs(bns), allocs, fmtNs(hns), fmt.Sprintf("%.0f", ha), v.ratio(head, base, 0, "ns/op"))
		}
	}
	b.WriteString(t.String())
}

// SurfaceSection is the operator's surface's section alone, rendered from a
// run of its families only (go run ./report -section surface -from FILE),
// with its targets; alone says so, and how it was run.
func SurfaceSection(rep *Report, alone string) string {
	var b strings.Builder
	newView(rep).surface(&b, alone)
	return b.String()
}

// spliceSection puts section, which begins with its "## " heading, in
// place of the section of doc with that heading (up to the next "## "
// heading), or, if doc has none, before the heading before, or at the end.
func spliceSection(doc, section, before string) string {
	heading, _, _ := strings.Cut(section, "\n")
	if i := strings.Index(doc, heading+"\n"); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+len(heading):], "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		return doc[:i] + section + doc[end:]
	}
	if i := strings.Index(doc, before); i >= 0 && (i == 0 || doc[i-1] == '\n') {
		return doc[:i] + section + doc[i:]
	}
	return doc + "\n" + section
}
