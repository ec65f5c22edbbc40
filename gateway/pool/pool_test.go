package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var openAI = []string{"openai"}

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

func names(us []*Upstream) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Name
	}
	return out
}

// TestOrderWeights: over a run of requests each upstream is tried first in
// its weight's share, evenly spread, and the others follow heaviest first.
func TestOrderWeights(t *testing.T) {
	p := New([]*Upstream{
		{Name: "a", API: "openai", Weight: 5},
		{Name: "b", API: "openai", Weight: 1},
		{Name: "c", API: "openai", Weight: 1},
	})
	first := map[string]int{}
	var seq []string
	for range 7 {
		o := p.Order(nil, openAI, "gpt-4o", t0)
		require.Len(t, o, 3)
		first[o[0].Name]++
		seq = append(seq, o[0].Name)
		for i := 2; i < len(o); i++ {
			require.GreaterOrEqual(t, o[i-1].Weight, o[i].Weight, "the rest heaviest first")
		}
	}
	require.Equal(t, map[string]int{"a": 5, "b": 1, "c": 1}, first)
	require.Equal(t, []string{"a", "a", "b", "a", "c", "a", "a"}, seq, "nginx's smooth order")
}

// TestOrderServes: an upstream serves its api's requests for the models
// its globs match, and every model when it has none.
func TestOrderServes(t *testing.T) {
	p := New([]*Upstream{
		{Name: "mini", API: "openai", Models: []string{"gpt-4o-mini*"}},
		{Name: "all", API: "openai"},
		{Name: "claude", API: "anthropic", Models: []string{"claude-*"}},
	})
	require.ElementsMatch(t, []string{"mini", "all"}, names(p.Order(nil, openAI, "gpt-4o-mini-2024-07-18", t0)))
	require.Equal(t, []string{"all"}, names(p.Order(nil, openAI, "gpt-4o", t0)))
	require.Equal(t, []string{"claude"}, names(p.Order(nil, []string{"anthropic"}, "claude-sonnet-4", t0)))
	require.Empty(t, p.Order(nil, []string{"anthropic"}, "gpt-4o", t0))
	require.Empty(t, p.Order(nil, []string{"gemini"}, "gemini-2.5-pro", t0))
	require.ElementsMatch(t, []string{"mini", "all"}, names(p.Order(nil, openAI, "", t0)), "a model list")
}

// TestCooldown: a failure cools an upstream down for its Retry-After, else
// 1 s doubling to 60 s; it is left out meanwhile, and a success ends the
// run.
func TestCooldown(t *testing.T) {
	a, b := &Upstream{Name: "a", API: "openai"}, &Upstream{Name: "b", API: "openai"}
	p := New([]*Upstream{a, b})
	now := t0
	a.Failed(now, 0)
	require.Equal(t, now.Add(time.Second), a.CoolingUntil(now))
	require.Equal(t, []string{"b"}, names(p.Order(nil, openAI, "m", now)))
	require.Len(t, p.Order(nil, openAI, "m", now.Add(time.Second)), 2, "back once cooled down")

	var waits []time.Duration
	for range 8 {
		a.Failed(now, 0)
		waits = append(waits, a.CoolingUntil(now).Sub(now))
	}
	require.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, 60 * time.Second, 60 * time.Second, 60 * time.Second}, waits)

	a.Failed(now, 7*time.Second)
	require.Equal(t, now.Add(7*time.Second), a.CoolingUntil(now), "the upstream's Retry-After")
	a.Failed(now, time.Hour)
	require.Equal(t, now.Add(MaxCooldown), a.CoolingUntil(now), "bounded")

	a.Succeeded()
	require.True(t, a.CoolingUntil(now).IsZero())
	a.Failed(now, 0)
	require.Equal(t, now.Add(time.Second), a.CoolingUntil(now), "a new run starts at 1 s")
}

// BenchmarkOrder: choosing among 16 upstreams, with the order for
// failover (the target is 5 µs a request).
func BenchmarkOrder(b *testing.B) {
	ups := make([]*Upstream, 16)
	for i := range ups {
		ups[i] = &Upstream{Name: string(rune('a' + i)), API: "openai", Models: []string{"gpt-4o*", "o3*"}, Weight: 1 + i%3}
	}
	p := New(ups)
	dst := make([]*Upstream, 0, 16)
	b.ReportAllocs()
	for b.Loop() {
		dst = p.Order(dst[:0], openAI, "gpt-4o-mini", t0)
	}
}
