package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// writePlots draws the report's plots into dir and returns their file
// names. A plot without data is left out.
func writePlots(rep *Report, dir string) ([]string, error) {
	v := newView(rep)
	var files []string
	for _, f := range []func() (*plot.Plot, string, error){v.plotThroughput, v.plotPeers, v.plotRolling, v.plotDisk} {
		p, file, err := f()
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, file)); err != nil {
			return nil, err
		}
		files = append(files, file)
	}
	return files, nil
}

// lines makes a log-log line plot of named series (name, plotter.XYs, ...),
// with the given x ticks; series without points are left out.
func lines(title, x, y string, xticks []float64, series ...any) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for _, t := range xticks {
		ticks = append(ticks, plot.Tick{Value: t, Label: fmtInt(int(t))})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, false
	var kept []any
	for i := 0; i+1 < len(series); i += 2 {
		if xys := series[i+1].(plotter.XYs); len(xys) > 0 {
			kept = append(kept, series[i], xys)
		}
	}
	if len(kept) == 0 {
		return nil, nil
	}
	return p, plotutil.AddLinePoints(p, kept...)
}

// points collects (x, unit of name(x)) for every x that has a result.
func (v *view) points(xs []float64, procs func(x float64) int, name func(x float64) string, unit string) plotter.XYs {
	var xys plotter.XYs
	for _, x := range xs {
		if y, ok := v.ix.median(name(x), procs(x), unit); ok && y > 0 {
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
	}
	return xys
}

func anyProcs(float64) int { return 0 }

// plotThroughput: decisions/s of every mode against concurrency: Sync from
// BenchmarkSync (concurrent callers), Async and cold from BenchmarkPeers
// (GOMAXPROCS goroutines), with x/time/rate and one bbolt Update per
// decision for reference.
func (v *view) plotThroughput() (*plot.Plot, string, error) {
	procs, callers := []float64{1, 2}, []float64{1, 8, 64, 256}
	peer := func(keys int, impl string) plotter.XYs {
		return v.points(procs, func(x float64) int { return int(x) },
			func(float64) string { return peerName(keys, "uniform", impl) }, "decisions/s")
	}
	sync := func(impl string) plotter.XYs {
		return v.points(callers, anyProcs, func(c float64) string { return syncName(impl, int(c)) }, "decisions/s")
	}
	p, err := lines("decisions/s by concurrency, per mode (uniform key choice)", "concurrent callers (Async, cold: GOMAXPROCS goroutines)",
		"decisions/s", []float64{1, 2, 8, 64, 256},
		"Async bolt, 10k keys", peer(10_000, "ratestore-async-bolt"),
		"Async badger, 10k keys", peer(10_000, "ratestore-async-badger"),
		"x/time/rate map, 10k keys", peer(10_000, "xrate"),
		"cold bolt, "+fmtInt(v.bigKeys)+" keys", peer(v.bigKeys, "ratestore-cold-bolt"),
		"cold badger, "+fmtInt(v.bigKeys)+" keys", peer(v.bigKeys, "ratestore-cold-badger"),
		"Sync bolt, 10k keys", sync("ratestore-bolt"),
		"Sync badger, 10k keys", sync("ratestore-badger"),
		"one bbolt Update per decision", sync("bbolt-update"))
	return p, "throughput.png", err
}

// plotPeers: decisions/s of ratestore (Async) and every peer at 10k keys,
// one group of bars per key choice and GOMAXPROCS.
func (v *view) plotPeers() (*plot.Plot, string, error) {
	var groups []string
	var cells []cell
	for _, c := range v.peerCells() {
		if c.keys == 10_000 {
			groups, cells = append(groups, fmt.Sprintf("%s, GOMAXPROCS %d", c.dist, c.procs)), append(cells, c)
		}
	}
	if len(cells) == 0 {
		return nil, "", nil
	}
	p := plot.New()
	p.Title.Text = "decisions/s, 10k keys in memory: ratestore (Async, GCRA) and its peers"
	p.Y.Label.Text = "decisions/s"
	impls := append([]string{"ratestore-async-bolt", "ratestore-async-badger"}, peerNames...)
	w := vg.Points(9)
	for i, impl := range impls {
		vals := make(plotter.Values, len(cells))
		for j, c := range cells {
			vals[j], _ = v.ix.median(peerName(c.keys, c.dist, impl), c.procs, "decisions/s")
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, "", err
		}
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(2*i-len(impls)+1) / 2
		p.Add(bars)
		p.Legend.Add(impl, bars)
	}
	p.Legend.Top = true
	p.Y.Max *= 1.35 // room for the legend
	p.Y.Tick.Marker = rateTicks{}
	p.NominalX(groups...)
	return p, "peers.png", nil
}

func (v *view) plotRolling() (*plot.Plot, string, error) {
	var xs []float64
	for _, n := range rollingWindows {
		xs = append(xs, float64(n))
	}
	var series []any
	for _, op := range []string{"check", "record"} {
		for _, impl := range []string{"legacy", "rollingwindow"} {
			series = append(series, op+" "+impl, v.points(xs, anyProcs, func(n float64) string { return rollName(op, impl, int(n)) }, "ns/op"))
		}
	}
	p, err := lines("rolling window against the legacy O(n) filter-and-sum", "legacy windows of the key", "ns/op", xs, series...)
	if p != nil {
		p.Legend.Left = true // the legacy lines fill the top right
	}
	return p, "rolling.png", err
}

func (v *view) plotDisk() (*plot.Plot, string, error) {
	var vals plotter.Values
	var names []string
	for _, bar := range []struct{ name, backend, unit string }{
		{"bbolt file", "bolt", "disk-B/key"},
		{"bbolt, compacted", "bolt", "compacted-B/key"},
		{"badger directory", "badger", "disk-B/key"},
	} {
		if y, ok := v.any(fmt.Sprintf("Disk/backend=%s/keys=%d", bar.backend, v.diskKeys), bar.unit); ok {
			vals, names = append(vals, y), append(names, bar.name+" ("+strconv.FormatFloat(y, 'f', 0, 64)+" B)")
		}
	}
	if len(vals) == 0 {
		return nil, "", nil
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("bytes on disk per GCRA key, %s keys (targets: bbolt <= 160, badger <= 100)", fmtInt(v.diskKeys))
	p.Y.Label.Text = "bytes per key"
	bars, err := plotter.NewBarChart(vals, vg.Points(50))
	if err != nil {
		return nil, "", err
	}
	bars.Color, bars.LineStyle.Width = plotutil.Color(0), 0
	p.Add(bars)
	// The targets, dashed over the bars they apply to (bars sit at x = 0, 1, 2).
	for _, t := range []struct{ from, to, y float64 }{{-0.4, 1.4, 160}, {1.6, 2.4, 100}} {
		if t.to >= float64(len(vals)) {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: t.from, Y: t.y}, {X: t.to, Y: t.y}})
		if err != nil {
			return nil, "", err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
	}
	p.Y.Min, p.Y.Max = 0, max(p.Y.Max, 180)
	p.NominalX(names...)
	return p, "disk.png", nil
}

// rateTicks labels a linear axis of rates as fmtRate does: "4.00M/s".
type rateTicks struct{}

func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = fmtRate(ticks[i].Value)
		}
	}
	return ticks
}
