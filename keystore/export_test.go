package keystore

// SetPlanBounds makes the bounds of a page's plan (see plan.go) collect
// and scan, until the function it returns puts them back.
func SetPlanBounds(collect, scan int) (restore func()) {
	c, s := collectBound, scanBudget
	collectBound, scanBudget = collect, scan
	return func() { collectBound, scanBudget = c, s }
}
