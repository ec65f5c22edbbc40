package ledger

// BlockSize is blockSize, for the tests of package ledger_test.
const BlockSize = blockSize
