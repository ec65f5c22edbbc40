package ledger

// BlockSize is blockSize, for the tests of package ledger_test.
const BlockSize = blockSize

// MaxRefusals is maxRefusals, for the tests of package ledger_test.
const MaxRefusals = maxRefusals

// SetReadBudget sets the bytes a page of Requests reads, until the
// returned function puts the default back.
func SetReadBudget(n int) func() {
	old := readBudget
	readBudget = n
	return func() { readBudget = old }
}
