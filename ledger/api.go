package ledger

import (
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Totals are the counters of a rollup: what a set of requests used and
// cost, and how many were refused.
type Totals struct {
	Requests int64 // finished requests
	Tokens   Tokens
	Cost     pricing.USD
	Refused  int64            // refused requests (keystore.Denial), all reasons
	Reasons  map[string]int64 // Refused by keystore.Denial.Reason; nil when Refused is 0
}

// Dimensions a Spend query groups by.
const (
	ByKey   = "key"
	ByTeam  = "team"
	ByModel = "model"
	ByDay   = "day"  // UTC days, from the rollups
	ByHour  = "hour" // UTC hours, from the entries: within Options.Retention, at most 24 hours a query
	// ByEndUser groups by the end user the requests named, from the
	// keys' rollups of end users (see SpendQuery.EndUser).
	ByEndUser = "end_user"
)

// SpendQuery selects and groups rollups. The zero value is every
// request of the last 30 days, in one total.
//
// The groups of the dimensions other than time (key, team, model) are
// ranked by their cost over the whole range, then their requests, then
// their values; the first Limit are rows of their own, and the rest one
// row, Other, whose grouped dimensions read OtherModel. With a time
// dimension the ranking is of the same totals over the range, so that a
// chart stacked by key has the same keys every day, and one (other)
// series: a report holds at most Limit+1 rows per day (hour).
//
// A query grouped by end user, or filtering on one, reads the keys'
// rollups of end users: a row per team and end user of each (day, key),
// at most 256, the day's top end users by cost, the rest in a row whose
// end user reads OtherModel (see the package doc). Their rows add up to
// the key's: the requests that named no end user are the row of end user
// "". Those rollups have no model, and such a query may not group or
// filter by model (a QueryError); without a key asked for, it reads a
// rollup per key and day, as there are no summaries of end users.
type SpendQuery struct {
	From, To         time.Time // [From, To), rounded out to UTC days (hours with ByHour); zero To: now; zero From: To - 30 days (24 hours)
	GroupBy          []string  // ByKey, ByTeam, ByModel, ByEndUser, ByDay, ByHour; none: the total only
	Key, Team, Model string    // filters; "" matches all
	EndUser          string    // a filter: the requests naming this end user (those counted in its rows, not in an other row); "" matches all
	Limit            int       // groups of key, team, model and end user kept, 1 to MaxLimit; 0: 100
}

// Row is one group of a Spend report: the grouped dimensions are set,
// the others are "" (Day is zero unless grouped by day or hour).
type Row struct {
	Key, Team, Model string
	EndUser          string    // grouped by end user: "" for the requests that named none
	Day              time.Time // the day's (or hour's) start, UTC
	// Other: the row adds up the groups past the query's Limit; its
	// grouped dimensions other than time read OtherModel.
	Other bool
	Totals
}

// Spend is the answer to a SpendQuery: From and To as rounded, the rows
// ordered by time, then by their dimensions, the Other row last, and
// their total.
type Spend struct {
	From, To time.Time
	GroupBy  []string
	Rows     []Row
	Total    Totals
	query    SpendQuery
}

// RequestQuery selects entries, newest first.
type RequestQuery struct {
	Key, Team, Model string    // filters; "" matches all
	EndUser          string    // a filter: the entries naming this end user; "" matches all
	Status           int       // 0: any
	From, To         time.Time // [From, To); zero: the retention's start, and now
	Limit            int       // 1 to MaxLimit; 0: 100
	Cursor           string    // a Page's Next, to continue after it
}

// MaxLimit is the largest page of entries a RequestQuery may ask for,
// and the most groups a SpendQuery may keep.
const MaxLimit = 1000

// Page is a page of entries, newest first, and the cursor of the next
// one ("" when there is none). A page reads a bounded number of entry
// records: one whose filter few entries match may hold fewer than the
// Limit asked for, even none, and still have a Next.
type Page struct {
	Entries []Entry
	Next    string
}

// Refusal is a request a key's policy refused: counted in the rollups
// of its key and team, by reason, and not entered in the ledger.
type Refusal struct {
	Key, Team, Model string
	EndUser          string // as Entry.EndUser; "": none
	Reason           string // keystore.Denial.Reason
}

// SpendQuery returns the query s answers, its range as rounded.
func (s Spend) SpendQuery() SpendQuery { return s.query }
