package main

import (
	"flag"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/rollingwindow"
	"github.com/ratestore/ratestore/strategies"
)

// The policy flags of keys create and keys set-limit: a key's token
// windows, request rate, concurrency cap and models (keystore.Policy).
// They are read as given and checked once parsed, so that a bad value is
// reported as a usage error that names the flag and the value.

// stringList is a flag that may be given more than once.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// optional is a flag whose absence differs from any value it may be given
// (--models "" clears the models; no --models leaves them).
type optional struct {
	value string
	set   bool
}

func (o *optional) String() string { return o.value }
func (o *optional) Set(s string) error {
	o.value, o.set = s, true
	return nil
}

// policyFlagSet holds the policy flags as given.
type policyFlagSet struct {
	windows, drop              stringList
	budgets, dropBudgets       stringList
	rpm, maxConcurrent, models optional
	subs                       subFlagSet
}

// policyFlags defines the policy flags on fs; update adds those that only
// a change has (--drop-window).
func policyFlags(fs *flag.FlagSet, update bool) *policyFlagSet {
	pf := &policyFlagSet{}
	windowHelp := "a token window of `DURATION=LIMIT[/BUCKET]`: at most LIMIT tokens in any DURATION (5h=100000, 168h=1000000/1h); repeatable"
	if update {
		windowHelp += "; sets the limit (and bucket) of the key's window of that length, or adds one"
		fs.Var(&pf.drop, "drop-window", "remove the key's token window of this `DURATION` (168h); repeatable")
		fs.Var(&pf.dropBudgets, "drop-budget", "remove the key's budget of this `WINDOW` (24h) or PERIOD[@ZONE] (month@Europe/Paris); repeatable")
	}
	fs.Var(&pf.budgets, "budget", "a budget in money of `USD=WINDOW` (5=24h: $5 in any 24 hours) or USD=PERIOD[@ZONE] (500=month@Europe/Paris: $500 a calendar month there; day, week from Monday, month; UTC by default); repeatable")
	fs.Var(&pf.windows, "window", windowHelp)
	fs.Var(&pf.rpm, "rpm", "at most `N` requests a minute; 0: no limit")
	fs.Var(&pf.maxConcurrent, "max-concurrent", "at most `N` requests in flight at once; 0: no limit")
	fs.Var(&pf.models, "models", "the models it may ask for, as `GLOBS`: comma-separated names or globs (gpt-4o,claude-*); \"\": any")
	pf.subs.define(fs, update)
	return pf
}

// policyChange is the policy flags, checked.
type policyChange struct {
	budgets       []keystore.Budget
	dropBudgets   []keystore.Budget // their window or period and zone
	windows       []windowFlag
	drop          []time.Duration
	rpm           int64
	maxConcurrent int
	models        []string
	rpmSet        bool
	maxSet        bool
	modelsSet     bool
	subs          subChange
}

// windowFlag is one --window.
type windowFlag struct {
	win       keystore.Window
	bucketSet bool // else Bucket is 0: the key store's default, or the window's bucket as it is
}

// empty reports whether no policy flag was given.
func (p *policyChange) empty() bool {
	return len(p.windows) == 0 && len(p.drop) == 0 && !p.rpmSet && !p.maxSet && !p.modelsSet &&
		len(p.budgets) == 0 && len(p.dropBudgets) == 0 && p.subs.empty()
}

// parse checks the flags given for cmd.
func (pf *policyFlagSet) parse(cmd string) (*policyChange, error) {
	p := &policyChange{}
	for _, s := range pf.windows {
		w, err := parseWindow(cmd, "--window", s)
		if err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(p.windows, func(o windowFlag) bool { return o.win.Window == w.win.Window }); i >= 0 {
			return nil, usagef(cmd, "%s: --window %q and --window %q: both are %s windows: give each length once", cmd, pf.windows[i], s, short(w.win.Window))
		}
		p.windows = append(p.windows, w)
	}
	for _, s := range pf.drop {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, usagef(cmd, "%s: --drop-window %q: want the duration of a window of the key (168h)", cmd, s)
		}
		if slices.ContainsFunc(p.windows, func(w windowFlag) bool { return w.win.Window == d }) {
			return nil, usagef(cmd, "%s: --drop-window %q and a --window of that length: give one or the other", cmd, s)
		}
		if !slices.Contains(p.drop, d) {
			p.drop = append(p.drop, d)
		}
	}
	var err error
	if p.budgets, err = parseBudgets(cmd, "--budget", pf.budgets, true); err != nil {
		return nil, err
	}
	if p.dropBudgets, err = parseBudgets(cmd, "--drop-budget", pf.dropBudgets, false); err != nil {
		return nil, err
	}
	if pf.rpm.set {
		n, err := strconv.ParseInt(pf.rpm.value, 10, 64)
		if err != nil || n < 0 {
			return nil, usagef(cmd, "%s: --rpm %q: want a whole number of requests per minute, 0 for no limit", cmd, pf.rpm.value)
		}
		p.rpm, p.rpmSet = n, true
	}
	if pf.maxConcurrent.set {
		n, err := strconv.ParseInt(pf.maxConcurrent.value, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil, usagef(cmd, "%s: --max-concurrent %q: want a whole number of requests up to %d, 0 for no limit", cmd, pf.maxConcurrent.value, math.MaxInt32)
		}
		p.maxConcurrent, p.maxSet = int(n), true
	}
	if pf.models.set {
		models, err := parseModels(cmd, pf.models.value)
		if err != nil {
			return nil, err
		}
		p.models, p.modelsSet = models, true
	}
	if p.subs, err = pf.subs.parse(cmd); err != nil {
		return nil, err
	}
	return p, nil
}

// parseWindow reads a window flag (--window): DURATION=LIMIT or DURATION=LIMIT/BUCKET.
// It checks the shape of the window as the key store will (a bucket that
// divides the window into at most rollingwindow.MaxBuckets), so that the
// error names the flag rather than a field of keystore.Policy.
func parseWindow(cmd, flag, s string) (windowFlag, error) {
	bad := func(format string, args ...any) error {
		return usagef(cmd, "%s: %s %q: %s", cmd, flag, s, fmt.Sprintf(format, args...))
	}
	dur, rest, ok := strings.Cut(s, "=")
	if !ok {
		return windowFlag{}, bad("want DURATION=LIMIT or DURATION=LIMIT/BUCKET, as 5h=100000 or 168h=1000000/1h")
	}
	limit, bucket, hasBucket := strings.Cut(rest, "/")
	var w windowFlag
	var err error
	if w.win.Window, err = time.ParseDuration(dur); err != nil || w.win.Window <= 0 {
		return windowFlag{}, bad("window %q: want a positive duration, as 5h, 90m or 168h (a week)", dur)
	}
	if w.win.Window > strategies.MaxWindow {
		return windowFlag{}, bad("window %q: longer than the longest window, %v", dur, strategies.MaxWindow)
	}
	if w.win.Limit, err = strconv.ParseInt(limit, 10, 64); err != nil || w.win.Limit <= 0 {
		return windowFlag{}, bad("limit %q: want a positive whole number of tokens", limit)
	}
	if !hasBucket {
		return w, nil
	}
	w.bucketSet = true
	b, err := time.ParseDuration(bucket)
	switch {
	case err != nil || b <= 0:
		return windowFlag{}, bad("bucket %q: want a positive duration, as 5m", bucket)
	case w.win.Window%b != 0:
		return windowFlag{}, bad("bucket %v does not divide the window %v", b, w.win.Window)
	case w.win.Window/b > rollingwindow.MaxBuckets:
		return windowFlag{}, bad("bucket %v makes %d buckets of the window, more than %d", b, w.win.Window/b, rollingwindow.MaxBuckets)
	}
	w.win.Bucket = b
	if err := (strategies.RollingWindow{Limit: w.win.Limit, Window: w.win.Window, Bucket: b}).Validate(); err != nil {
		return windowFlag{}, bad("%v", err)
	}
	return w, nil
}

// parseModels reads a --models: comma-separated globs (path.Match), or ""
// for none (any model).
func parseModels(cmd, s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var models []string
	for _, m := range strings.Split(s, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, usagef(cmd, "%s: --models %q: an empty model name: want comma-separated names or globs (gpt-4o,claude-*)", cmd, s)
		}
		if _, err := path.Match(m, ""); err != nil {
			return nil, usagef(cmd, "%s: --models %q: %q is not a valid glob: %v", cmd, s, m, err)
		}
		if !slices.Contains(models, m) {
			models = append(models, m)
		}
	}
	return models, nil
}

// apply makes the change p to pol, the policy of who ("key key_x", "team
// team_x"), and returns done with what it changed appended, for the
// message of keys set-limit or teams set.
func (p *policyChange) apply(cmd, who string, pol *keystore.Policy, done []string) ([]string, error) {
	done, err := p.subs.applyFile(pol, done)
	if err != nil {
		return nil, err
	}
	for _, d := range p.drop {
		i := slices.IndexFunc(pol.Windows, func(w keystore.Window) bool { return w.Window == d })
		if i < 0 {
			return nil, usagef(cmd, "%s: --drop-window %s: %s has no %s window (it has %s)", cmd, short(d), who, short(d), windowLengths(pol.Windows))
		}
		pol.Windows = slices.Delete(pol.Windows, i, i+1)
		done = append(done, "dropped its "+short(d)+" window")
	}
	for _, w := range p.windows {
		i := slices.IndexFunc(pol.Windows, func(o keystore.Window) bool { return o.Window == w.win.Window })
		if i < 0 {
			pol.Windows = append(pol.Windows, w.win)
			done = append(done, fmt.Sprintf("added a %s window of %d tokens", short(w.win.Window), w.win.Limit))
			continue
		}
		pol.Windows[i].Limit = w.win.Limit
		msg := fmt.Sprintf("set the limit of its %s window to %d tokens", short(w.win.Window), w.win.Limit)
		if w.bucketSet {
			pol.Windows[i].Bucket = w.win.Bucket
			msg += fmt.Sprintf(", in %s buckets", short(w.win.Bucket))
		}
		done = append(done, msg)
	}
	done, err = p.applyBudgets(cmd, who, pol, done)
	if err != nil {
		return nil, err
	}
	return p.subs.apply(cmd, who, pol, p.applyRest(pol, done))
}

// applyRest makes the changes of p besides windows and budgets.
func (p *policyChange) applyRest(pol *keystore.Policy, done []string) []string {
	if p.rpmSet {
		pol.RequestsPerMinute = p.rpm
		done = append(done, "set its request rate to "+limitText(p.rpm, " per minute"))
	}
	if p.maxSet {
		pol.MaxConcurrent = p.maxConcurrent
		done = append(done, "set its max concurrent requests to "+limitText(int64(p.maxConcurrent), ""))
	}
	if p.modelsSet {
		pol.Models = p.models
		if len(p.models) == 0 {
			done = append(done, "set its models to any")
		} else {
			done = append(done, "set its models to "+strings.Join(p.models, ", "))
		}
	}
	return done
}

// applyBudgets drops and sets the budgets of p in pol: a --budget of a
// window or period the key has a budget of replaces that one's limit.
func (p *policyChange) applyBudgets(cmd, who string, pol *keystore.Policy, done []string) ([]string, error) {
	same := func(a keystore.Budget) func(keystore.Budget) bool {
		return func(b keystore.Budget) bool {
			return a.Window == b.Window && a.Period == b.Period && a.Location.String() == b.Location.String()
		}
	}
	pol.Budgets = slices.Clone(pol.Budgets)
	for _, d := range p.dropBudgets {
		i := slices.IndexFunc(pol.Budgets, same(d))
		if i < 0 {
			return nil, usagef(cmd, "%s: --drop-budget: %s has no budget of %s", cmd, who, budgetSpan(d))
		}
		pol.Budgets = slices.Delete(pol.Budgets, i, i+1)
		done = append(done, "dropped its budget of "+budgetSpan(d))
	}
	for _, b := range p.budgets {
		if i := slices.IndexFunc(pol.Budgets, same(b)); i >= 0 {
			pol.Budgets[i].Limit = b.Limit
		} else {
			pol.Budgets = append(pol.Budgets, b)
		}
		done = append(done, fmt.Sprintf("set its budget of %s to $%s", budgetSpan(b), b.Limit))
	}
	return done, nil
}

// budgetSpan is a budget's window or period, for messages: "24h", "month
// (Europe/Paris)".
func budgetSpan(b keystore.Budget) string {
	if b.Period == 0 {
		return short(b.Window)
	}
	return fmt.Sprintf("%s (%s)", b.Period, b.Location)
}

// parseBudgets reads the values of the flag name: USD=SPAN when limit, a
// bare SPAN otherwise, where SPAN is a rolling window (24h) or a calendar
// period with an optional zone (month@Europe/Paris).
func parseBudgets(cmd, name string, vs []string, limit bool) ([]keystore.Budget, error) {
	var bs []keystore.Budget
	for _, v := range vs {
		span, b := v, keystore.Budget{}
		if limit {
			usd, rest, ok := strings.Cut(v, "=")
			amount, err := pricing.ParseUSD(usd)
			if !ok || err != nil || amount <= 0 {
				return nil, usagef(cmd, "%s: %s %q: want USD=WINDOW (5=24h) or USD=PERIOD[@ZONE] (500=month@Europe/Paris), a positive amount in dollars", cmd, name, v)
			}
			span, b.Limit = rest, amount
		}
		period, zone, hasZone := strings.Cut(span, "@")
		if p, err := strategies.ParsePeriod(period); err == nil {
			b.Period, b.Location = p, time.UTC
			if hasZone {
				loc, err := time.LoadLocation(zone)
				if err != nil || zone == "Local" || zone == "" {
					return nil, usagef(cmd, "%s: %s %q: %q is not an IANA time zone (Europe/Paris, UTC)", cmd, name, v, zone)
				}
				b.Location = loc
			}
		} else if d, err := time.ParseDuration(span); err == nil && d > 0 && !hasZone {
			b.Window = d
		} else {
			return nil, usagef(cmd, "%s: %s %q: %q is neither a window (24h) nor a period (day, week, month, with @ZONE)", cmd, name, v, span)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// windowLengths lists the lengths of ws, for messages.
func windowLengths(ws []keystore.Window) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = short(w.Window)
	}
	return strings.Join(parts, ", ")
}
