package keystore

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // the zones of calendar budgets, wherever the program runs

	"github.com/ratestore/ratestore/pricing"
	"github.com/ratestore/ratestore/strategies"
)

// MaxBudgets is the most budgets one policy may have.
const MaxBudgets = 8

// Budget is a limit on what a key spends, in money: at most Limit over a
// rolling Window (counted in buckets, as a token window is), or in each
// calendar Period (a day, an ISO week from Monday, a month) in the time
// zone Location, which is how finance teams budget. Exactly one of Window
// and Period is set.
//
// A budget is an engine state counting nano-dollars (pricing.USD): a
// strategies.RollingWindow, or a strategies.Calendar. An admission
// reserves its worst-case cost in every budget, in the same decision as
// its tokens, and Finish charges the real cost in its place.
type Budget struct {
	Limit    pricing.USD
	Window   time.Duration     // a rolling window; 0 for a calendar period
	Bucket   time.Duration     // the rolling window's buckets; 0: Window/60, rounded to a divisor
	Period   strategies.Period // a calendar period; 0 for a rolling window
	Location *time.Location    // the period's time zone; nil: UTC
}

// budgetPrefix starts the limiter names of budgets: budgetPrefix and the
// window ("keys:usd:5h0m0s"), or the period and its zone, with ':' for
// the '/' limiter names do not allow ("keys:usd:month@Europe:Paris").
const budgetPrefix = "keys:usd:"

// name is b's limiter name. Names are at most backend.MaxNameLen bytes:
// a zone name too long for one is refused by normalize.
func (b Budget) name() string {
	if b.Period != 0 {
		return budgetPrefix + b.Period.String() + "@" + strings.ReplaceAll(b.zone(), "/", ":")
	}
	return budgetPrefix + strings.ReplaceAll(b.Window.String(), "µ", "u")
}

// sameSpan reports whether b and o count over the same window or the same
// period in the same zone: the same engine state, whatever their limits.
func (b Budget) sameSpan(o Budget) bool {
	return b.Window == o.Window && b.Period == o.Period && b.zone() == o.zone()
}

// zone is the name of b's time zone.
func (b Budget) zone() string {
	if b.Location == nil {
		return "UTC"
	}
	return b.Location.String()
}

// strategy is b's engine strategy.
func (b Budget) strategy() strategies.Strategy {
	if b.Period != 0 {
		return b.calendar()
	}
	return b.rolling()
}

func (b Budget) rolling() strategies.RollingWindow {
	return strategies.RollingWindow{Limit: int64(b.Limit), Window: b.Window, Bucket: b.Bucket}
}

func (b Budget) calendar() strategies.Calendar {
	return strategies.Calendar{Limit: int64(b.Limit), Period: b.Period, Location: b.Location}
}

// String describes b as a denial names it: "$5 per 24h0m0s", "$500 per
// month (Europe/Paris)".
func (b Budget) String() string {
	if b.Period != 0 {
		return fmt.Sprintf("$%s per %s (%s)", b.Limit, b.Period, b.zone())
	}
	return fmt.Sprintf("$%s per %s", b.Limit, b.Window)
}

// normalizeBudgets checks p.Budgets and fills in their defaults, in a copy
// p owns.
func normalizeBudgets(op string, p *Policy) error {
	if len(p.Budgets) > MaxBudgets {
		return fieldError(op, "Policy.Budgets", "%d budgets, more than %d", len(p.Budgets), MaxBudgets)
	}
	if len(p.Budgets) == 0 {
		p.Budgets = nil
		return nil
	}
	p.Budgets = append([]Budget(nil), p.Budgets...)
	for i := range p.Budgets {
		b := &p.Budgets[i]
		field := fmt.Sprintf("Policy.Budgets[%d]", i)
		if err := normalizeBudget(op, field, b); err != nil {
			return err
		}
		for j := range i {
			if p.Budgets[j].sameSpan(*b) {
				return fieldError(op, field, "%v again: give each window or period once", b)
			}
		}
	}
	return nil
}

func normalizeBudget(op, field string, b *Budget) error {
	switch {
	case b.Limit <= 0:
		return fieldError(op, field+".Limit", "must be positive, got $%s", b.Limit)
	case (b.Window == 0) == (b.Period == 0):
		return fieldError(op, field, "give a Window or a Period, not both or neither")
	case b.Period != 0 && b.Bucket != 0:
		return fieldError(op, field+".Bucket", "a calendar period has no buckets")
	case b.Period == 0 && b.Location != nil:
		return fieldError(op, field+".Location", "a rolling window has no time zone")
	case b.Location == time.UTC:
		b.Location = nil
	}
	if b.Window > 0 && b.Bucket == 0 {
		b.Bucket = defaultBucket(b.Window)
	}
	if len(b.name()) > 64 {
		return fieldError(op, field+".Location", "the zone name %q is too long", b.zone())
	}
	if err := b.strategy().Validate(); err != nil {
		return &FieldError{Op: op, Field: field, Msg: "not a valid budget", Err: err}
	}
	return nil
}

// BudgetUsage is a budget and what the key has spent in it.
type BudgetUsage struct {
	Budget
	// Spent includes the worst-case cost reserved by requests in flight,
	// as a window's Used includes their tokens.
	Spent     pricing.USD
	Remaining pricing.USD // max(0, Limit-Spent)
	// ResetsAt is when Spent next goes down: the end of the calendar
	// period, or when the oldest cost still counted leaves the rolling
	// window. Zero when nothing is spent.
	ResetsAt time.Time
}

// budgetUsage fills in bu, the usage of budget b, from st, its state at
// now.
func budgetUsage(b Budget, bu *BudgetUsage, st strategies.State, now int64) error {
	bu.Budget = b
	if b.Period != 0 {
		c := b.calendar()
		used, err := c.Used(st, now)
		if err != nil {
			return err
		}
		bu.Spent, bu.Remaining = pricing.USD(used), max(0, b.Limit-pricing.USD(used))
		if used > 0 {
			bu.ResetsAt = time.Unix(0, c.PeriodEnd(now)).UTC()
		}
		return nil
	}
	var wu WindowUsage
	wu.Limit = int64(b.Limit)
	if err := windowUsage(b.rolling(), &wu, st, now); err != nil {
		return err
	}
	bu.Spent, bu.Remaining, bu.ResetsAt = pricing.USD(wu.Used), pricing.USD(wu.Remaining), wu.WindowEnd
	return nil
}

// reserveIn adds cost to st, the state of budget b at now, for a
// reservation made at reservedAt: in the bucket or period of reservedAt,
// where settleIn finds it.
func reserveIn(b Budget, st strategies.State, now, reservedAt int64, cost pricing.USD) error {
	if b.Period != 0 {
		return b.calendar().Adjust(st, now, min(reservedAt, now), int64(cost))
	}
	return b.rolling().Merge(st, now, min(reservedAt, now), int64(cost))
}

// settleIn adds delta (a refund when negative) to st, the state of budget
// b at now, for a reservation made at reservedAt: in the reservation's
// bucket or period, never below zero there; a refund whose bucket or
// period has passed is dropped, an extra charge goes to now's.
func settleIn(b Budget, st strategies.State, now, reservedAt, moved int64, delta pricing.USD) error {
	if b.Period != 0 {
		return b.calendar().Adjust(st, now, reservedAt, int64(delta))
	}
	return adjust(b.rolling(), st, now, reservedAt, moved, int64(delta))
}
