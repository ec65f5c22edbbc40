package migrate

import "github.com/ratestore/ratestore/legacy"

// Report says what an import did with a legacy key file: what it imported,
// and every entry it left out or refused, and every oddity it tolerated, each
// with a reason. It never holds a secret. The judgement of the file is
// package legacy's (its documentation has the table of every case); the
// import adds what the key store cannot keep, and the keys a database
// already has (Skips).
type Report = legacy.Report

// Issue is one problem or oddity of a Report, located by entry and field.
type Issue = legacy.Issue

// ErrRefused is matched (errors.Is) by the error returned for a legacy file
// that is refused as a whole: nothing of it is imported, and the Report
// lists every problem found in Refusals.
var ErrRefused = legacy.ErrRefused
