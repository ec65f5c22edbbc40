package keystore_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/redisstore"
)

// redisClient returns a client of srv, for what the tests ask Redis
// itself.
func redisClient(t *testing.T, srv *redistest.Server) *redis.Client {
	opt, err := redis.ParseURL(srv.URL())
	require.NoError(t, err)
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// scans returns how many SCAN commands srv has run (INFO commandstats).
func scans(t *testing.T, c *redis.Client) int {
	info, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(line, "cmdstat_scan:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

// onePage returns the keys of the first page of q in ks, by id.
func onePage(t *testing.T, ks *keystore.Store, q keystore.KeyQuery) []keystore.KeyUsage {
	t.Helper()
	p, err := ks.Keys(ctx, q)
	require.NoError(t, err)
	require.Empty(t, p.Next)
	return p.Keys
}

// pageIDs returns the ids of the keys of the first page of q in ks.
func pageIDs(t *testing.T, ks *keystore.Store, q keystore.KeyQuery) []string {
	t.Helper()
	var ids []string
	for _, ku := range onePage(t, ks, q) {
		ids = append(ids, ku.Key.ID)
	}
	return ids
}

// TestSharedPages: two processes share the keys on one redis-server; a key
// created, renamed, moved to a team, disabled, used or deleted through one,
// and a team created, renamed or deleted, appears so in the other's next
// page, which reads what changed from the feed of changes, never by a
// SCAN of the keyspace, in at most four round trips for a page of 30 keys.
func TestSharedPages(t *testing.T) {
	a, _, clock, srv := twoStoresOn(t)
	rc := redisClient(t, srv)
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clock.Now, Timeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { rdb.Close() })
	trips := redistest.CountTrips(rdb.Client())
	b, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(t, err)
	before := scans(t, rc)

	k, secret, err := a.Create(ctx, keystore.Spec{Name: "Zed", TokenLimit: 1000})
	require.NoError(t, err)
	require.Equal(t, []string{k.ID}, pageIDs(t, b, keystore.KeyQuery{Q: "zed"}), "created")
	_, err = a.Update(ctx, k.ID, func(s *keystore.Spec) error { s.Name = "Yak"; return nil })
	require.NoError(t, err)
	require.Empty(t, pageIDs(t, b, keystore.KeyQuery{Q: "zed"}), "renamed")
	require.Equal(t, []string{k.ID}, pageIDs(t, b, keystore.KeyQuery{Q: "YA"}), "renamed")

	team, err := a.CreateTeam(ctx, keystore.TeamSpec{Name: "Ops", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: time.Hour}}}})
	require.NoError(t, err)
	_, err = a.Update(ctx, k.ID, func(s *keystore.Spec) error { s.Team = team.ID; return nil })
	require.NoError(t, err)
	require.Equal(t, []string{k.ID}, pageIDs(t, b, keystore.KeyQuery{Team: team.ID}), "moved to a team")
	require.Equal(t, []string{k.ID}, pageIDs(t, b, keystore.KeyQuery{Q: "op"}), "found by its team's name")
	tp, err := b.Teams(ctx, keystore.TeamQuery{Q: "ops"})
	require.NoError(t, err)
	require.Len(t, tp.Teams, 1)
	require.Equal(t, 1, tp.Teams[0].KeyCount)

	require.NoError(t, a.Disable(ctx, k.ID))
	require.Equal(t, []string{k.ID}, pageIDs(t, b, keystore.KeyQuery{Status: keystore.StatusDisabled}), "disabled")
	require.Empty(t, pageIDs(t, b, keystore.KeyQuery{Status: keystore.StatusActive}), "disabled")
	require.NoError(t, a.Enable(ctx, k.ID))

	// Used through a, at a later second than another key b made: first by
	// last use, with its tokens and spend.
	other, _, err := b.Create(ctx, keystore.Spec{Name: "other", TokenLimit: 1000})
	require.NoError(t, err)
	_, err = b.RecordUsage(ctx, other.ID, 1)
	require.NoError(t, err)
	clock.Advance(2 * time.Second)
	adm, err := a.Admit(ctx, secret, keystore.Request{Reserve: 10})
	require.NoError(t, err)
	_, err = adm.FinishSpend(ctx, 7, 2*pricing.Dollar)
	require.NoError(t, err)
	used := onePage(t, b, keystore.KeyQuery{Sort: "-last_used"})
	require.Equal(t, []string{k.ID, other.ID}, []string{used[0].Key.ID, used[1].Key.ID}, "used")
	require.EqualValues(t, 7, used[0].Key.LifetimeTokens)
	require.Equal(t, 2*pricing.Dollar, used[0].Key.LifetimeSpend)
	require.EqualValues(t, 7, used[0].Usage.Used)
	require.Equal(t, k.ID, pageIDs(t, b, keystore.KeyQuery{Sort: "-spend"})[0], "charged")

	_, err = a.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error { s.Name = "Platform"; return nil })
	require.NoError(t, err)
	tp, err = b.Teams(ctx, keystore.TeamQuery{Q: "plat"})
	require.NoError(t, err)
	require.Len(t, tp.Teams, 1, "team renamed")
	require.Equal(t, "Platform", tp.Teams[0].Team.Name)

	require.NoError(t, a.Delete(ctx, k.ID))
	require.Equal(t, []string{other.ID}, pageIDs(t, b, keystore.KeyQuery{}), "deleted")
	require.NoError(t, a.DeleteTeam(ctx, team.ID))
	tp, err = b.Teams(ctx, keystore.TeamQuery{})
	require.NoError(t, err)
	require.Empty(t, tp.Teams, "team deleted")

	for i := range 29 {
		_, _, err := a.Create(ctx, keystore.Spec{Name: "bulk" + strconv.Itoa(i), TokenLimit: 1000})
		require.NoError(t, err)
	}
	start := trips()
	require.Len(t, pageIDs(t, b, keystore.KeyQuery{}), 30)
	require.LessOrEqual(t, trips()-start, int64(4), "round trips of a page of 30 keys, 29 of them new")
	start = trips()
	require.Len(t, pageIDs(t, b, keystore.KeyQuery{}), 30)
	require.LessOrEqual(t, trips()-start, int64(3), "round trips of a page of 30 keys, none changed")
	require.Equal(t, before, scans(t, rc), "no SCAN")
}

// TestSharedPagesGap: a Store whose position in the feed of changes was
// trimmed away (ErrGap) reads every key and team again, and then follows
// the feed as before.
func TestSharedPagesGap(t *testing.T) {
	a, b, _, srv := twoStoresOn(t)
	rc := redisClient(t, srv)
	k1, _, err := a.Create(ctx, keystore.Spec{Name: "one", TokenLimit: 1000})
	require.NoError(t, err)
	require.Equal(t, []string{k1.ID}, pageIDs(t, b, keystore.KeyQuery{}))

	k2, _, err := a.Create(ctx, keystore.Spec{Name: "two", TokenLimit: 1000})
	require.NoError(t, err)
	require.NoError(t, a.Delete(ctx, k1.ID))
	team, err := a.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1e6, Window: time.Hour}}}})
	require.NoError(t, err)
	feed := redisstore.DefaultPrefix + "{keystore}/f"
	require.NoError(t, rc.XTrimMaxLen(ctx, feed, 0).Err())
	require.Equal(t, []string{k2.ID}, pageIDs(t, b, keystore.KeyQuery{}), "read again after the gap")
	tp, err := b.Teams(ctx, keystore.TeamQuery{})
	require.NoError(t, err)
	require.Len(t, tp.Teams, 1)
	require.Equal(t, team.ID, tp.Teams[0].Team.ID)

	k3, _, err := a.Create(ctx, keystore.Spec{Name: "three", TokenLimit: 1000})
	require.NoError(t, err)
	require.Equal(t, []string{k3.ID, k2.ID}, pageIDs(t, b, keystore.KeyQuery{}), "then the feed again")
}
