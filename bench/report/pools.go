package main

// poolsFigures is the section of the pools of upstreams (issue 42): figures
// measured by hand, with the commands that took them, not rerun by this
// report (the A/B against 9006258 needs that commit's test binary). Render
// writes it after the gateway's section, as it is.
const poolsFigures = `## Upstream pools: choosing an upstream (BenchmarkGatewayPools, BenchmarkGatewayPoolsPaired, BenchmarkOrder)

*Measured by hand on 2026-11-28, not by this report's run, and not rerun by it: the gateway as at 71456dd (the pools
wired in), the bench module at 5d65f1a. Same machine kind as above (Intel Xeon, 2 logical CPUs, 23.5 GiB, Go 1.26.8),
shared with other agents' tests: every invocation ran under /tmp/ratestore-bench.lock once the CPUs had been at least
85% idle for 2 s; the 1-minute load average was 0.7–4.2 as invocations began. A first A/B run without that wait
(load average 3–10) was thrown away: benchstat's intervals on its p50s reached ±3800%. ± is benchstat's 95%
interval, p its Mann-Whitney U test.*

**Choosing among 16 upstreams.** The gateway's whole ServeHTTP in process: one goroutine, one key (one token
window), BenchmarkGatewayOverhead's request, answered by a Transport returning the same 1 KiB completion from memory,
into an httptest.ResponseRecorder; gateway.New over an Async bbolt database with its ledger and metrics. *route* is
Options.Upstream alone, no pools (one Admit a request, no quotas); *pool-1* one openai upstream with limits of
requests and tokens per minute and requests in flight that no run reaches (its keystore.Quota held in the
request's Admit, settled in its Finish); *pool-16-nolimits* 16 upstreams (weights 1, 2, 3, 1, ...) without limits:
the choice alone; *pool-16* the same 16 with pool-1's limits; *pool-16-full-15* 16 whose first 15 in order refuse
every request (tokens per minute below its reservation), so that a request makes 16 Admits, 15 refused, before the
16th serves it (15.999 on average: the round robin picks the 16th first once in 15,001). *added* is
BenchmarkGatewayPoolsPaired: the pool side and route in one sub-benchmark, 8 requests each in turn, which goes first
alternating, the median over the pairs of the pool's block time minus the route's, per request (20,000 pairs an
invocation, 6 invocations); the rest is BenchmarkGatewayPools, each side alone (1 s, 6 invocations), whose ns/op
moves too much on this machine to subtract. Target (issue 42): choosing an upstream adds at most 5 µs a request
with 16 upstreams.

` + "```sh" + `
cd bench
go test -c -o /tmp/tip.test . && go test -c -o /tmp/pool.test ../gateway/pool
for i in 1 2 3 4 5 6; do
  /tmp/tip.test -test.run '^$' -test.bench '^BenchmarkGatewayPoolsPaired$' -test.benchtime 20000x >> paired.txt
  /tmp/tip.test -test.run '^$' -test.bench '^BenchmarkGatewayPools$' -test.benchmem -test.benchtime 1s >> pools.txt
  /tmp/pool.test -test.run '^$' -test.bench '^BenchmarkOrder$' -test.benchmem -test.benchtime 1s >> order.txt
done
benchstat paired.txt; benchstat -col /impl pools.txt; benchstat order.txt
` + "```" + `

| side | added to a request (paired) | request alone | B/op | allocs/op |
| --- | --- | --- | --- | --- |
| route | – | 40.3 µs ± 36% | 15.0 KiB | 147 |
| pool-1 | +4.55 µs ± 13% | 44.2 µs ± 16% | 16.5 KiB | 167 |
| pool-16-nolimits | +2.62 µs ± 20% | 40.6 µs ± 17% | 15.2 KiB | 150 |
| pool-16 | +6.63 µs ± 9% | 47.3 µs ± 25% | 16.6 KiB | 168 |
| pool-16-full-15 | +27.4 µs ± 6% | 79.0 µs ± 16% | 20.8 KiB | 273 |

Taken again on main at add75ee (later changes to the pools: the one waiting loop of admissions and failovers, an
upstream's tokens per minute over a minute and a bucket), the same way, 6 invocations: added +4.05 µs ± 5%
(pool-1), +2.28 µs ± 3% (pool-16-nolimits), +6.13 µs ± 2% (pool-16), +25.3 µs ± 10% (pool-16-full-15); the same
allocations a request, B/op within 0.4%.

The pool's order alone (BenchmarkOrder, gateway/pool: 16 upstreams, two globs each, weights 1–3): 788 ns ± 16%,
0 allocs. Target: the choice alone adds 2.6 µs (**met**); with the 16 upstreams' limits held, a request pays 6.6 µs
more than with one route (**missed**, if the limits count), of which 4.6 µs is holding and settling one upstream's
quota, which one upstream with limits pays too (pool-1): choosing among 16 upstreams with limits rather than one
costs 2.1 µs. Where it goes (CPU and allocation profiles of 150,000 requests of each side): the order is ~1.3 µs a
request in place (each of the 16 upstreams' Serves, path.Match of its globs, and its cooldown's mutex), plus 4
allocations (the waiting line's name, the 8 candidates' buffer that 16 outgrow, the errors.As targets of the
capacity check and of a refusal); the quota is Admit's checks and holds of its three limits and Finish's
settlement (20 allocations, more than half of them the x-ratelimit-*-requests fields its request rate adds to the
response: the quota's limits join the key's in the admission, so the caller is told the upstream's requests per
minute). With 15 upstreams full, each refusal is a whole Admit (~1.4 µs and 7 allocations each).

**One upstream, against 9006258 (before pools).** Test binaries of bench/ built from 9006258 and from the tip,
alternated in one session: BenchmarkGatewayOverhead at 1000 requests/s (direct, the bare reverseproxy and
gateway-async, 2000 requests each; 12 rounds: the first loop below, then its gateway line alone again),
BenchmarkKeysAdmitFinish (6 rounds), and BenchmarkGatewayPools/impl=route in process (20 rounds of 20,000 requests;
built at 9006258 with poolsides_base9006258_test.go, build tag base9006258). Target: the gateway's added p50 with one
upstream no worse than 9006258's.

` + "```sh" + `
git worktree add --detach /tmp/base 9006258 && cp pools_test.go poolsides_base9006258_test.go /tmp/base/bench/
(cd /tmp/base/bench && go test -c -tags base9006258 -o /tmp/base.test .) && go test -c -o /tmp/tip.test .
gw='^BenchmarkGatewayOverhead$/^resp=1KiB$/^clients=64$/^load=1000rps$/^impl=(direct|reverseproxy|gateway-async)$'
for i in 1 2 3 4 5 6; do for side in base tip; do
  /tmp/$side.test -test.run '^$' -test.bench "$gw" -test.benchmem -test.benchtime 2000x >> gw-$side.txt
  /tmp/$side.test -test.run '^$' -test.bench '^BenchmarkKeysAdmitFinish$' -test.benchmem -test.benchtime 1s >> keys-$side.txt
done; done
for i in $(seq 20); do for side in base tip; do
  /tmp/$side.test -test.run '^$' -test.bench '^BenchmarkGatewayPools$/^impl=route$' -test.benchmem -test.benchtime 20000x >> route-$side.txt
done; done
benchstat base=gw-base.txt tip=gw-tip.txt; benchstat base=keys-base.txt tip=keys-tip.txt; benchstat base=route-base.txt tip=route-tip.txt
` + "```" + `

| measure | 9006258 | tip | change |
| --- | --- | --- | --- |
| gateway-async, 1000 req/s: p50 | 552 µs ± 27% | 501 µs ± 14% | ~ (p=0.48) |
| gateway-async, 1000 req/s: added p50 over direct | +290 µs ± 31% | +271 µs ± 12% | ~ (p=0.67) |
| reverseproxy, 1000 req/s: added p50 over direct | +196 µs ± 48% | +178 µs ± 31% | ~ (p=0.24) |
| gateway-async's added p50 ÷ the proxy's, same round (median) | 1.29× | 1.58× | ~ (p=0.057) |
| gateway-async's added p50 − the proxy's, same round (median) | 82 µs | 102 µs | ~ (p=0.22) |
| gateway-async, 1000 req/s: allocs, B a request | 288, 21.7 KiB | 295, 21.9 KiB | +7 allocs, +0.9% (p<0.001) |
| Admit+Finish (BenchmarkKeysAdmitFinish) | 2.77 µs ± 39%, 14 allocs | 2.65 µs ± 38%, 14 allocs | ~ (p=0.70) |
| Check+RecordUsage | 1.38 µs ± 17%, 10 allocs | 1.27 µs ± 10%, 10 allocs | ~ (p=0.18) |
| route in process (BenchmarkGatewayPools/impl=route) | 45.0 µs ± 7%, 140 allocs | 44.2 µs ± 3%, 147 allocs | ~ (p=0.50); +7 allocs, +1.3% B |

Target: **met**, no significant regression in time: the added p50 is no worse (−7%, p=0.67), and the gateway's CPU
time a request in process is unchanged (−2%, p=0.50, 20 rounds a side). The allocations are the one significant
change: 7 more a request, from the gateway's failover and metrics (the list of upstreams tried, the closure counting
the upstream's answer in its metrics, the outbound request's GetBody, the errors.As target of the capacity check)
and the ledger's record keys. The ratio to the bare proxy of the same round rose (1.29× to 1.58×, p=0.057, not
significant at 0.05) mostly because the proxy's rounds were faster at the tip; the gateway's own share, its added
p50 minus the proxy's, moved 82 to 102 µs (p=0.22). With ±12–48% on each p50, only a change of tens of percent
would show at p<0.05 here; the route in process, ±3–7%, is the finer check.

`
