package rollingwindow

import (
	"fmt"
	"testing"
	"time"
)

// benchSizes are the live buckets of the benchmarks: one, the legacy
// window's 60, and a large ring.
var benchSizes = []int{1, 60, 4096}

// benchEachSize runs body as a sub-benchmark "buckets=k" for each k of
// benchSizes, on a State with k live buckets of one second, filled, and
// the instant of its newest bucket.
func benchEachSize(b *testing.B, body func(b *testing.B, k int, s *State, now int64)) {
	for _, k := range benchSizes {
		b.Run(fmt.Sprintf("buckets=%d", k), func(b *testing.B) {
			s := newState(b, Config{Window: time.Duration(k) * time.Second, Bucket: time.Second})
			now := t0
			for range 2 * k {
				now += int64(time.Second)
				s.Add(now, 1)
			}
			b.ReportAllocs()
			body(b, k, s, now)
		})
	}
}

// BenchmarkAdd is Add then Used, each call in a new bucket: every call
// pushes one bucket and expires one, the steady state of a busy key.
func BenchmarkAdd(b *testing.B) {
	benchEachSize(b, func(b *testing.B, k int, s *State, now int64) {
		for b.Loop() {
			now += int64(time.Second)
			s.Add(now, 1)
			if s.Used(now) != int64(k) {
				b.Fatal("wrong total")
			}
		}
	})
}

// BenchmarkAddSameBucket is Add then Used within the newest bucket, the
// common case of many calls a bucket.
func BenchmarkAddSameBucket(b *testing.B) {
	benchEachSize(b, func(b *testing.B, k int, s *State, now int64) {
		for b.Loop() {
			s.Add(now, 1)
			_ = s.Used(now)
		}
	})
}

// BenchmarkRetryAfter asks, of a full window, for a wait that the half of
// its buckets must expire to satisfy: a binary search over them.
func BenchmarkRetryAfter(b *testing.B) {
	benchEachSize(b, func(b *testing.B, k int, s *State, now int64) {
		for b.Loop() {
			if s.RetryAfter(now, int64(k), int64(k/2)+1) <= 0 {
				b.Fatal("no wait")
			}
		}
	})
}
