package main

import (
	"strings"
	"testing"
)

// gwSample is two invocations of the gateway family: the added latency, and
// its ratio to the bare proxy's, are computed within each, then their
// medians taken.
const gwSample = `# run=1 stage=gateway round=1 bench=^BenchmarkGateway(Overhead|Stream)$ benchtime=700ms
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=direct-2 	 700	 1000000 ns/op	 200.0 mean-us	 100.0 p50-us	 500.0 p99-us	 1000 req/s
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=reverseproxy-2 	 700	 1000000 ns/op	 250.0 mean-us	 190.0 p50-us	 600.0 p99-us	 1000 req/s
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=gateway-async-2 	 700	 1000000 ns/op	 300.0 mean-us	 200.0 p50-us	 1000 p99-us	 1000 req/s
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=gateway-sync-2 	 700	 1000000 ns/op	 500.0 mean-us	 400.0 p50-us	 1200 p99-us	 1000 req/s
BenchmarkGatewayStream/events=32/clients=1/impl=direct-2 	 20	 36000000 ns/op	 40.0 mean-us	 30.0 p50-us	 90.0 p99-us
BenchmarkGatewayStream/events=32/clients=1/impl=gateway-async-2 	 20	 36000000 ns/op	 60.0 mean-us	 50.0 p50-us	 150.0 p99-us
# run=2 stage=gateway round=2 bench=^BenchmarkGateway(Overhead|Stream)$ benchtime=700ms
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=direct-2 	 700	 1000000 ns/op	 200.0 mean-us	 300.0 p50-us	 500.0 p99-us	 1000 req/s
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=reverseproxy-2 	 700	 1000000 ns/op	 200.0 mean-us	 350.0 p50-us	 500.0 p99-us	 1000 req/s
BenchmarkGatewayOverhead/resp=1KiB/clients=64/load=1000rps/impl=gateway-async-2 	 700	 1000000 ns/op	 300.0 mean-us	 340.0 p50-us	 1300 p99-us	 1000 req/s
`

func TestGateway(t *testing.T) {
	rep, err := Parse(strings.NewReader(gwSample))
	if err != nil {
		t.Fatal(err)
	}
	v := newView(rep)
	// Added p50 of async: 100 in run 1, 40 in run 2 (not 340 - 200).
	med, lo, hi, ok := v.ix.diff(gwOverheadName("1000rps", "gateway-async"), gwOverheadName("1000rps", "direct"), 0, "p50-us")
	if !ok || med != 70 || lo != 40 || hi != 100 {
		t.Errorf("diff = %v %v %v %v, want 70 40 100", med, lo, hi, ok)
	}
	byID := map[string]check{}
	for _, c := range v.gatewayChecks() {
		byID[c.id] = c
	}
	// Over the proxy's added p50: 100/90 in run 1, 40/50 in run 2.
	med, lo, hi, ok = v.ix.addedRatio(gwOverheadName("1000rps", "gateway-async"), gwOverheadName("1000rps", "reverseproxy"),
		gwOverheadName("1000rps", "direct"), "p50-us")
	if !ok || lo != 0.8 || hi != 100.0/90 || med != (0.8+100.0/90)/2 {
		t.Errorf("addedRatio = %v %v %v %v, want %v 0.8 %v", med, lo, hi, ok, (0.8+100.0/90)/2, 100.0/90)
	}
	if c := byID["gateway-1000rps-async"]; !c.ok || !c.met || c.measured != "0.96× (0.80–1.11) (added p50 +70 µs (+40 µs – +100 µs), the proxy's +70 µs (+50 µs – +90 µs))" {
		t.Errorf("async check = %+v, want met", c)
	}
	if c := byID["gateway-1000rps-sync"]; !c.ok || c.met { // 300/90
		t.Errorf("sync check = %+v, want missed", c)
	}
	if c := byID["gateway-closed-async"]; c.id != "" {
		t.Errorf("closed check = %+v, want none: the closed loop measures capacity", c)
	}
	if c := byID["gateway-stream-async"]; !c.ok || !c.met || c.measured != "p50 +20 µs, p99 +60 µs" {
		t.Errorf("stream check = %+v", c)
	}
	var b strings.Builder
	v.gateway(&b)
	for _, want := range []string{"## Gateway", "| 1000 req/s in all | reverseproxy | 1.0k/s | 270.0 µs |", "+70 µs (+40 µs – +100 µs) | +650 µs (+500 µs – +800 µs) | 0.96× (0.80–1.11) |",
		"| 3.33× |", "| gateway-async | 50.0 µs |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
	if _, ok := explanations["gateway-1000rps-async"]; !ok {
		t.Error("no analysis recorded for a gateway miss")
	}
}
