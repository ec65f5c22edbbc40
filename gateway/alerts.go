package gateway

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratestore/ratestore/alert"
	"github.com/ratestore/ratestore/keystore"
)

// observe tells the alert notifier, if any, the usage of rq's key after
// it, u, and its team's: each token window and budget, so that
// a crossing of a threshold is sent once (package alert). The team's
// usage is read for it: one more read per request of a team's key, and
// only with alerts on.
func (g *Gateway) observe(ctx context.Context, rq *request, u keystore.Usage) {
	if g.alerts == nil {
		return
	}
	levels := appendLevels(nil, u, false)
	if rq.team != "" {
		if tu, err := g.keys.TeamUsage(ctx, rq.team); err == nil {
			levels = appendLevels(levels, tu, true)
		}
	}
	g.alerts.Observe(rq.keyID, rq.team, levels)
}

// appendLevels appends the alert levels of usage u: its token windows
// and its budgets, rolling or calendar, each with the instant its usage
// next goes down (a window's oldest usage leaving it, a period's end).
func appendLevels(levels []alert.Level, u keystore.Usage, team bool) []alert.Level {
	for _, w := range u.Windows {
		levels = append(levels, alert.Level{
			Type: alert.TypeWindow, Name: "window " + w.Window.String(), Team: team,
			Limit: w.Limit, Spent: w.Used, ResetsAt: w.WindowEnd,
		})
	}
	for _, b := range u.Budgets {
		levels = append(levels, alert.Level{
			Type: alert.TypeBudget, Name: "budget " + b.String(), Team: team,
			Limit: int64(b.Limit), Spent: int64(b.Spent), ResetsAt: b.ResetsAt, Period: b.Period != 0,
		})
	}
	return levels
}

// alertCollector exports the notifier's counters in /metrics.
type alertCollector struct {
	n    *alert.Notifier
	desc *prometheus.Desc
}

func newAlertCollector(n *alert.Notifier) *alertCollector {
	return &alertCollector{n: n, desc: prometheus.NewDesc("ratestore_alerts_total",
		"Budget and token-window alerts, by outcome: crossed (a threshold crossed, once per window), sent (delivered to the webhook), "+
			"failed (given up after retries), dropped (the queue was full), retries (attempts after the first).",
		[]string{"outcome"}, nil)}
}

func (c *alertCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *alertCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.n.Stats()
	for _, o := range []struct {
		name string
		v    int64
	}{{"crossed", s.Crossings}, {"sent", s.Sent}, {"failed", s.Failed}, {"dropped", s.Dropped}, {"retries", s.Retries}} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(o.v), o.name)
	}
}
