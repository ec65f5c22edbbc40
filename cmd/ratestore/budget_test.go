package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/pricing"
)

// TestKeysBudgets: keys create --budget and keys set-limit --budget and
// --drop-budget, in the one JSON shape of a key; bad budgets are refused
// naming the flag.
func TestKeysBudgets(t *testing.T) {
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "b", "--window", "5h=1000",
		"--budget", "5.25=24h", "--budget", "500=month@Europe/Paris", "--budget", "1=week")
	id := created.Key.ID
	require.Equal(t, []admin.Budget{
		{LimitUSD: 5250 * pricing.Dollar / 1000, Window: "24h0m0s", RemainingUSD: 5250 * pricing.Dollar / 1000},
		{LimitUSD: 500 * pricing.Dollar, Period: "month", Timezone: "Europe/Paris", RemainingUSD: 500 * pricing.Dollar},
		{LimitUSD: pricing.Dollar, Period: "week", Timezone: "UTC", RemainingUSD: pricing.Dollar},
	}, created.Key.Budgets)

	r := e.ok("keys", "set-limit", id, "--budget", "6=24h", "--drop-budget", "month@Europe/Paris")
	require.Contains(t, r.stdout, "set its budget of 24h to $6")
	require.Contains(t, r.stdout, "dropped its budget of month (Europe/Paris)")
	k := jsonOf[admin.Key](e, "keys", "show", id)
	require.Len(t, k.Budgets, 2)
	require.Equal(t, 6*pricing.Dollar, k.Budgets[0].LimitUSD)

	for args, msg := range map[[2]string]string{
		{"--budget", "5"}:                `--budget "5": want USD=WINDOW`,
		{"--budget", "0=24h"}:            `--budget "0=24h": want USD=WINDOW`,
		{"--budget", "5=year"}:           `"year" is neither a window`,
		{"--budget", "5=day@Mars"}:       `"Mars" is not an IANA time zone`,
		{"--budget", "5=24h@Paris"}:      `is neither a window`,
		{"--drop-budget", "5=24h"}:       `is neither a window`,
		{"--drop-budget", "month"}:       "key " + id + " has no budget of month (UTC)",
		{"--budget", "0.0000000001=24h"}: `want USD=WINDOW`,
	} {
		r := e.run("keys", "set-limit", id, args[0], args[1])
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, msg, args)
	}
}
