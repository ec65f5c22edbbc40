// Command report runs the benchmarks of package bench in a bounded
// configuration (about eight minutes on 2 cores) and writes ../REPORT.md
// (relative to this directory: bench/REPORT.md) with the tables, and PNG
// plots next to this file, in bench/report/.
//
//	cd bench && go run ./report          # run everything, write REPORT.md and report/*.png
//	cd bench && go run ./report -quick   # seconds: checks the pipeline, numbers meaningless
//	cd bench && go run ./report -from report/bench-output.txt   # render again, no run
//	cd bench && go run ./report -full    # also 10M keys: several GiB, minutes more
//
// It builds the test binary once, runs it several times (one invocation per
// family and round, rounds of a family spread over the whole run), and
// keeps their standard output, with its own measurements of the machine,
// in report/bench-output.txt, which is what it renders from. Ratios are
// always computed between results of the same invocation.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// stage is one benchmark family and how to run it.
type stage struct {
	name      string
	bench     string // -test.bench
	benchtime string
	cpu       string // -test.cpu, "" for the default (all cores)
	size      size
	rounds    int
}

// extraEnv is the environment of a stage beyond its size's: the walk of
// every page at 10M keys runs in a heap limited to 8 GiB (without it,
// building its store took 13 GiB of RSS, most of it garbage not yet
// collected).
func (st stage) extraEnv() []string {
	if st.name == "admin-walk" {
		return []string{"GOMEMLIMIT=8GiB"}
	}
	return nil
}

// withBase reports whether a stage runs the baseline's test binary too
// (-base786), before this tree's, in the same invocation: the admin API at
// 10 keys against 786b47c's.
func (st stage) withBase() bool { return st.name == "admin-small" }

// size is the key counts a stage runs at, set through the environment.
type size int

const (
	small   size = iota // RATESTORE_BENCH_FULL=0: 20k keys at most
	keys1M              // RATESTORE_BENCH_FULL=1: 1M keys
	keys10M             // RATESTORE_BENCH_10M=1 as well: 10M keys, only with -full
)

// env is the environment a stage of size s runs in: the variables that set
// the key counts, each given explicitly so that none is inherited from the
// caller's environment (a smoke run's RATESTORE_BENCH_KEYS would leave the
// 1M stages' -test.bench matching nothing).
func (s size) env() []string {
	full, tenM := "0", "0"
	if s >= keys1M {
		full = "1"
	}
	if s >= keys10M {
		tenM = "1"
	}
	return []string{"RATESTORE_BENCH_FULL=" + full, "RATESTORE_BENCH_10M=" + tenM,
		"RATESTORE_BENCH_KEYS=", "RATESTORE_BENCH_10M_KEYS="}
}

// timeout is a stage's -test.timeout: room for a loaded machine, and 10M
// keys take minutes per side (and, the first time, building the key store
// and the ledger that the operator's surface's benchmarks keep).
func (s size) timeout() string {
	return [...]string{small: "5m", keys1M: "20m", keys10M: "60m"}[s]
}

// baseStages are the stages of every report (see plan).
var baseStages = []stage{
	{"hot", "^BenchmarkHot$", "100ms", "", small, 3},
	{"paired", "^BenchmarkHotPaired$", "300ms", "", small, 2},
	{"peers", "^BenchmarkPeers$/^keys=(1|10000)$/", "250ms", "1,2", small, 2},
	// The steady state at 1M keys: every key created, an untimed pass
	// over the key sequence, then 5M decisions per sub-benchmark (a
	// fixed count: each round of the testing package's b.N search
	// starts with a runtime.GC over the side's 1M keys). Only the two
	// fastest peers beside ratestore-async, to keep it to ~2 minutes.
	{"peers", "^BenchmarkPeers$/^keys=1000000$/./^impl=(xrate|golimiter|ratestore-async-bolt|ratestore-async-badger)$",
		"5000000x", "1,2", keys1M, 1},
	// The cold sides read from disk at ~10-30 µs a decision: 200k each.
	{"peers", "^BenchmarkPeers$/^keys=1000000$/./^impl=ratestore-cold-", "200000x", "1,2", keys1M, 1},
	{"sync", "^BenchmarkSync$", "400ms", "", small, 2},
	{"async", "^BenchmarkAsync$", "300ms", "", small, 2},
	{"apply", "^Benchmark(Apply|Clock)$", "100ms", "", small, 1},
	// 300ms: ours is ~40 ns an operation, and its flatness is a ratio
	// of two of them.
	{"rolling", "^BenchmarkRollingWindow$", "300ms", "", small, 2},
	// The key store against its baselines; 200ms: its check is a few
	// hundred ns, and each ratio is of two results of one invocation.
	{"keys", "^BenchmarkKeys(Check|AdmitFinish|SyncRecord)$", "200ms", "", small, 2},
	// The gateway against direct calls to the same fake upstream: a
	// few seconds per round (the paced load is 1000 requests/s).
	{"gateway", "^BenchmarkGateway(Overhead|Stream)$", "700ms", "", small, 2},
	// The toolkit: Reserve+Cancel against x/time/rate, the RESP server
	// against redis-server; Wait's line, one iteration of 10s.
	{"toolkit", "^Benchmark(Reserve|ServeRESP)$", "300ms", "", small, 2},
	{"wait", "^BenchmarkWaitFIFO$", "1x", "", small, 1},
	// redisstore against go-redis/redis_rate on one redis-server.
	{"redis", "^BenchmarkRedis$", "1s", "", small, 2},
	// 4 instances sharing limits on one redis-server. A fixed count:
	// each run of the body starts its servers and warms 4 instances on
	// 10k keys (~1.5 s a side), and a time-based b.N search would run
	// it several times; ~8 s a round.
	{"redis-instances", "^BenchmarkRedisInstances$", "10000x", "", small, 2},
	// Heap per loaded key: one load of 100k keys is the measurement.
	{"keys-memory", "^BenchmarkKeysMemory$", "1x", "", small, 1},
	// A fixed count of new keys, all built before the timer; a few
	// seconds a round.
	{"first-touch", "^BenchmarkFirstTouch$", "1000000x", "", small, 2},
	// Misses on a file of 1M stored keys, filled once per round (~10 s).
	{"miss", "^BenchmarkMiss$", "200000x", "", keys1M, 2},
	// The store's work per dirty key as its file grows (10k, 200k and
	// 1M keys): a file built per run, then 1000 commits of 1024 keys.
	{"store-write", "^BenchmarkStoreWrite$", "1000x", "", keys1M, 1},
	// One backend per process, so that RSS is about it alone.
	{"disk", "^BenchmarkDisk$/^backend=bolt$", "3x", "", keys1M, 1},
	{"disk", "^BenchmarkDisk$/^backend=badger$", "3x", "", keys1M, 1},
}

// plan is the bounded run: BenchmarkHot 3 times, BenchmarkHotPaired
// (the hot target, robust to the load of a shared machine) twice, the cheap key counts of
// BenchmarkPeers, BenchmarkSync, BenchmarkAsync, BenchmarkRollingWindow
// and the key store's families (BenchmarkKeys*, but BenchmarkKeysMemory)
// and the gateway's (BenchmarkGatewayOverhead, BenchmarkGatewayStream)
// and the toolkit's (BenchmarkReserve, BenchmarkServeRESP, BenchmarkRedis,
// BenchmarkRedisInstances) and the scale's (BenchmarkFirstTouch,
// BenchmarkMiss) twice, the rest once; with full, BenchmarkScale at 10M
// keys too. quick keeps the stages with tiny benchtimes, one round and no
// 1M or 10M keys.
func plan(quick, full bool) []stage {
	stages := slices.Clone(baseStages)
	stages = append(stages, surfaceStages(full && !quick)...)
	if full && !quick {
		// 10M keys, 3 sides: several GiB and minutes each.
		stages = append(stages, stage{"scale", "^BenchmarkScale$", "5000000x", "1,2", keys10M, 1})
	}
	if quick {
		shrink(stages)
	}
	return stages
}

// surfaceStages are the operator's surface's: a page of each query at 1M
// keys and the whole list (~11 s), the ledger's worst queries at 1M
// entries on bolt and Redis (the store and the ledger built once into the
// temporary directory and kept), and the admin API at 10 keys, twice,
// beside 786b47c's with -base786, its sign-ins counted apart; with tenM, the walk of every page at 10M
// keys (see extraEnv) and the ledger at 10M entries.
func surfaceStages(tenM bool) []stage {
	stages := []stage{
		{"admin-keys", "^BenchmarkAdminKeysPage$", "300ms", "", keys1M, 1},
		{"admin-ledger", "^BenchmarkAdminLedger$", "3x", "", keys1M, 1},
		{"admin-small", "^BenchmarkAdminSmall$/./^op=(create|get|list|patch|spend|requests|console-get)$", "300ms", "", small, 2},
		// 5000 sign-ins: past the console's 10,000 sessions each sign-in
		// forgets the oldest, and the bolt scan that finds them walks every
		// change not yet checkpointed (the forgotten sessions among them),
		// so that a timed run of many sign-ins takes minutes
		// (bench/README.md).
		{"admin-small", "^BenchmarkAdminSmall$/./^op=signin$", "5000x", "", small, 2},
	}
	if tenM {
		stages = append(stages, stage{"admin-walk", "^BenchmarkAdminKeysWalk$", "1x", "", keys10M, 1},
			stage{"admin-ledger", "^BenchmarkAdminLedger$", "1x", "", keys10M, 1})
	}
	return stages
}

// shrink makes stages quick: one round each, small key counts, tiny
// benchtimes (one iteration where one is already seconds).
func shrink(stages []stage) {
	for i := range stages {
		st := &stages[i]
		st.size, st.rounds, st.benchtime = small, 1, "10ms"
		if st.name == "disk" || st.name == "keys-memory" || st.name == "wait" || st.name == "redis-instances" ||
			st.name == "store-write" || st.name == "admin-ledger" {
			st.benchtime = "1x"
		}
	}
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	quick := flag.Bool("quick", false, "tiny benchtimes, no 1M keys: checks the pipeline in seconds")
	full := flag.Bool("full", false, "also run BenchmarkScale, BenchmarkAdminKeysWalk and BenchmarkAdminLedger at 10M keys (several GiB of memory, minutes more)")
	base786 := flag.Bool("base786", false, "also run BenchmarkAdminSmall against 786b47c's gateway (a copy of that commit, from git, in a temporary directory)")
	from := flag.String("from", "", "render this raw output instead of running the benchmarks")
	out := flag.String("out", "REPORT.md", "the Markdown report")
	dir := flag.String("dir", "report", "where the plots and the raw output go")
	section := flag.String("section", "", "with -from: render only this section (surface: the operator's surface) into -out, in place of the one there")
	note := flag.String("note", "", "with -section: what the section adds to its note, e.g. what did not run")
	flag.Parse()
	if *section != "" {
		if err := renderSection(*section, *from, *out, *note); err != nil {
			log.Fatal(err)
		}
		return
	}

	var raw []byte
	var err error
	if *from != "" {
		raw, err = os.ReadFile(*from)
	} else {
		raw, err = runAll(*quick, *full, *base786)
		if err == nil {
			err = os.WriteFile(filepath.Join(*dir, "bench-output.txt"), raw, 0o644)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	rep, err := Parse(bytes.NewReader(raw))
	if err != nil {
		log.Fatal(err)
	}
	plots, err := writePlots(rep, *dir)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, []byte(Render(rep, plots)), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and %d plots in %s/", *out, len(plots), *dir)
}

// renderSection renders the section named section alone from the raw
// output in from, in place of the one in the report out, for a run of
// that section's families only: a full run takes longer than a change to
// them may wait for.
func renderSection(section, from, out, note string) error {
	if section != "surface" {
		return fmt.Errorf("-section %q: only surface", section)
	}
	if from == "" {
		return errors.New("-section needs -from: the raw output of the section's run")
	}
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	rep, err := Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	alone := fmt.Sprintf("*This section alone was rendered from %s (`go run ./report -section surface -from %s`), the "+
		"output of a run of its families only, not from the run the rest of this report comes from; its "+
		"targets are not in the table of DESIGN.md targets above.*", from, from)
	if note != "" {
		alone += " " + note
	}
	if err := os.WriteFile(out, []byte(spliceSection(string(doc), SurfaceSection(rep, alone), "## Profiles of ")), 0o644); err != nil {
		return err
	}
	log.Printf("wrote the operator's surface's section into %s", out)
	return nil
}

// runAll builds the test binary (and with base786 the baseline's), runs the
// plan round by round and returns everything it printed, with marker
// lines.
func runAll(quick, full, base786 bool) ([]byte, error) {
	start := time.Now()
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, os.Stderr)
	envf := func(k, format string, a ...any) { fmt.Fprintf(w, "# env %s: %s\n", k, fmt.Sprintf(format, a...)) }
	machine(envf)
	envf("load-start", "%s", loadAvg())
	fsyncLatency(envf, "fdatasync-start")

	tmp, err := os.MkdirTemp("", "ratestore-report-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the benchmarks: %w", err)
	}

	bins := binaries{head: bin}
	if base786 {
		if bins.base, err = buildBase786(tmp); err != nil {
			return nil, err
		}
	}
	run := runStages(w, envf, bins, plan(quick, full))
	rep, err := Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	runProfiles(w, envf, bin, tmp, worstHot(rep, 2), run, quick)

	fsyncLatency(envf, "fdatasync-end")
	envf("load-end", "%s", loadAvg())
	envf("elapsed", "%s", time.Since(start).Round(time.Second))
	envf("mode", "%s", modeName(quick, full))
	return buf.Bytes(), nil
}

// binaries are the test binaries a run runs: this tree's, and the
// baseline's ("" for none; see buildBase786).
type binaries struct{ head, base string }

// runStages runs the test binary once per stage and round, rounds of a
// stage spread over the run, and returns how many invocations it made. A
// stage withBase runs the baseline's binary first, in the same invocation
// (the same marker), when there is one.
func runStages(w io.Writer, envf func(k, format string, a ...any), bins binaries, stages []stage) (run int) {
	for round := 1; ; round++ {
		ran := false
		for _, st := range stages {
			if round > st.rounds {
				continue
			}
			ran, run = true, run+1
			fmt.Fprintf(w, "# run=%d stage=%s round=%d bench=%s benchtime=%s load=%s\n", run, st.name, round, st.bench, st.benchtime,
				strings.ReplaceAll(loadAvg(), " ", ","))
			args := []string{"-test.run=^$", "-test.bench=" + st.bench, "-test.benchtime=" + st.benchtime, "-test.benchmem",
				"-test.timeout=" + st.size.timeout()}
			if st.cpu != "" {
				args = append(args, "-test.cpu="+st.cpu)
			}
			t := time.Now()
			env := append(st.size.env(), st.extraEnv()...)
			if st.withBase() && bins.base != "" {
				if err := runBench(w, bins.base, env, args...); err != nil {
					envf(fmt.Sprintf("failed-run-%d-base", run), "%s: %v", st.bench, err)
				}
			}
			if err := runBench(w, bins.head, env, args...); err != nil {
				envf(fmt.Sprintf("failed-run-%d", run), "%s: %v", st.bench, err)
			}
			fmt.Fprintf(w, "# run=%d took %v\n", run, time.Since(t).Round(time.Second/10))
		}
		if !ran {
			return run
		}
	}
}

// runProfiles CPU-profiles the hot strategies furthest above x/time/rate
// (worst), numbering the invocations after run, and writes their pprof -top.
func runProfiles(w io.Writer, envf func(k, format string, a ...any), bin, tmp string, worst []string, run int, quick bool) {
	profTime := "1s"
	if quick {
		profTime = "50ms"
	}
	for _, s := range worst {
		run++
		prof := filepath.Join(tmp, s+".prof")
		fmt.Fprintf(w, "# run=%d stage=profile strategy=%s\n", run, s)
		if err := runBench(w, bin, small.env(), "-test.run=^$", "-test.bench=^BenchmarkHot$/^strategy="+s+"$/^keys=10000$",
			"-test.benchtime="+profTime, "-test.benchmem", "-test.cpuprofile="+prof); err != nil {
			envf("failed-profile-"+s, "%v", err)
			continue
		}
		top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=14", bin, prof).Output()
		if err != nil {
			envf("failed-profile-"+s, "pprof: %v", err)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(top)), "\n") {
			fmt.Fprintf(w, "# pprof hot-%s: %s\n", s, line)
		}
	}
}

// modeName is the run's mode, as the report states it.
func modeName(quick, full bool) string {
	switch {
	case quick:
		return "quick (-quick: numbers not meaningful)"
	case full:
		return "bounded, with 10M keys (-full)"
	}
	return "bounded"
}

// runBench runs the test binary with args in the environment env, its
// output to w.
func runBench(w io.Writer, bin string, env []string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, os.Stderr
	return cmd.Run()
}

// machine records what the machine is: CPU model, cores, memory, Go, date,
// commit.
func machine(envf func(k, format string, a ...any)) {
	envf("date", "%s", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	envf("go", "%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	envf("cpu", "%s", firstField("/proc/cpuinfo", "model name"))
	envf("cores", "%d", runtime.NumCPU())
	envf("memory", "%s", firstField("/proc/meminfo", "MemTotal"))
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		envf("commit", "%s (the working tree may hold uncommitted changes)", strings.TrimSpace(string(out)))
	}
}

// firstField is the value of the first "name : value" line of a /proc file.
func firstField(path, name string) string {
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// fsyncLatency measures 200 rewrites of one 4 KiB block, each followed by
// fdatasync, in the directory the benchmarks' databases go to.
func fsyncLatency(envf func(k, format string, a ...any), k string) {
	f, err := os.CreateTemp("", "ratestore-fsync-")
	if err != nil {
		envf(k, "failed: %v", err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	lat := make([]time.Duration, 200)
	for i := range lat {
		block[0] = byte(i)
		t := time.Now()
		if _, err := f.WriteAt(block, 0); err != nil {
			envf(k, "failed: %v", err)
			return
		}
		if err := datasync(f); err != nil {
			envf(k, "failed: %v", err)
			return
		}
		lat[i] = time.Since(t)
	}
	slices.Sort(lat)
	envf(k, "p50 %v, p99 %v (4 KiB write + fdatasync, %d samples)", lat[len(lat)/2].Round(time.Microsecond),
		lat[len(lat)*99/100].Round(time.Microsecond), len(lat))
}
