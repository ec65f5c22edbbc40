package main

import (
	"slices"
	"strings"
	"testing"
)

// scaleSample is the scale benchmarks' output, small and made up:
// BenchmarkPeers at 1M keys (no badger, zipf at GOMAXPROCS 2 only), two
// invocations of BenchmarkFirstTouch, one of BenchmarkMiss and one of
// BenchmarkScale at GOMAXPROCS 2.
const scaleSample = `# run=1 stage=peers round=1 bench=^BenchmarkPeers$/^keys=1000000$/ benchtime=5000000x
BenchmarkPeers/keys=1000000/dist=uniform/impl=xrate         	 5000000	      1000 ns/op	 1000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=uniform/impl=xrate-2       	 5000000	      1100 ns/op	  909090 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=zipf/impl=xrate-2          	 5000000	       400 ns/op	 2500000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=uniform/impl=golimiter     	 5000000	       800 ns/op	 1250000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=uniform/impl=golimiter-2   	 5000000	       500 ns/op	 2000000 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=zipf/impl=golimiter-2      	 5000000	       300 ns/op	 3333333 decisions/s	       0 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=uniform/impl=ratestore-async-bolt   	 5000000	       960 ns/op	 1041666 decisions/s	      12 B/op	       0 allocs/op
BenchmarkPeers/keys=1000000/dist=uniform/impl=ratestore-async-bolt-2 	 5000000	       700 ns/op	 1428571 decisions/s	      40 B/op	       1 allocs/op
BenchmarkPeers/keys=1000000/dist=zipf/impl=ratestore-async-bolt-2    	 5000000	       330 ns/op	 3030303 decisions/s	       0 B/op	       0 allocs/op
# run=2 stage=first-touch round=1 bench=^BenchmarkFirstTouch$ benchtime=1000000x
BenchmarkFirstTouch/impl=xrate-2                	 1000000	       400 ns/op	 2500000 decisions/s	     188 B/op	       1 allocs/op
BenchmarkFirstTouch/impl=ratestore-async-bolt-2 	 1000000	       560 ns/op	 1785714 decisions/s	         0 evictions/op	         0.5000 loads/op	         1.400 ratio-vs-xrate	     300 B/op	       5 allocs/op
# run=3 stage=first-touch round=2 bench=^BenchmarkFirstTouch$ benchtime=1000000x
BenchmarkFirstTouch/impl=xrate-2                	 1000000	       400 ns/op	 2500000 decisions/s	     188 B/op	       1 allocs/op
BenchmarkFirstTouch/impl=ratestore-async-bolt-2 	 1000000	       640 ns/op	 1562500 decisions/s	         0 evictions/op	         0.5000 loads/op	         1.600 ratio-vs-xrate	     300 B/op	       5 allocs/op
# run=4 stage=miss round=1 bench=^BenchmarkMiss$ benchtime=200000x
BenchmarkMiss/keys=1000000/impl=bolt-view-get-2        	  200000	      2000 ns/op	  500000 decisions/s	     576 B/op	       9 allocs/op
BenchmarkMiss/keys=1000000/impl=ratestore-async-bolt-2 	  200000	      2600 ns/op	  384615 decisions/s	         0.9980 evictions/op	         0.9990 loads/op	         1.300 ratio-vs-bolt-view-get	     500 B/op	       8 allocs/op
# run=5 stage=scale round=1 bench=^BenchmarkScale$ benchtime=5000000x
BenchmarkScale/keys=10000000/dist=uniform/impl=xrate-2     	 5000000	      1200 ns/op	  833333 decisions/s	       110.0 heap-B/key	        12.00 key-B/key	       115.0 rss-B/key	       0 B/op	       0 allocs/op
BenchmarkScale/keys=10000000/dist=uniform/impl=golimiter-2 	 5000000	       900 ns/op	 1111111 decisions/s	       100.0 heap-B/key	        12.00 key-B/key	       105.0 rss-B/key	       0 B/op	       0 allocs/op
BenchmarkScale/keys=10000000/dist=uniform/impl=ratestore-async-bolt-2 	 5000000	      1000 ns/op	 1000000 decisions/s	       180.0 heap-B/key	        12.00 key-B/key	       250.0 rss-B/key	         2.000 rss-file-B/key	      30 B/op	       0 allocs/op
# run=6 stage=store-write round=1 bench=^BenchmarkStoreWrite$ benchtime=1000x
BenchmarkStoreWrite/keys=10000-2   	    1000	   1000000 ns/op	       800.0 cpu-ns/key	  30000000 max-ns/commit	      1000 ns/key	   6000000 p99-ns/commit
BenchmarkStoreWrite/keys=1000000-2 	    1000	   4000000 ns/op	      4000 cpu-ns/key	 200000000 max-ns/commit	      3900 ns/key	  16000000 p99-ns/commit
`

func scaleChecksByID(v *view) map[string]check {
	byID := map[string]check{}
	for _, c := range v.checks() {
		byID[c.id] = c
	}
	return byID
}

func TestScale(t *testing.T) {
	rep, err := Parse(strings.NewReader(scaleSample))
	if err != nil {
		t.Fatal(err)
	}
	byID := scaleChecksByID(newView(rep))
	// 960/800, 700/500, 330/300: the fastest peer of each run, not xrate.
	if c := byID["steady-bolt"]; !c.ok || c.met || c.measured != "uniform/1 1.20×, uniform/2 1.40×, zipf/2 1.10×" {
		t.Errorf("steady-bolt = %+v, want missed (1.40× at uniform/2)", c)
	}
	if c := byID["steady-badger"]; c.ok {
		t.Errorf("steady-badger = %+v, want not measured", c)
	}
	if c := byID["first-touch"]; !c.ok || !c.met || c.measured != "1.50× (1.40–1.60) (600 ns against 400 ns)" {
		t.Errorf("first-touch = %+v, want met at 1.50×", c)
	}
	if c := byID["miss"]; !c.ok || !c.met || c.measured != "1.30× (2.6 µs against 2.0 µs)" {
		t.Errorf("miss = %+v, want met at 1.30×", c)
	}
	// 1000 against golimiter's 900.
	if c := byID["steady-10m"]; !c.ok || !c.met || c.measured != "uniform/2 1.11×" {
		t.Errorf("steady-10m = %+v, want met at 1.11×", c)
	}
	// 180 B of heap per key against 160 + 12.
	if c := byID["scale-memory"]; !c.ok || c.met || c.measured != "168 B + 12 B of key (RSS 250 B per key)" {
		t.Errorf("scale-memory = %+v, want missed", c)
	}
	wantAll(t, Render(rep, nil),
		"**Steady state, 1M keys** (BenchmarkPeers: every key created, an untimed pass of up to 2^20 decisions, then 5M timed",
		"| uniform | 2 | golimiter 500 ns | 700 ns | 1 | 1.40× | not run | – | – |",
		"| zipf | 1 | not run | not run | – | – | not run | – | – |",
		"| uniform | 2 | 1.2 µs | 900 ns | 1.0 µs | 0 | 1.11× |",
		"| zipf | 2 | not run | not run | not run | – | – |",
		"| golimiter | 100 | 105 | – | 12 | 88 |",
		"| ratestore-async-bolt | 180 | 250 | 2 | 12 | 168 |",
		"| xrate | 400 ns | 1 | 188 | – | – | – |",
		"| ratestore-async-bolt | 600 ns | 5 | 300 | 0.50 | 0 | 1.50× (1.40–1.60) |",
		"| bolt-view-get | 2.0 µs | 9 | 576 | – | – | – |",
		"| ratestore-async-bolt | 2.6 µs | 8 | 500 | 1.00 | 1.00 | 1.30× |",
		"| 10k | 1.0 µs | 800 ns | 1.00× |", // Store writes, against the smallest file
		"| 1M | 3.9 µs | 4.0 µs | 5.00× |",
		"| memory at 10M keys, Async bolt, every key in memory: <= 160 B of heap per key plus the key's bytes | 168 B + 12 B of key (RSS 250 B per key) | **missed** |",
	)
}

// TestScaleNotRun renders a report without any scale result: the section
// keeps its tables, every row says not run, every target not measured.
func TestScaleNotRun(t *testing.T) {
	rep, err := Parse(strings.NewReader(strings.Split(redisSample, "# run=2")[0]))
	if err != nil {
		t.Fatal(err)
	}
	byID := scaleChecksByID(newView(rep))
	for _, id := range []string{"steady-bolt", "steady-badger", "first-touch", "miss", "steady-10m", "scale-memory"} {
		if c, found := byID[id]; !found || c.ok {
			t.Errorf("%s = %+v (found %v), want not measured", id, c, found)
		}
	}
	wantAll(t, Render(rep, nil),
		"## Scale: the steady state at 1M and 10M keys",
		"**Steady state, 1M keys**",
		"| uniform | 1 | not run | not run | – | – | not run | – | – |",
		"**Steady state, 10M keys**",
		"| zipf | 2 | not run | not run | not run | – | – |",
		"| ratestore-async-bolt | not run | – | – | – | – |\n",
		"| xrate | not run | – | – | – | – | – |",
		"| bolt-view-get | not run | – | – | – | – | – |",
		"**Store writes per dirty key**",
		"| not run | – | – | – |",
		"| miss (a stored key not in memory, 1M keys, cache of 1024), Async bolt: <= 1.5× one raw bbolt View + Get of it (same run) | – | not measured |",
	)
}

// TestPlanScale: the 10M stage runs only with -full (never with -quick),
// and every stage sets the key counts' variables itself.
func TestPlanScale(t *testing.T) {
	has10M := func(stages []stage) bool {
		return slices.ContainsFunc(stages, func(st stage) bool { return st.size == keys10M })
	}
	if has10M(plan(false, false)) || has10M(plan(true, true)) || !has10M(plan(false, true)) {
		t.Error("the 10M stage runs without -full, or with -quick")
	}
	for _, st := range plan(true, false) {
		if st.size != small || st.rounds != 1 {
			t.Errorf("quick stage %+v, want small keys and one round", st)
		}
	}
	for s, want := range map[size][]string{
		small:   {"RATESTORE_BENCH_FULL=0", "RATESTORE_BENCH_10M=0", "RATESTORE_BENCH_KEYS="},
		keys1M:  {"RATESTORE_BENCH_FULL=1", "RATESTORE_BENCH_10M=0", "RATESTORE_BENCH_KEYS="},
		keys10M: {"RATESTORE_BENCH_10M=1", "RATESTORE_BENCH_10M_KEYS="},
	} {
		for _, w := range want {
			if !slices.Contains(s.env(), w) {
				t.Errorf("size %d: env %q lacks %q", s, s.env(), w)
			}
		}
	}
}
