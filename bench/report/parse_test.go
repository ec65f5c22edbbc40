package main

import (
	"math"
	"strings"
	"testing"
)

// sample is raw output as runAll writes it: two invocations of the hot
// family, one of peers at two GOMAXPROCS, a failed sub-benchmark, env and
// pprof lines.
const sample = `# env cpu: AMD EPYC
# env memory: 24684096 kB
# run=1 stage=hot round=1 bench=^BenchmarkHot$ benchtime=200ms
goos: linux
BenchmarkHot/strategy=xrate/keys=10000-2         	 8029381	       200.0 ns/op	         1.000 allowed/op	   5000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkHot/strategy=gcra/keys=10000-2          	 7086616	       160.0 ns/op	         1.000 allowed/op	   6250000 decisions/s	         0.8000 ratio-vs-xrate	       0 B/op	       0 allocs/op
PASS
# run=1 took 4.4s
# run=2 stage=hot round=2 bench=^BenchmarkHot$ benchtime=200ms
BenchmarkHot/strategy=xrate/keys=10000-2         	 8029381	       100.0 ns/op	         1.000 allowed/op	  10000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkHot/strategy=gcra/keys=10000-2          	 7086616	       90.0 ns/op	         1.000 allowed/op	   6250000 decisions/s	         0.9000 ratio-vs-xrate	       0 B/op	       0 allocs/op
BenchmarkHotPaired/strategy=composite/keys=10000-2    	 1000	       300.0 ns/op	         1.500 ratio-vs-xrate	       0 B/op	       0 allocs/op
BenchmarkHotPaired/strategy=composite/keys=10000/order=random-2    	 1000	       400.0 ns/op	         1.800 ratio-vs-xrate	       0 B/op	       0 allocs/op
# run=3 stage=peers round=1 bench=^BenchmarkPeers$ benchtime=250ms
BenchmarkPeers/keys=1/dist=uniform/impl=xrate       	 2194408	       150.0 ns/op	         1.000 allowed/op	   6666666 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1/dist=uniform/impl=xrate-2     	 2194408	       100.0 ns/op	         1.000 allowed/op	  10000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1/dist=uniform/impl=throttled-2     	--- FAIL: BenchmarkPeers/keys=1/dist=uniform/impl=throttled-2
    common_test.go:163: Failed to store updated rate limit data
BenchmarkPeers/keys=1/dist=uniform/impl=ratestore-async-bolt     	 2194408	       75.00 ns/op	         1.000 allowed/op	  13333333 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1/dist=uniform/impl=ratestore-async-bolt-2   	 2194408	       50.00 ns/op	         1.000 allowed/op	  20000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkSync/impl=bbolt-update/callers=1-2                   	       1	   1230468 ns/op	       812.7 decisions/s	   15888 B/op	      78 allocs/op
# pprof hot-composite: flat  flat%
# pprof hot-composite: 0.29s 27.36%
`

func parseSample(t *testing.T) *Report {
	t.Helper()
	rep, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestParse(t *testing.T) {
	rep := parseSample(t)
	if got := len(rep.Results); got != 11 {
		t.Fatalf("%d results, want 11 (the FAIL line and its log are not results)", got)
	}
	r := rep.Results[1]
	if r.Run != 1 || r.Name != "Hot/strategy=gcra/keys=10000" || r.Procs != 2 || r.Iters != 7086616 {
		t.Errorf("result 1 = %+v", r)
	}
	if r.Metrics["ns/op"] != 160 || r.Metrics["ratio-vs-xrate"] != 0.8 || r.Metrics["allocs/op"] != 0 {
		t.Errorf("metrics = %v", r.Metrics)
	}
	if r.Family() != "Hot" || r.Param("strategy") != "gcra" || r.Param("keys") != "10000" || r.Param("none") != "" {
		t.Errorf("Family/Param of %q wrong", r.Name)
	}
	// No -P suffix: GOMAXPROCS 1, and a name ending in digits keeps them.
	if p := rep.Results[6]; p.Name != "Peers/keys=1/dist=uniform/impl=xrate" || p.Procs != 1 || p.Run != 3 {
		t.Errorf("result 6 = %+v", p)
	}
	if rep.Env["cpu"] != "AMD EPYC" || len(rep.Profiles["hot-composite"]) != 2 {
		t.Errorf("env %v, profiles %v", rep.Env, rep.Profiles)
	}
}

func TestParseLine(t *testing.T) {
	// A FAIL, an odd field count, a bad b.N, a bad value.
	notResults := "BenchmarkX-2 --- FAIL: BenchmarkX-2\nBenchmarkX-2 10 ns/op\nBenchmarkX-2 ten 1 ns/op\nBenchmarkX-2 10 one ns/op"
	for _, line := range strings.Split(notResults, "\n") {
		if r, ok := parseLine(line); ok {
			t.Errorf("parseLine(%q) = %+v, want no result", line, r)
		}
	}
	r, ok := parseLine("BenchmarkSync/impl=bbolt-update/callers=1 5 2.5 ns/op")
	if !ok || r.Name != "Sync/impl=bbolt-update/callers=1" || r.Procs != 1 || r.Metrics["ns/op"] != 2.5 {
		t.Errorf("parseLine = %+v, %v", r, ok)
	}
}

func TestRatioPairsWithinInvocation(t *testing.T) {
	ix := newIndex(parseSample(t).Results)
	// gcra/xrate is 0.8 in run 1 and 0.9 in run 2; never 160/100 across runs.
	med, lo, hi, ok := ix.ratio("Hot/strategy=gcra/keys=10000", "Hot/strategy=xrate/keys=10000", 0, "ns/op")
	if !ok || math.Abs(med-0.85) > 1e-9 || lo != 0.8 || hi != 0.9 {
		t.Errorf("ratio = %v (%v-%v) %v, want 0.85 (0.8-0.9)", med, lo, hi, ok)
	}
	if m, ok := ix.median("Hot/strategy=xrate/keys=10000", 2, "ns/op"); !ok || m != 150 {
		t.Errorf("median = %v %v, want 150", m, ok)
	}
	// GOMAXPROCS are kept apart.
	if r, _, _, _ := ix.ratio("Peers/keys=1/dist=uniform/impl=ratestore-async-bolt", "Peers/keys=1/dist=uniform/impl=xrate", 2, "ns/op"); r != 0.5 {
		t.Errorf("ratio at GOMAXPROCS 2 = %v, want 0.5", r)
	}
	if _, _, _, ok := ix.ratio("Peers/keys=1/dist=uniform/impl=throttled", "Peers/keys=1/dist=uniform/impl=xrate", 2, "ns/op"); ok {
		t.Error("ratio of a failed benchmark")
	}
}

func TestRender(t *testing.T) {
	md := Render(parseSample(t), []string{"peers.png"})
	wantAll(t, md,
		"| 1 | uniform | 2 | 50 ns | 100 ns (0.50×) |", // headline
		"| gcra | – | – | 125 ns | 0 | 0.85× (0.80–0.90) | – |",
		"| hot composite decision, 10k keys: <= 1.0× x/time/rate, 0 allocs (paired) | 1.50×, 0 allocs; keys in random order: 1.80× | **missed** |",
		"23.5 GiB",
		"![peers](report/peers.png)",
		"## Upstream pools: choosing an upstream", // poolsFigures, as it is
		"## End users and model limits",           // endUsersFigures, as it is
		"| first touch of a never-seen end user: no store read (Async bolt) |",
		"0.29s 27.36%",
		// Not "(fsync)": that is for ratestore-sync-*, and "async" contains "sync".
		"| ratestore-async-bolt | 75 ns | 13.33M/s | 0 | 0.50× | 50 ns | 20.00M/s | 0 | 0.50× |",
	)
}

func TestWorstHot(t *testing.T) {
	rep := parseSample(t)
	if got := worstHot(rep, 2); len(got) != 1 || got[0] != "composite" {
		t.Errorf("worstHot = %v, want [composite] (paired; gcra is under xrate)", got)
	}
	rep.Results[1].Metrics["ns/op"] = 400 // gcra over xrate in BenchmarkHot, 2x in run 1
	if got := worstHot(rep, 2); len(got) != 2 || got[0] != "composite" || got[1] != "gcra" {
		t.Errorf("worstHot = %v, want [composite gcra]", got)
	}
}

func TestFormat(t *testing.T) {
	for got, want := range map[string]string{
		fmtNs(158.2): "158 ns", fmtNs(3200): "3.2 µs", fmtNs(1.25e6): "1.25 ms", fmtNs(0): "–",
		fmtRate(6.33e6): "6.33M/s", fmtRate(98100): "98.1k/s", fmtRate(812): "812/s",
		fmtInt(1): "1", fmtInt(10_000): "10k", fmtInt(1_000_000): "1M", fmtInt(20_001): "20001",
		fmtKB("1048576 kB"): "1.0 GiB", fmtKB("?"): "?",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

// keysSample is one invocation of the key store's families.
const keysSample = `# run=1 stage=keys round=1 bench=^BenchmarkKeys benchtime=200ms
BenchmarkKeysCheck/impl=legacy/windows=10-2         	109756096	        12.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkKeysCheck/impl=sha256+peek/windows=10-2    	 3091604	       300.0 ns/op	      48 B/op	       1 allocs/op
BenchmarkKeysCheck/impl=keystore/windows=10-2       	 1889832	       600.0 ns/op	         2.000 ratio-vs-sha256-peek	         0.02 x-vs-legacy	      48 B/op	       1 allocs/op
BenchmarkKeysCheck/impl=legacy/windows=10000-2      	  131523	      9000 ns/op	       0 B/op	       0 allocs/op
BenchmarkKeysCheck/impl=sha256+peek/windows=10000-2 	 3284907	       400.0 ns/op	      48 B/op	       1 allocs/op
BenchmarkKeysCheck/impl=keystore/windows=10000-2    	 1983241	       600.0 ns/op	         1.5 ratio-vs-sha256-peek	        15 x-vs-legacy	      48 B/op	       1 allocs/op
BenchmarkKeysCheck/impl=legacy/windows=100000-2     	   13670	     90000 ns/op	       0 B/op	       0 allocs/op
BenchmarkKeysCheck/impl=sha256+peek/windows=100000-2         	 3398707	       400.0 ns/op	      48 B/op	       1 allocs/op
BenchmarkKeysCheck/impl=keystore/windows=100000-2            	 1892625	       660.0 ns/op	         1.65 ratio-vs-sha256-peek	       136.4 x-vs-legacy	      48 B/op	       1 allocs/op
BenchmarkKeysAdmitFinish/impl=check+record-2                 	  798930	      2000 ns/op	     481 B/op	       7 allocs/op
BenchmarkKeysAdmitFinish/impl=admit+finish-2                 	  305242	      5000 ns/op	         2.5 ratio-vs-check-record	    1615 B/op	      18 allocs/op
BenchmarkKeysSyncRecord/impl=limiter-record/callers=64-2     	  184526	      8000 ns/op	         1.000 allowed/op	    125000 decisions/s	       424.5 p50-us	      1380 p99-us	      23 B/op	       0 allocs/op
BenchmarkKeysSyncRecord/impl=keystore/callers=64-2           	  119724	     10000 ns/op	         1.000 allowed/op	    100000 decisions/s	       563.0 p50-us	      2309 p99-us	         1.25 ratio-vs-limiter-record	     596 B/op	       9 allocs/op
# run=2 stage=keys-memory round=1 bench=^BenchmarkKeysMemory$ benchtime=1x
BenchmarkKeysMemory/keys=100000-2                            	       1	 312183694 ns/op	       340.0 B/key	       298.0 live-B/key	        31.00 strings-B/key	73557280 B/op	 1005032 allocs/op
`

func TestRenderKeys(t *testing.T) {
	rep, err := Parse(strings.NewReader(keysSample))
	if err != nil {
		t.Fatal(err)
	}
	md := Render(rep, nil)
	wantAll(t, md,
		"| 10k | 9.0 µs | 400 ns | 600 ns | 1 | 15.00× | 1.50× |",
		"| key check: 100k legacy windows over 10 <= 1.2 | 1.10× | met |",
		"| key check: >= 100× the legacy filter-and-sum at 10k windows | 15.00×; at 100k windows 136.36× | **missed** |",
		"| key check: <= 2 allocations | 1 allocs | met |",
		"| key check: within 2× of sha256 + one Limiter.Peek | 10 windows 2.00×, 10k windows 1.50×, 100k windows 1.65× | met |",
		"| Admit + Finish <= 2× Check + RecordUsage (one key, Async) | 2.50× | **missed** |",
		"| Sync bolt, 64 callers: RecordUsage within 1.5× of Limiter.Record (time per record) | 1.25×, 100.0k/s | met |",
		"| memory per loaded key: <= 300 B plus its strings (100k keys) | 309 B + 31 B of strings (id, name) | **missed** |",
		"| Admit + Finish | 5.0 µs | – | – | 18 | 2.50× |",
		"| RecordUsage, Sync, 64 callers | 10.0 µs | 100.0k/s | 563.0 µs / 2.31 ms | 9 | 1.25× |",
		"340 B of heap in use per key (298 B of live objects)",
	)
}

// wantAll fails t for each of wants that md lacks.
func wantAll(t *testing.T, md string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
