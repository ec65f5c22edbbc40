package keystore_test

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/cases"

	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
)

// names are what the keys and teams of the page tests are named from:
// mixed case, letters whose case folding changes their length (ß, ǅ),
// Greek with its final sigma, accents both ways, and none at all.
var names = []string{"alpha", "Alpha", "ÄLPHA", "älpha", "straße", "STRASSE", "Strasse", "σίσυφος",
	"ΣΊΣΥΦΟΣ", "beta", "BETA", "émile", "Émile", "日本", "zeta", "ǅemal", "DŽEMAL", "", "key_0", "KEY_1"}

// randomName draws a name from names, with a suffix one time in two.
func randomName(rng *rand.Rand) string {
	n := names[rng.IntN(len(names))]
	if rng.IntN(2) == 0 {
		n += fmt.Sprintf("-%d", rng.IntN(20))
	}
	return n
}

// fixture is what populate made: the teams, and the secret of every key.
type fixture struct {
	teams   []keystore.Team
	secrets map[string]string
}

// populate makes 5 teams and n keys in ks, drawn from rng: random names,
// three keys in five in one of four teams, one in twenty in the fifth,
// one in three with an expiry within the
// next 100 minutes, some used (each at its own second, some charged a
// random cost), one in five disabled; then it moves clock an hour on, so
// that some keys have expired.
func populate(t *testing.T, ks *keystore.Store, clock *fakeclock.Clock, rng *rand.Rand, n int) fixture {
	t.Helper()
	f := fixture{secrets: map[string]string{}}
	for _, name := range []string{"Platform", "plat-eu", "Σίσυφος", "straße", "Alphateam"} {
		tm, err := ks.CreateTeam(ctx, keystore.TeamSpec{Name: name, Policy: keystore.Policy{
			Windows: []keystore.Window{{Limit: 1e12, Window: time.Hour}}}})
		require.NoError(t, err)
		f.teams = append(f.teams, tm)
	}
	for range n {
		spec := keystore.Spec{Name: randomName(rng), TokenLimit: 1e9}
		switch r := rng.IntN(20); {
		case r < 12:
			spec.Team = f.teams[r%4].ID
		case r == 12:
			spec.Team = f.teams[4].ID
		}
		if rng.IntN(3) == 0 {
			spec.ExpiresAt = clock.Now().Add(time.Duration(1+rng.IntN(100)) * time.Minute)
		}
		k, secret, err := ks.Create(ctx, spec)
		require.NoError(t, err)
		f.secrets[k.ID] = secret
		if rng.IntN(2) == 0 {
			clock.Advance(time.Duration(rng.IntN(3)) * time.Second)
			costs := []pricing.USD{0, 150 * pricing.Micro, pricing.Dollar / 4, 37 * pricing.Dollar / 10, 2500 * pricing.Dollar}
			a, err := ks.Admit(ctx, secret, keystore.Request{Reserve: 10})
			require.NoError(t, err)
			_, err = a.FinishSpend(ctx, 5, costs[rng.IntN(len(costs))])
			require.NoError(t, err)
		}
		if rng.IntN(5) == 0 {
			require.NoError(t, ks.Disable(ctx, k.ID))
		}
	}
	clock.Advance(time.Hour)
	return f
}

// fold is the case folding the model searches and sorts names in.
func fold(s string) string { return cases.Fold().String(s) }

// modelKeys is the brute-force model of Keys: every key (List), filtered,
// searched and sorted as KeyQuery documents, by one pass over them all.
func modelKeys(t *testing.T, ks *keystore.Store, q keystore.KeyQuery, now time.Time) []string {
	t.Helper()
	teamNames := map[string]string{}
	require.NoError(t, ks.ListTeams(ctx, func(tm keystore.Team) error { teamNames[tm.ID] = tm.Name; return nil }))
	var keys []keystore.Key
	require.NoError(t, ks.List(ctx, func(k keystore.Key) error {
		if keep(k, q, now, teamNames) {
			keys = append(keys, k)
		}
		return nil
	}))
	by := strings.TrimPrefix(cmp.Or(q.Sort, "name"), "-")
	slices.SortFunc(keys, func(a, b keystore.Key) int {
		var c int
		switch by {
		case "name":
			c = strings.Compare(fold(a.Name), fold(b.Name))
		case "last_used":
			c = cmp.Compare(second(a.LastUsed), second(b.LastUsed))
		case "spend":
			c = cmp.Compare(coarse(a.LifetimeSpend), coarse(b.LifetimeSpend))
		}
		c = cmp.Or(c, strings.Compare(a.ID, b.ID))
		if strings.HasPrefix(q.Sort, "-") {
			return -c
		}
		return c
	})
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return ids
}

// keep is the model of KeyQuery's filters.
func keep(k keystore.Key, q keystore.KeyQuery, now time.Time, teamNames map[string]string) bool {
	expired := !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt)
	switch {
	case q.Team != "" && k.Team != q.Team,
		q.Status == keystore.StatusActive && (k.Disabled || expired),
		q.Status == keystore.StatusDisabled && !k.Disabled,
		q.Status == keystore.StatusExpired && (k.Disabled || !expired):
		return false
	}
	qf := fold(q.Q)
	return strings.HasPrefix(fold(k.Name), qf) || strings.HasPrefix(k.ID, qf) ||
		k.Team != "" && strings.HasPrefix(fold(teamNames[k.Team]), qf)
}

// second is the model of the order of last use: to the second, never
// used first.
func second(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.Unix()
}

// coarse is the model of the order of spend: cents, with all but their 11
// leading bits cleared.
func coarse(spend pricing.USD) int64 {
	m := uint64(spend / (pricing.Dollar / 100))
	if n := bits.Len64(m); n > 11 {
		m = m >> (n - 11) << (n - 11)
	}
	return int64(m)
}

// pages walks every page of q, returning the ids in order and the number
// of pages.
func pages(t *testing.T, ks *keystore.Store, q keystore.KeyQuery) ([]string, int) {
	t.Helper()
	ids := []string{}
	n := 0
	for {
		p, err := ks.Keys(ctx, q)
		require.NoError(t, err, "%+v", q)
		limit := cmp.Or(q.Limit, keystore.DefaultPageLimit)
		require.LessOrEqual(t, len(p.Keys), limit)
		for _, ku := range p.Keys {
			ids = append(ids, ku.Key.ID)
			require.NotEmpty(t, ku.Usage.Windows, ku.Key.ID)
			require.EqualValues(t, 1e9, ku.Usage.Limit, ku.Key.ID)
		}
		n++
		require.Less(t, n, 10_000, "the pages never end")
		if p.Next == "" {
			return ids, n
		}
		q.Cursor = p.Next
	}
}

var sorts = []string{"", "name", "-name", "last_used", "-last_used", "spend", "-spend"}

// TestKeysModel: every page of random queries (each sort; searches that
// match names, ids and teams' names in mixed case and other scripts, or
// nothing; team and status filters; several limits) together hold exactly
// the keys the brute-force model finds, in its order, on every backend;
// with the plan's bounds as they are (every filter collected), and so
// small that pages are planned every way (collected, walked, a search
// merged with its ranges) and walks stop short of a full page.
func TestKeysModel(t *testing.T) {
	for _, b := range []struct{ collect, scan int }{{10_000, 100_000}, {5, 8}} {
		t.Run(fmt.Sprintf("collect=%d/scan=%d", b.collect, b.scan), func(t *testing.T) {
			defer keystore.SetPlanBounds(b.collect, b.scan)()
			testKeysModel(t)
		})
	}
}

func testKeysModel(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		rng := rand.New(rand.NewPCG(1, 2))
		f := populate(t, e.ks, e.clock, rng, 90)
		var ids []string
		for id := range f.secrets {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		searches := []string{"", "a", "AL", "älp", "STR", "strass", "σ", "ΣΊΣ", "É", "日", "ǆ", "plat", "PLATFORM", "key_",
			"k", "key_0", "KEY_1", "alp", ids[3][:6], ids[7], "zzz", "-"}
		for range 150 {
			q := keystore.KeyQuery{
				Limit:  []int{0, 1, 3, 7, 1000}[rng.IntN(5)],
				Q:      searches[rng.IntN(len(searches))],
				Sort:   sorts[rng.IntN(len(sorts))],
				Status: []keystore.KeyStatus{"", "", keystore.StatusActive, keystore.StatusDisabled, keystore.StatusExpired}[rng.IntN(5)],
			}
			if rng.IntN(3) == 0 {
				q.Team = f.teams[rng.IntN(len(f.teams))].ID
			}
			got, n := pages(t, e.ks, q)
			require.Equal(t, modelKeys(t, e.ks, q, e.clock.Now()), got, "%+v", q)
			if q.Q == "" && q.Status == "" {
				// An index in the page's order (a team's keys have theirs):
				// every page full but the last.
				limit := cmp.Or(q.Limit, keystore.DefaultPageLimit)
				require.Equal(t, max(1, (len(got)+limit-1)/limit), n, "%+v", q)
			}
		}
	})
}

// TestKeysCursorStable: keys created and deleted between the pages of a
// walk, under every sort and with the plan's bounds small as well: no key
// comes twice, and every key that existed throughout comes, in order.
func TestKeysCursorStable(t *testing.T) {
	for _, b := range []struct{ collect, scan int }{{10_000, 100_000}, {5, 8}} {
		t.Run(fmt.Sprintf("collect=%d/scan=%d", b.collect, b.scan), func(t *testing.T) {
			defer keystore.SetPlanBounds(b.collect, b.scan)()
			for _, sort := range sorts[1:] {
				for _, q := range []string{"", "a"} {
					t.Run(fmt.Sprintf("sort=%s/q=%s", sort, q), func(t *testing.T) {
						testCursorStable(t, keystore.KeyQuery{Limit: 4, Sort: sort, Q: q})
					})
				}
			}
		})
	}
}

func testCursorStable(t *testing.T, q keystore.KeyQuery) {
	e := newEnv(t, backendtest.BoltAsync, keystore.Options{})
	rng := rand.New(rand.NewPCG(3, 4))
	populate(t, e.ks, e.clock, rng, 40)
	throughout := map[string]bool{}
	require.NoError(t, e.ks.List(ctx, func(k keystore.Key) error { throughout[k.ID] = true; return nil }))
	seen := map[string]bool{}
	var order []string
	for n := 0; ; n++ {
		require.Less(t, n, 1000)
		p, err := e.ks.Keys(ctx, q)
		require.NoError(t, err)
		for _, ku := range p.Keys {
			require.False(t, seen[ku.Key.ID], "%s twice", ku.Key.ID)
			seen[ku.Key.ID] = true
			if throughout[ku.Key.ID] {
				order = append(order, ku.Key.ID)
			}
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
		// Between pages: two keys made, one deleted (seen or not).
		for range 2 {
			_, _, err := e.ks.Create(ctx, keystore.Spec{Name: randomName(rng), TokenLimit: 1e9})
			require.NoError(t, err)
		}
		if ids := slices.Sorted(maps.Keys(throughout)); len(ids) > 0 {
			id := ids[rng.IntN(len(ids))]
			require.NoError(t, e.ks.Delete(ctx, id))
			delete(throughout, id)
		}
	}
	want := modelKeys(t, e.ks, keystore.KeyQuery{Sort: q.Sort, Q: q.Q}, e.clock.Now())
	want = slices.DeleteFunc(want, func(id string) bool { return !throughout[id] })
	order = slices.DeleteFunc(order, func(id string) bool { return !throughout[id] })
	require.Equal(t, want, order, "every key that existed throughout, once, in order")
}

// TestKeysBadQuery: a query out of range gives a *FieldError naming the
// parameter as the admin API does, matching ErrInvalid.
func TestKeysBadQuery(t *testing.T) {
	e := newEnv(t, backendtest.BoltAsync, keystore.Options{})
	for i := range 3 {
		e.create(fmt.Sprint("k", i), 100)
	}
	p, err := e.ks.Keys(ctx, keystore.KeyQuery{Limit: 1, Sort: "spend"})
	require.NoError(t, err)
	require.NotEmpty(t, p.Next)
	tp, err := e.ks.Teams(ctx, keystore.TeamQuery{})
	require.NoError(t, err)
	require.Empty(t, tp.Teams)
	for _, c := range []struct {
		q     keystore.KeyQuery
		field string
	}{
		{keystore.KeyQuery{Limit: -1}, "limit"},
		{keystore.KeyQuery{Limit: keystore.MaxPageLimit + 1}, "limit"},
		{keystore.KeyQuery{Sort: "created"}, "sort"},
		{keystore.KeyQuery{Sort: "Name"}, "sort"},
		{keystore.KeyQuery{Status: "gone"}, "status"},
		{keystore.KeyQuery{Cursor: "not a cursor"}, "cursor"},
		{keystore.KeyQuery{Cursor: "AQ"}, "cursor"},
		{keystore.KeyQuery{Cursor: p.Next, Sort: "name"}, "cursor"},
		{keystore.KeyQuery{Cursor: p.Next + "AA", Sort: "spend"}, "cursor"},
		{keystore.KeyQuery{Cursor: strings.Repeat("A", 5000)}, "cursor"},
		{keystore.KeyQuery{Q: strings.Repeat("q", keystore.MaxName+1)}, "q"},
	} {
		_, err := e.ks.Keys(ctx, c.q)
		require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", c.q)
		var fe *keystore.FieldError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, c.field, fe.Field, "%+v: %v", c.q, err)
	}
	_, err = e.ks.Teams(ctx, keystore.TeamQuery{Cursor: p.Next})
	var fe *keystore.FieldError
	require.ErrorAs(t, err, &fe, "a cursor of keys is not one of teams")
	require.Equal(t, "cursor", fe.Field)
	_, err = e.ks.Teams(ctx, keystore.TeamQuery{Sort: "last_used"})
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "sort", fe.Field)
}

// TestTeamsModel: the pages of teams, searched by name or id and sorted
// by name either way, hold exactly the teams the model finds, each with
// its usage and key count, on every backend, with the plan's bounds as
// they are and small.
func TestTeamsModel(t *testing.T) {
	for _, b := range []struct{ collect, scan int }{{10_000, 100_000}, {3, 4}} {
		t.Run(fmt.Sprintf("collect=%d/scan=%d", b.collect, b.scan), func(t *testing.T) {
			defer keystore.SetPlanBounds(b.collect, b.scan)()
			forEach(t, testTeamsModel)
		})
	}
}

func testTeamsModel(t *testing.T, e *env) {
	rng := rand.New(rand.NewPCG(5, 6))
	pol := keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: time.Hour}}}
	counts := map[string]int{}
	var teams []keystore.Team
	for range 25 {
		tm, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: randomName(rng), Policy: pol})
		require.NoError(t, err)
		teams = append(teams, tm)
		for range rng.IntN(3) {
			e.createSpec(keystore.Spec{Name: "k", Team: tm.ID, TokenLimit: 100})
			counts[tm.ID]++
		}
	}
	for _, q := range []string{"", "a", "AL", "str", "σ", "team_", "t", teams[3].ID[:7], teams[5].ID, "zzz"} {
		for _, sort := range []string{"", "name", "-name"} {
			for _, limit := range []int{1, 4, 1000} {
				tq := keystore.TeamQuery{Q: q, Sort: sort, Limit: limit}
				var got []string
				for n := 0; ; n++ {
					require.Less(t, n, 1000)
					p, err := e.ks.Teams(ctx, tq)
					require.NoError(t, err)
					for _, tu := range p.Teams {
						got = append(got, tu.Team.ID)
						require.Equal(t, counts[tu.Team.ID], tu.KeyCount, tu.Team.ID)
						require.EqualValues(t, 1e6, tu.Usage.Limit)
					}
					if p.Next == "" {
						break
					}
					tq.Cursor = p.Next
				}
				require.Equal(t, modelTeams(teams, tq), got, "%+v", tq)
			}
		}
	}
}

// modelTeams is the brute-force model of Teams.
func modelTeams(teams []keystore.Team, q keystore.TeamQuery) []string {
	qf := fold(q.Q)
	var ts []keystore.Team
	for _, tm := range teams {
		if strings.HasPrefix(fold(tm.Name), qf) || strings.HasPrefix(tm.ID, qf) {
			ts = append(ts, tm)
		}
	}
	slices.SortFunc(ts, func(a, b keystore.Team) int {
		c := cmp.Or(strings.Compare(fold(a.Name), fold(b.Name)), strings.Compare(a.ID, b.ID))
		if q.Sort == "-name" {
			return -c
		}
		return c
	})
	var ids []string
	for _, tm := range ts {
		ids = append(ids, tm.ID)
	}
	return ids
}
