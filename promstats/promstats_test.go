package promstats_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/promstats"
	"github.com/ratestore/ratestore/strategies"
)

// TestCollector: the metrics a registry gathers are the DB's Stats, with
// the labels given, and pass the registry's consistency checks (lint).
func TestCollector(t *testing.T) {
	db, err := ratestore.Open(filepath.Join(t.TempDir(), "db"), ratestore.Options{})
	require.NoError(t, err)
	defer db.Close()
	l, err := db.Limiter("api", strategies.GCRA{Rate: 1, Burst: 5})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} { // new keys: not read from the store
		_, err := l.Allow(context.Background(), k)
		require.NoError(t, err)
	}
	require.NoError(t, db.Flush(context.Background()))

	c := promstats.New(db, prometheus.Labels{"db": "main"})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	require.Empty(t, problems)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ratestore_cached_keys States in memory: the keys used lately, each under its limiter.
# TYPE ratestore_cached_keys gauge
ratestore_cached_keys{db="main"} 3
# HELP ratestore_dirty_keys States changed since they were last written: what the next commit writes.
# TYPE ratestore_dirty_keys gauge
ratestore_dirty_keys{db="main"} 0
# HELP ratestore_loads_total Reads from the store of keys not in memory.
# TYPE ratestore_loads_total counter
ratestore_loads_total{db="main"} 0
# HELP ratestore_committed_ops_total States and records written or deleted by commits.
# TYPE ratestore_committed_ops_total counter
ratestore_committed_ops_total{db="main"} 3
`), "ratestore_cached_keys", "ratestore_dirty_keys", "ratestore_loads_total", "ratestore_committed_ops_total"))

	st := db.Stats()
	require.InDelta(t, st.CommitTime.Seconds(), testutil.ToFloat64(onlyMetric(c, "ratestore_commit_seconds_total")), 1e-9)
	require.Equal(t, float64(st.DiskBytes), testutil.ToFloat64(onlyMetric(c, "ratestore_disk_bytes")))
	require.Equal(t, float64(st.Commits), testutil.ToFloat64(onlyMetric(c, "ratestore_commits_total")))
}

// onlyMetric is a collector of the one metric of c called name.
func onlyMetric(c prometheus.Collector, name string) prometheus.Collector {
	return filtered{c, name}
}

type filtered struct {
	c    prometheus.Collector
	name string
}

func (f filtered) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }

func (f filtered) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 16)
	go func() { f.c.Collect(all); close(all) }()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+f.name+`"`) {
			ch <- m
		}
	}
}
