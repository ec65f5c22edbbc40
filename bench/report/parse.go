package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Result is one result line of `go test -bench` output.
type Result struct {
	Run     int                // the invocation it came from (marker "# run=N ...")
	Name    string             // "Peers/keys=10000/dist=zipf/impl=xrate": no "Benchmark", no -P
	Procs   int                // GOMAXPROCS: the -P suffix, 1 when there is none
	Iters   int64              // b.N
	Metrics map[string]float64 // by unit: "ns/op", "allocs/op", "decisions/s", ...
}

// Family is the benchmark function without "Benchmark": "Peers".
func (r Result) Family() string { fam, _, _ := strings.Cut(r.Name, "/"); return fam }

// Param is the value of the name's element key=value, "" without one.
func (r Result) Param(key string) string {
	for _, el := range strings.Split(r.Name, "/")[1:] {
		if k, v, ok := strings.Cut(el, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Report is everything one run of the generator recorded: the results,
// the facts about the machine ("# env key: value" lines), the profiles
// ("# pprof name: line") and the load average as each invocation began
// (its marker's "load=1.50,0.90,0.70").
type Report struct {
	Results  []Result
	Env      map[string]string
	Profiles map[string][]string
	RunLoad  map[int]string // "1.50 0.90 0.70", by invocation
}

// Parse reads the generator's raw output: `go test -bench` output of
// several invocations, each introduced by a "# run=N" marker line, and the
// generator's own "# env" and "# pprof" lines. Other lines are ignored.
func Parse(r io.Reader) (*Report, error) {
	rep := &Report{Env: map[string]string{}, Profiles: map[string][]string{}, RunLoad: map[int]string{}}
	run := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# run="):
			f := strings.Fields(strings.TrimPrefix(line, "# run="))
			n, err := strconv.Atoi(f[0])
			if err != nil {
				return nil, fmt.Errorf("bad marker %q", line)
			}
			run = n
			for _, field := range f[1:] {
				if load, ok := strings.CutPrefix(field, "load="); ok {
					rep.RunLoad[run] = strings.ReplaceAll(load, ",", " ")
				}
			}
		case strings.HasPrefix(line, "# env "):
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "# env "), ": ")
			rep.Env[k] = v
		case strings.HasPrefix(line, "# pprof "):
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "# pprof "), ": ")
			rep.Profiles[k] = append(rep.Profiles[k], v)
		case strings.HasPrefix(line, "Benchmark"):
			if res, ok := parseLine(line); ok {
				res.Run = run
				rep.Results = append(rep.Results, res)
			}
		}
	}
	return rep, sc.Err()
}

// parseLine parses "BenchmarkX/a=b-2  1000  158.0 ns/op  0 allocs/op ...".
// Lines that are not results (a benchmark's log output, a FAIL) give false.
func parseLine(line string) (Result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return Result{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false
	}
	res := Result{Name: strings.TrimPrefix(f[0], "Benchmark"), Procs: 1, Iters: iters, Metrics: map[string]float64{}}
	if i := strings.LastIndexByte(res.Name, '-'); i >= 0 {
		if p, err := strconv.Atoi(res.Name[i+1:]); err == nil {
			res.Name, res.Procs = res.Name[:i], p
		}
	}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		res.Metrics[f[i+1]] = v
	}
	return res, true
}

// index finds results by name and GOMAXPROCS, over all runs; GOMAXPROCS 0
// finds them whatever GOMAXPROCS they ran with.
type index map[string][]Result

func key(name string, procs int) string { return name + "@" + strconv.Itoa(procs) }

func newIndex(rs []Result) index {
	ix := index{}
	for _, r := range rs {
		for _, k := range []string{key(r.Name, r.Procs), key(r.Name, 0)} {
			ix[k] = append(ix[k], r)
		}
	}
	return ix
}

// median is the median of unit over every run of name at procs.
func (ix index) median(name string, procs int, unit string) (float64, bool) {
	var vs []float64
	for _, r := range ix[key(name, procs)] {
		if v, ok := r.Metrics[unit]; ok {
			vs = append(vs, v)
		}
	}
	return medianOf(vs)
}

// ratio is a's unit over b's, computed only between results of the same
// invocation (measured seconds apart), then summarized over invocations.
func (ix index) ratio(a, b string, procs int, unit string) (med, lo, hi float64, ok bool) {
	var vs []float64
	for _, ra := range ix[key(a, procs)] {
		for _, rb := range ix[key(b, procs)] {
			va, oka := ra.Metrics[unit]
			vb, okb := rb.Metrics[unit]
			if ra.Run == rb.Run && oka && okb && vb != 0 {
				vs = append(vs, va/vb)
			}
		}
	}
	return summarize(vs)
}

// spread summarizes unit over every run of name at procs.
func (ix index) spread(name string, procs int, unit string) (med, lo, hi float64, ok bool) {
	var vs []float64
	for _, r := range ix[key(name, procs)] {
		if v, ok := r.Metrics[unit]; ok {
			vs = append(vs, v)
		}
	}
	return summarize(vs)
}

// summarize is the median, lowest and highest of vs.
func summarize(vs []float64) (med, lo, hi float64, ok bool) {
	med, ok = medianOf(vs)
	if !ok {
		return 0, 0, 0, false
	}
	return med, slices.Min(vs), slices.Max(vs), true
}

func medianOf(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	vs = slices.Clone(vs)
	sort.Float64s(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2, true
	}
	return vs[len(vs)/2], true
}
