package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/keystore"
)

// The flags of a policy's model limits and end users (keystore.ModelLimit,
// keystore.EndUsers), and --policy, a whole policy in a JSON file.

// subFlagSet holds the flags as given.
type subFlagSet struct {
	modelLimits, dropModelLimits stringList
	euWindows, euBudgets         stringList
	euRPM, euMax, euRequired     optional
	dropEndUsers                 bool
	policyFile                   string
}

// subFlags defines the flags on fs; update adds those that only a change
// has.
func (sf *subFlagSet) define(fs *flag.FlagSet, update bool) {
	fs.Var(&sf.modelLimits, "model-limit", "a token window for some models only, `GLOBS:DURATION=LIMIT[/BUCKET]` (gpt-4o*:5h=100000; GLOBS comma-separated); repeatable, and a second window for the same GLOBS joins the first's limit")
	fs.Var(&sf.euWindows, "end-user-window", "a token window of each end user, `DURATION=LIMIT[/BUCKET]` (24h=20000); repeatable")
	fs.Var(&sf.euBudgets, "end-user-budget", "a budget of each end user, `USD=WINDOW` or USD=PERIOD[@ZONE] (1=day); repeatable")
	fs.Var(&sf.euRPM, "end-user-rpm", "at most `N` requests a minute for each end user; 0: no limit")
	fs.Var(&sf.euMax, "end-user-max-concurrent", "at most `N` requests in flight for each end user; 0: no limit")
	fs.Var(&sf.euRequired, "end-user-required", "`true`: a request must name its end user (400 otherwise); false: not")
	if update {
		fs.Var(&sf.dropModelLimits, "drop-model-limit", "remove the model limit of these `GLOBS` (as given to --model-limit); repeatable")
		fs.BoolVar(&sf.dropEndUsers, "drop-end-users", false, "remove every limit of the end users")
	}
	fs.StringVar(&sf.policyFile, "policy", "", "read the policy from this JSON `FILE` first, in the admin API's shape (windows, budgets, models, requests_per_minute, max_concurrent, model_limits, end_users); the other flags then change it")
}

// subChange is the flags of subFlagSet, checked.
type subChange struct {
	file         []byte // --policy's JSON, checked; nil: none
	models       []modelWindow
	dropModels   [][]string
	euWindows    []windowFlag
	euBudgets    []keystore.Budget
	euRPM        *int64
	euMax        *int
	euRequired   *bool
	dropEndUsers bool
}

// modelWindow is one --model-limit.
type modelWindow struct {
	globs []string
	w     windowFlag
}

// empty reports whether no flag of s was given.
func (s *subChange) empty() bool {
	return s.file == nil && len(s.models) == 0 && len(s.dropModels) == 0 && len(s.euWindows) == 0 && len(s.euBudgets) == 0 &&
		s.euRPM == nil && s.euMax == nil && s.euRequired == nil && !s.dropEndUsers
}

// parse checks the flags given for cmd.
func (sf *subFlagSet) parse(cmd string) (subChange, error) {
	s := subChange{dropEndUsers: sf.dropEndUsers}
	if sf.policyFile != "" {
		raw, err := os.ReadFile(sf.policyFile)
		if err != nil {
			return s, usagef(cmd, "%s: --policy: %v", cmd, err)
		}
		s.file = raw
		if err := admin.ReadPolicy(bytes.NewReader(raw), new(keystore.Policy)); err != nil {
			return s, usagef(cmd, "%s: --policy %s: %s", cmd, sf.policyFile, strings.TrimSuffix(err.Error(), ": "+keystore.ErrInvalid.Error()))
		}
	}
	for _, v := range sf.modelLimits {
		globs, win, ok := strings.Cut(v, ":")
		if !ok {
			return s, usagef(cmd, "%s: --model-limit %q: want GLOBS:DURATION=LIMIT[/BUCKET], as gpt-4o*:5h=100000", cmd, v)
		}
		models, err := parseModels(cmd, globs)
		if err == nil && len(models) == 0 {
			err = usagef(cmd, "%s: --model-limit %q: no model globs before the colon", cmd, v)
		}
		if err != nil {
			return s, err
		}
		w, err := parseWindow(cmd, "--model-limit "+globs+":", win)
		if err != nil {
			return s, err
		}
		s.models = append(s.models, modelWindow{models, w})
	}
	for _, v := range sf.dropModelLimits {
		models, err := parseModels(cmd, v)
		if err != nil {
			return s, err
		}
		s.dropModels = append(s.dropModels, models)
	}
	return s, sf.parseEndUsers(cmd, &s)
}

// parseEndUsers checks the flags of the end users.
func (sf *subFlagSet) parseEndUsers(cmd string, s *subChange) error {
	for _, v := range sf.euWindows {
		w, err := parseWindow(cmd, "--end-user-window", v)
		if err != nil {
			return err
		}
		s.euWindows = append(s.euWindows, w)
	}
	var err error
	if s.euBudgets, err = parseBudgets(cmd, "--end-user-budget", sf.euBudgets, true); err != nil {
		return err
	}
	if sf.euRPM.set {
		n, err := strconv.ParseInt(sf.euRPM.value, 10, 64)
		if err != nil || n < 0 {
			return usagef(cmd, "%s: --end-user-rpm %q: want a whole number of requests per minute, 0 for no limit", cmd, sf.euRPM.value)
		}
		s.euRPM = &n
	}
	if sf.euMax.set {
		n, err := strconv.Atoi(sf.euMax.value)
		if err != nil || n < 0 || n > keystore.MaxMaxConcurrent {
			return usagef(cmd, "%s: --end-user-max-concurrent %q: want a whole number up to %d, 0 for no limit", cmd, sf.euMax.value, keystore.MaxMaxConcurrent)
		}
		s.euMax = &n
	}
	if sf.euRequired.set {
		b, err := strconv.ParseBool(sf.euRequired.value)
		if err != nil {
			return usagef(cmd, "%s: --end-user-required %q: want true or false", cmd, sf.euRequired.value)
		}
		s.euRequired = &b
	}
	if s.dropEndUsers && (len(s.euWindows) > 0 || len(s.euBudgets) > 0 || s.euRPM != nil || s.euMax != nil || s.euRequired != nil) {
		return usagef(cmd, "%s: --drop-end-users and an --end-user-* flag: give one or the other", cmd)
	}
	return nil
}

// applyFile sets in pol the fields --policy gives, if it was given.
func (s *subChange) applyFile(pol *keystore.Policy, done []string) ([]string, error) {
	if s.file == nil {
		return done, nil
	}
	if err := admin.ReadPolicy(bytes.NewReader(s.file), pol); err != nil {
		return nil, err
	}
	return append(done, "set the fields of its policy that --policy gives"), nil
}

// apply makes the changes of s to pol, who's, after those of --policy,
// which the caller made first (applyFile), and returns done with them
// appended.
func (s *subChange) apply(cmd, who string, pol *keystore.Policy, done []string) ([]string, error) {
	pol.ModelLimits = slices.Clone(pol.ModelLimits)
	for _, globs := range s.dropModels {
		i := slices.IndexFunc(pol.ModelLimits, func(m keystore.ModelLimit) bool { return slices.Equal(m.Models, globs) })
		if i < 0 {
			return nil, usagef(cmd, "%s: --drop-model-limit %s: %s has no model limit of exactly those globs", cmd, strings.Join(globs, ","), who)
		}
		pol.ModelLimits = slices.Delete(pol.ModelLimits, i, i+1)
		done = append(done, "dropped its limit of models "+strings.Join(globs, ","))
	}
	for _, mw := range s.models {
		i := slices.IndexFunc(pol.ModelLimits, func(m keystore.ModelLimit) bool { return slices.Equal(m.Models, mw.globs) })
		if i < 0 {
			pol.ModelLimits = append(pol.ModelLimits, keystore.ModelLimit{Models: mw.globs})
			i = len(pol.ModelLimits) - 1
		}
		m := &pol.ModelLimits[i]
		m.Windows = setWindow(m.Windows, mw.w)
		done = append(done, fmt.Sprintf("set the %s window of models %s to %d tokens", short(mw.w.win.Window), strings.Join(mw.globs, ","), mw.w.win.Limit))
	}
	return s.applyEndUsers(pol, done), nil
}

// applyEndUsers makes the changes of s to pol's end users.
func (s *subChange) applyEndUsers(pol *keystore.Policy, done []string) []string {
	u := &pol.EndUsers
	if s.dropEndUsers {
		*u = keystore.EndUsers{}
		return append(done, "dropped its end users' limits")
	}
	for _, w := range s.euWindows {
		u.Windows = setWindow(u.Windows, w)
		done = append(done, fmt.Sprintf("set each end user's %s window to %d tokens", short(w.win.Window), w.win.Limit))
	}
	for _, b := range s.euBudgets {
		u.Budgets = append(slices.DeleteFunc(slices.Clone(u.Budgets), func(o keystore.Budget) bool {
			return o.Window == b.Window && o.Period == b.Period && o.Location.String() == b.Location.String()
		}), b)
		done = append(done, fmt.Sprintf("set each end user's budget of %s to $%s", budgetSpan(b), b.Limit))
	}
	if s.euRPM != nil {
		u.RequestsPerMinute = *s.euRPM
		done = append(done, "set each end user's request rate to "+limitText(*s.euRPM, " per minute"))
	}
	if s.euMax != nil {
		u.MaxConcurrent = *s.euMax
		done = append(done, "set each end user's max concurrent requests to "+limitText(int64(*s.euMax), ""))
	}
	if s.euRequired != nil {
		u.Required = *s.euRequired
		done = append(done, fmt.Sprintf("set end user required to %t", *s.euRequired))
	}
	return done
}

// setWindow sets in ws the window w: the limit (and bucket, if given) of
// the window of its length, or a new one.
func setWindow(ws []keystore.Window, w windowFlag) []keystore.Window {
	ws = slices.Clone(ws)
	i := slices.IndexFunc(ws, func(o keystore.Window) bool { return o.Window == w.win.Window })
	if i < 0 {
		return append(ws, w.win)
	}
	ws[i].Limit = w.win.Limit
	if w.bucketSet {
		ws[i].Bucket = w.win.Bucket
	}
	return ws
}

// writeSubs writes a policy's model limits, with their usage mu when
// known, and its end users as "field: value" lines, after writePolicy's:
// nothing for a policy without them.
func writeSubs(tw io.Writer, ms []admin.ModelLimit, mu []admin.ModelUsage, u *admin.EndUsers) {
	for i, m := range ms {
		text := limitsText(m.Windows, m.Budgets, m.RequestsPerMinute, m.MaxConcurrent)
		if i < len(mu) {
			for _, w := range mu[i].Windows {
				text += fmt.Sprintf("; %d used in %s", w.Used, short(length(w.Window)))
			}
		}
		fmt.Fprintf(tw, "model limit:\t%s: %s\n", strings.Join(m.Models, ","), text)
	}
	if u == nil {
		return
	}
	text := limitsText(u.Windows, u.Budgets, u.RequestsPerMinute, u.MaxConcurrent) + " each"
	if u.Required {
		text += "; required"
	}
	fmt.Fprintf(tw, "end users:\t%s\n", text)
}

// limitsText is a sub-limit's limits on one line: "10000 tokens/5h,
// $1/day, 5 per minute, 2 in flight".
func limitsText(ws []admin.WindowRequest, bs []admin.BudgetRequest, rpm int64, maxConcurrent int) string {
	var parts []string
	for _, w := range ws {
		parts = append(parts, fmt.Sprintf("%d tokens/%s", w.Limit, short(length(w.Window))))
	}
	for _, b := range bs {
		span := b.Window
		if b.Period != "" {
			span = b.Period
		} else {
			span = short(length(span))
		}
		parts = append(parts, fmt.Sprintf("$%s/%s", b.LimitUSD, span))
	}
	if rpm > 0 {
		parts = append(parts, fmt.Sprintf("%d per minute", rpm))
	}
	if maxConcurrent > 0 {
		parts = append(parts, fmt.Sprintf("%d in flight", maxConcurrent))
	}
	if len(parts) == 0 {
		return "no limit"
	}
	return strings.Join(parts, ", ")
}
