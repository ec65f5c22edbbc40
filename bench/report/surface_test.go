package main

import (
	"strings"
	"testing"
)

// surfaceSample is the operator's surface's output, small and made up: a
// page benchmark at 1M keys, a walk at 10M, the ledger at 10M entries on
// both backends, and two invocations of the 10 keys benchmark, each with
// 786b47c's results first.
const surfaceSample = `# run=1 stage=admin-keys round=1 bench=^BenchmarkAdminKeysPage$ benchtime=300ms load=0.50,0.60,0.70
BenchmarkAdminKeysPage/keys=1000000/via=serve/sort=name-2         	    4579	    363392 ns/op	     48899 B/answer	       100.0 keys/page	         0.3634 ms/page	  218952 B/op	    1438 allocs/op
BenchmarkAdminKeysPage/keys=1000000/via=client/sort=name-2        	    1087	   1328958 ns/op	       100.0 keys/page	         1.329 ms/page	  431057 B/op	    2447 allocs/op
BenchmarkAdminKeysPage/keys=1000000/via=serve/q=many/sort=-last_used-2         	    1377	    868804 ns/op	     53338 B/answer	       100.0 keys/page	         0.8688 ms/page	  240522 B/op	    1762 allocs/op
BenchmarkAdminKeysPage/keys=1000000/via=client/q=many/sort=-last_used-2        	     668	   1797309 ns/op	       100.0 keys/page	         1.797 ms/page	  466456 B/op	    3087 allocs/op
BenchmarkAdminKeysPage/keys=1000000/impl=list+usage-2                          	       1	11239813775 ns/op	 495507813 B/answer	   1000000 keys/page	     11240 ms/page	3602824360 B/op	16935916 allocs/op
# run=2 stage=admin-walk round=1 bench=^BenchmarkAdminKeysWalk$ benchtime=1x load=1.00,1.10,1.20
BenchmarkAdminKeysWalk/keys=10000000/cache=default-2 	       1	100000000000 ns/op	 190.0 walk-heap-MiB	 5000 store-heap-MiB	 262144 cached-states-added	 8.0 page-ms	 10000 pages	 900000 B/page	 7000 rss-MiB	 9000 hwm-MiB
BenchmarkAdminKeysWalk/keys=10000000/cache=1024-2    	       1	 90000000000 ns/op	  40.0 walk-heap-MiB	 5000 store-heap-MiB	   1024 cached-states-added	 7.0 page-ms	 10000 pages	 900000 B/page	 6000 rss-MiB	 8000 hwm-MiB
# run=3 stage=admin-ledger round=1 bench=^BenchmarkAdminLedger$ benchtime=1x load=2.00,1.50,1.00
BenchmarkAdminLedger/entries=10000000/backend=bolt/q=requests-key-2 	       1	   5000000 ns/op	 30000 B/answer	 5.000 ms/op	 300.0 reads/op	 100.0 rows
BenchmarkAdminLedger/entries=10000000/backend=bolt/q=spend-90d-by-hour-2 	       1	 8000000000 ns/op	 400000 B/answer	 8000 ms/op	 10000000 reads/op	 2160 rows
BenchmarkAdminLedger/entries=10000000/backend=redis/q=requests-key-2 	       1	  20000000 ns/op	 30000 B/answer	 20.00 ms/op	 300.0 reads/op	 100.0 rows
BenchmarkAdminLedger/entries=10000000/backend=redis/q=spend-90d-by-hour-2 	       1	 900000000 ns/op	 400000 B/answer	 900.0 ms/op	 10000000 reads/op	 2160 rows
# run=4 stage=admin-small round=1 bench=^BenchmarkAdminSmall$ benchtime=300ms load=0.30,0.40,0.50
BenchmarkAdminSmall/dur=sync/op=create/impl=786b47c-2 	     200	    250000 ns/op	   14546 B/op	     132 allocs/op
BenchmarkAdminSmall/dur=sync/op=get/impl=786b47c-2    	     200	      8000 ns/op	    8837 B/op	      50 allocs/op
BenchmarkAdminSmall/dur=sync/op=create/impl=head-2    	     200	    500000 ns/op	   24697 B/op	     239 allocs/op
BenchmarkAdminSmall/dur=sync/op=get/impl=head-2       	     200	      8400 ns/op	    9941 B/op	      59 allocs/op
# run=5 stage=admin-small round=2 bench=^BenchmarkAdminSmall$ benchtime=300ms load=0.30,0.40,0.50
BenchmarkAdminSmall/dur=sync/op=create/impl=786b47c-2 	     200	    200000 ns/op	   14546 B/op	     132 allocs/op
BenchmarkAdminSmall/dur=sync/op=get/impl=786b47c-2    	     200	     10000 ns/op	    8837 B/op	      50 allocs/op
BenchmarkAdminSmall/dur=sync/op=create/impl=head-2    	     200	    440000 ns/op	   24697 B/op	     239 allocs/op
BenchmarkAdminSmall/dur=sync/op=get/impl=head-2       	     200	      9000 ns/op	    9941 B/op	      59 allocs/op
`

func TestSurface(t *testing.T) {
	rep, err := Parse(strings.NewReader(surfaceSample))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.RunLoad[2]; got != "1.00 1.10 1.20" {
		t.Errorf("load of run 2 = %q", got)
	}
	byID := scaleChecksByID(newView(rep))
	if c := byID["surface-page"]; !c.ok || !c.met || c.measured != "slowest 1.80 ms (q=many/sort=-last_used, client); the whole list before pages: 11.24 s" {
		t.Errorf("surface-page = %+v", c)
	}
	if c := byID["surface-walk"]; !c.ok || !c.met || c.measured != "40 MiB; with the default cache 190 MiB, the 262144 states it added included" {
		t.Errorf("surface-walk = %+v", c)
	}
	if c := byID["surface-ledger-bolt"]; !c.ok || c.met || c.measured != "slowest 8.00 s (spend-90d-by-hour); 1 of 2 over 1 s" {
		t.Errorf("surface-ledger-bolt = %+v, want missed", c)
	}
	if c := byID["surface-ledger-redis"]; !c.ok || !c.met {
		t.Errorf("surface-ledger-redis = %+v, want met", c)
	}
	// create: 2.0× and 2.2× (median 2.1), get: 1.05× and 0.9× (median 0.975).
	if c := byID["surface-small-sync"]; !c.ok || c.met || c.measured != "over: create 2.10×" {
		t.Errorf("surface-small-sync = %+v, want missed on create", c)
	}
	if c := byID["surface-small-async"]; c.ok {
		t.Errorf("surface-small-async = %+v, want not measured", c)
	}
	wantAll(t, Render(rep, nil),
		"## Operator's surface",
		"AdminKeysPage (run 1): 0.50 0.60 0.70; AdminKeysWalk (run 2): 1.00 1.10 1.20",
		"| q=many/sort=-last_used | 0.87 ms | 100 | 53.3 kB | 1.80 ms | 12937× |",
		"| *the whole list (baseline), 3602.8 MB allocated* | 11.24 s | 1000000 | 495.5 MB | – | – |",
		"| 10M | 1024 | 40 MiB | 5000 MiB | 1024 | 7.0 ms | 10000 | 900000 B | 6000 MiB | 8000 MiB |",
		"| spend-90d-by-hour | 8.00 s | 10000000 | 900.0 ms | 10000000 | 2160 | 400.0 kB |",
		"| sync | create | 225.0 µs | 132 | 470.0 µs | 239 | 2.10× (2.00–2.20) |",
	)
}

func TestSurfaceSection(t *testing.T) {
	rep, err := Parse(strings.NewReader(surfaceSample))
	if err != nil {
		t.Fatal(err)
	}
	section := SurfaceSection(rep, "*alone*")
	wantAll(t, section, surfaceHeading+"\n", "*alone*\n",
		"| the worst allowed GET /admin/requests and /admin/spend at 10M entries, bolt: each < 1 s | slowest 8.00 s (spend-90d-by-hour); 1 of 2 over 1 s | **missed** |",
		"### Missed targets: what bounds them")
	doc := "# r\n\n## Keys\n\nk\n\n## Profiles of the hot strategies\n\np\n"
	inserted := spliceSection(doc, section, "## Profiles of ")
	if want := "# r\n\n## Keys\n\nk\n\n" + section + "## Profiles of the hot strategies\n\np\n"; inserted != want {
		t.Errorf("inserted:\n%s\nwant:\n%s", inserted, want)
	}
	again := spliceSection(inserted, surfaceHeading+"\n\nnew\n\n", "## Profiles of ")
	if want := "# r\n\n## Keys\n\nk\n\n" + surfaceHeading + "\n\nnew\n\n## Profiles of the hot strategies\n\np\n"; again != want {
		t.Errorf("replaced:\n%s\nwant:\n%s", again, want)
	}
}
