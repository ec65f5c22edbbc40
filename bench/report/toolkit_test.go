package main

import (
	"strings"
	"testing"
)

// redisSample is two invocations of BenchmarkRedisInstances, the second
// without its 10k workload, and one of BenchmarkRedis.
const redisSample = `# run=1 stage=redis round=1 bench=^BenchmarkRedis$ benchtime=1s
BenchmarkRedis/impl=redis_rate-2         	   40402	     40000 ns/op	     25000 decisions/s	         1.000 round-trips/op	     800 B/op	      22 allocs/op
BenchmarkRedis/impl=redisstore-2         	   23170	     44000 ns/op	     22727 decisions/s	         1.000 round-trips/op	    1310 B/op	      27 allocs/op
# run=2 stage=redis-instances round=1 bench=^BenchmarkRedisInstances$ benchtime=20000x
BenchmarkRedisInstances/workload=hot/impl=redis_rate-2 	   20000	     40000 ns/op	     25000 decisions/s	         1.000 round-trips/op	         1.000 scripts/op
BenchmarkRedisInstances/workload=hot/impl=redisstore-2 	   20000	    160000 ns/op	      6250 decisions/s	         2.900 round-trips/op	         2.900 scripts/op
BenchmarkRedisInstances/workload=10k/impl=redis_rate-2 	   20000	     30000 ns/op	     33333 decisions/s	         1.000 round-trips/op	         1.000 scripts/op
BenchmarkRedisInstances/workload=10k/impl=redisstore-2 	   20000	     25000 ns/op	     40000 decisions/s	         1.100 round-trips/op	         1.000 scripts/op
# run=3 stage=redis-instances round=2 bench=^BenchmarkRedisInstances$ benchtime=20000x
BenchmarkRedisInstances/workload=hot/impl=redis_rate-2 	   20000	     40000 ns/op	     25000 decisions/s	         1.000 round-trips/op	         1.000 scripts/op
BenchmarkRedisInstances/workload=hot/impl=redisstore-2 	   20000	    100000 ns/op	     10000 decisions/s	         2.500 round-trips/op	         2.500 scripts/op
`

func TestRedisInstances(t *testing.T) {
	rep, err := Parse(strings.NewReader(redisSample))
	if err != nil {
		t.Fatal(err)
	}
	v := newView(rep)
	byID := map[string]check{}
	for _, c := range v.toolkitChecks() {
		byID[c.id] = c
	}
	// hot: 6250/25000 in run 2, 10000/25000 in run 3.
	if c := byID["redis-instances-hot"]; !c.ok || c.met || c.measured != "0.33× (0.25–0.40), 2.70 round trips/decision (redis_rate 1.00)" {
		t.Errorf("hot check = %+v, want missed at 0.33×", c)
	}
	if c := byID["redis-instances-10k"]; !c.ok || !c.met || c.measured != "1.20×, 1.10 round trips/decision (redis_rate 1.00)" {
		t.Errorf("10k check = %+v, want met at 1.20×", c)
	}
	if c := byID["redis-gcra"]; !c.ok || !c.met {
		t.Errorf("BenchmarkRedis check = %+v, want met", c)
	}
	md := Render(rep, nil)
	wantAll(t, md,
		"BenchmarkRedis, BenchmarkRedisInstances)",
		"| redisstore | 22.7k/s | 1.00 | 1.10× |", // BenchmarkRedis' table, kept
		"| hot | redis_rate | 25.0k/s | 1.00 | 1.00 | – |",
		"| hot | redisstore | 8.1k/s | 2.70 | 2.70 | 0.33× (0.25–0.40) |",
		"| 10k | redisstore | 40.0k/s | 1.10 | 1.00 | 1.20× |",
		"| Redis, 4 instances × 16 connections, one hot key: redisstore >= redis_rate's decisions/s | 0.33× (0.25–0.40)",
	)
}

// TestRedisInstancesNotRun renders BenchmarkRedis without
// BenchmarkRedisInstances: its rows say so, its targets are not measured.
func TestRedisInstancesNotRun(t *testing.T) {
	rep, err := Parse(strings.NewReader(strings.Split(redisSample, "# run=2")[0]))
	if err != nil {
		t.Fatal(err)
	}
	md := Render(rep, nil)
	wantAll(t, md,
		"| hot | redisstore | not run | – | – | – |",
		"| 10k | redis_rate | not run | – | – | – |",
		"| Redis, 4 instances × 16 connections, keys drawn from 10k: redisstore >= redis_rate's decisions/s | – | not measured |",
	)
	if md := Render(&Report{Env: map[string]string{}}, nil); strings.Contains(md, "Redis, several instances") {
		t.Error("an empty report has the Redis instances' section")
	}
}
