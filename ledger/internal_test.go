package ledger

// BlockSize is blockSize, for the tests of package ledger_test.
const BlockSize = blockSize

// MaxRefusals is maxRefusals, for the tests of package ledger_test.
const MaxRefusals = maxRefusals
