// Package promstats exports a ratestore.DB's statistics (DB.Stats) to
// Prometheus. It lives apart from package ratestore so that a program that
// does not use Prometheus does not link it.
//
// The metrics, read from DB.Stats at each scrape:
//
//	ratestore_cached_keys             gauge    states in memory
//	ratestore_dirty_keys              gauge    states changed and not yet written
//	ratestore_loads_total             counter  reads of keys not in memory
//	ratestore_evictions_total         counter  states dropped from memory to stay within the bound
//	ratestore_commits_total           counter  commits that wrote something
//	ratestore_commit_errors_total     counter  of them, those that failed
//	ratestore_committed_ops_total     counter  states and records they wrote or deleted
//	ratestore_commit_seconds_total    counter  their time, writing and syncing
//	ratestore_last_commit_seconds     gauge    the latest one's
//	ratestore_disk_bytes              gauge    the database's files (absent if unknown)
//
// The mean commit latency over a range is
// rate(ratestore_commit_seconds_total[5m]) / rate(ratestore_commits_total[5m]).
package promstats

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratestore/ratestore"
)

// Collector is a prometheus.Collector of one DB's statistics.
type Collector struct {
	db   Source // nil: a store with no statistics
	desc [10]*prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// The indices of Collector.desc, in the order of the package doc.
const (
	cachedKeys = iota
	dirtyKeys
	loads
	evictions
	commits
	commitErrors
	committedOps
	commitSeconds
	lastCommitSeconds
	diskBytes
)

// A Source is a store that keeps statistics: a *ratestore.DB.
type Source interface{ Stats() ratestore.Stats }

// New returns a Collector of db's statistics; labels (such as the
// database's name, when a program has several) are added to every metric.
// Register it with a prometheus.Registerer.
func New(db Source, labels prometheus.Labels) *Collector {
	c := &Collector{db: db}
	for i, m := range [...]struct{ name, help string }{
		cachedKeys:        {"ratestore_cached_keys", "States in memory: the keys used lately, each under its limiter."},
		dirtyKeys:         {"ratestore_dirty_keys", "States changed since they were last written: what the next commit writes."},
		loads:             {"ratestore_loads_total", "Reads from the store of keys not in memory."},
		evictions:         {"ratestore_evictions_total", "States dropped from memory to stay within MaxCachedKeys."},
		commits:           {"ratestore_commits_total", "Commits that had something to write."},
		commitErrors:      {"ratestore_commit_errors_total", "Commits that failed."},
		committedOps:      {"ratestore_committed_ops_total", "States and records written or deleted by commits."},
		commitSeconds:     {"ratestore_commit_seconds_total", "Time spent in commits, writing and syncing."},
		lastCommitSeconds: {"ratestore_last_commit_seconds", "Duration of the latest commit."},
		diskBytes:         {"ratestore_disk_bytes", "Size of the database's files."},
	} {
		c.desc[i] = prometheus.NewDesc(m.name, m.help, nil, labels)
	}
	return c
}

// Of is New for any store: a Collector of its statistics when it is a
// Source, and otherwise one that collects nothing (a store whose figures
// live elsewhere, such as Redis). Programs written once against the
// backend contract (backend.Store) use it.
func Of(store any, labels prometheus.Labels) *Collector {
	src, _ := store.(Source)
	return New(src, labels)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.desc {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.db == nil {
		return
	}
	st := c.db.Stats()
	gauge := func(i int, v float64) { ch <- prometheus.MustNewConstMetric(c.desc[i], prometheus.GaugeValue, v) }
	counter := func(i int, v float64) { ch <- prometheus.MustNewConstMetric(c.desc[i], prometheus.CounterValue, v) }
	gauge(cachedKeys, float64(st.CachedKeys))
	gauge(dirtyKeys, float64(st.DirtyKeys))
	counter(loads, float64(st.Loads))
	counter(evictions, float64(st.Evictions))
	counter(commits, float64(st.Commits))
	counter(commitErrors, float64(st.CommitErrors))
	counter(committedOps, float64(st.CommittedOps))
	counter(commitSeconds, st.CommitTime.Seconds())
	gauge(lastCommitSeconds, st.LastCommitTime.Seconds())
	if st.DiskBytes >= 0 {
		gauge(diskBytes, float64(st.DiskBytes))
	}
}
