package keystore_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
)

// disguised are texts that show one thing and are another, each with the
// character the key store must name when it refuses them.
var disguised = []struct{ text, char string }{
	{"admin\u200b", "U+200B"},         // a zero-width space: reads "admin"
	{"key\u202egpj.exe", "U+202E"},    // a right-to-left override: reads "keyexe.jpg"
	{"\u2066ops\u2069", "U+2066"},     // a bidi isolate
	{"\ufeffbilling", "U+FEFF"},       // a byte order mark
	{"team\u2028admin", "U+2028"},     // a line separator: a second line in a log
	{"glm-4.7\u00ad", "U+00AD"},       // a soft hyphen
	{"claude-\U000e0041*", "U+E0041"}, // a tag character
}

// dumpAll is e.dump with the teams' records.
func (e *env) dumpAll() map[string]string {
	e.t.Helper()
	m := e.dump()
	require.NoError(e.t, e.st.Scan(ctx, []byte("t/"), func(k, v []byte) error {
		m[string(k)] = string(v)
		return nil
	}))
	return m
}

// TestDisguisedTextRefused: every text an operator sets (a key's Name and
// Model, a team's Name, the model patterns of a policy; by Create,
// Update, CreateTeam, UpdateTeam and Import) is refused with ErrInvalid
// when it holds a format character or a separator, naming the field and
// the character, and nothing is written.
func TestDisguisedTextRefused(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, _ := e.create("k", 100)
		team, err := e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: "t", Policy: onePolicy(10)})
		require.NoError(t, err)
		before := e.dumpAll()
		refused := func(err error, field, char string) {
			t.Helper()
			require.ErrorIs(t, err, keystore.ErrInvalid)
			require.ErrorContains(t, err, field+": holds the ")
			require.ErrorContains(t, err, char)
		}
		for _, d := range disguised {
			models := keystore.Policy{Models: []string{"gpt-4o", d.text}}
			_, _, err := e.ks.Create(ctx, keystore.Spec{Name: d.text, TokenLimit: 1})
			refused(err, "Name", d.char)
			_, _, err = e.ks.Create(ctx, keystore.Spec{Model: d.text, TokenLimit: 1})
			refused(err, "Model", d.char)
			_, _, err = e.ks.Create(ctx, keystore.Spec{Policy: models})
			refused(err, "Policy.Models[1]", d.char)
			for field, set := range map[string]func(*keystore.Spec){
				"Name":             func(s *keystore.Spec) { s.Name = d.text },
				"Model":            func(s *keystore.Spec) { s.Model = d.text },
				"Policy.Models[1]": func(s *keystore.Spec) { s.Policy.Models = models.Models },
			} {
				_, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { set(s); return nil })
				refused(err, field, d.char)
			}
			_, err = e.ks.CreateTeam(ctx, keystore.TeamSpec{Name: d.text})
			refused(err, "Name", d.char)
			_, err = e.ks.CreateTeam(ctx, keystore.TeamSpec{Policy: models})
			refused(err, "Policy.Models[1]", d.char)
			_, err = e.ks.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error { s.Name = d.text; return nil })
			refused(err, "Name", d.char)
			_, err = e.ks.UpdateTeam(ctx, team.ID, func(s *keystore.TeamSpec) error { s.Policy = models; return nil })
			refused(err, "Policy.Models[1]", d.char)
			_, err = e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_disguised", Name: d.text, TokenLimit: 1}})
			refused(err, "Name", d.char)
			_, err = e.ks.Import(ctx, []keystore.Imported{{Secret: "pk_live_disguised", Model: d.text, TokenLimit: 1}})
			refused(err, "Model", d.char)
		}
		require.Equal(t, before, e.dumpAll())
		e.reopen()
		require.Equal(t, before, e.dumpAll())
	})
}

// Record fields as the version 3 key store and team records store them.
const (
	recordVersion3 = 3
	flagTeam       = 1 << 6
)

// rawKey is a key's record with texts written as they were stored
// before the key store refused format characters.
type rawKey struct {
	id, secret, name, model, team string
	models                        []string
}

// encode is k's record: version 3, flags (the team's), the hash, no
// lifetime tokens, the name and model, a policy of one usage window of
// 1000 tokens and k's model patterns, no spend, and the team.
func (k rawKey) encode() []byte {
	h := sha256.Sum256([]byte(k.secret))
	flags := byte(0)
	if k.team != "" {
		flags = flagTeam
	}
	b := append([]byte{recordVersion3, flags}, h[:]...)
	b = append(b, 0)
	b = appendText(appendText(b, k.name), k.model)
	b = appendText(b, string(rawPolicy(k.models, usageWindow(1000))))
	b = append(b, 0)
	if k.team != "" {
		b = appendText(b, k.team)
	}
	return b
}

// rawTeam is a team's record: version 1, the name, the creation instant
// and a policy of the given windows and model patterns.
func rawTeam(name string, created time.Time, models []string, windows ...keystore.Window) []byte {
	b := appendText([]byte{1}, name)
	b = binary.AppendVarint(b, created.UnixNano())
	return appendText(b, string(rawPolicy(models, windows...)))
}

// rawPolicy is policyBytes with model patterns.
func rawPolicy(models []string, windows ...keystore.Window) []byte {
	p := policyBytes(windows...)
	p = append(p[:len(p)-2], byte(len(models)))
	for _, m := range models {
		p = appendText(p, m)
	}
	return append(p, 0) // no budgets
}

func appendText(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// TestDisguisedTextStored: a key and a team whose records hold format
// characters and separators, written before the key store refused them,
// still read as they were stored (they are not corrupt), authenticate and
// admit; a change that leaves those texts as they are is made, and one
// that brings in a new such text is refused.
func TestDisguisedTextStored(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		const teamID = "team_00000000000000b1"
		k := rawKey{id: "key_00000000000000b1", secret: "rsk_disguised", name: "admin\u200b", model: "glm\u202e",
			team: teamID, models: []string{"gpt-4o\u2060*"}}
		e.close()
		e.openDB()
		e.rawPut("k/"+k.id, k.encode())
		e.rawPut(hashKey(k.secret), []byte(k.id))
		e.rawPut("t/"+teamID, rawTeam("ops\u202e", t0, []string{"gpt-\u200b*"}, usageWindow(5000)))
		e.close()
		e.openDB()
		e.openStore()

		want := keystore.Key{ID: k.id, Name: k.name, Model: k.model, Team: teamID, TokenLimit: 1000,
			Policy: keystore.Policy{Windows: []keystore.Window{usageWindow(1000)}, Models: k.models}}
		require.Equal(t, want, e.get(k.id))
		team, err := e.ks.GetTeam(ctx, teamID)
		require.NoError(t, err)
		require.Equal(t, keystore.Team{ID: teamID, Name: "ops\u202e", CreatedAt: t0,
			Policy: keystore.Policy{Windows: []keystore.Window{usageWindow(5000)}, Models: []string{"gpt-\u200b*"}}}, team)
		got, err := e.ks.Authenticate(ctx, k.secret)
		require.NoError(t, err)
		require.Equal(t, want, got)

		// Changes that leave the stored texts as they are.
		got, err = e.ks.Update(ctx, k.id, func(s *keystore.Spec) error {
			s.TokenLimit = 2000
			s.Policy.Models = append(s.Policy.Models, "claude-*")
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, []string{"gpt-4o\u2060*", "claude-*"}, got.Policy.Models)
		require.Equal(t, [2]string{k.name, k.model}, [2]string{got.Name, got.Model})
		team, err = e.ks.UpdateTeam(ctx, teamID, func(s *keystore.TeamSpec) error {
			s.Policy.RequestsPerMinute = 10
			s.Policy.Models = append(s.Policy.Models, "claude-*")
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, "ops\u202e", team.Name)
		require.Equal(t, []string{"gpt-\u200b*", "claude-*"}, team.Policy.Models)

		// A new text is checked: another disguised one is refused, even
		// where the old one stays.
		_, err = e.ks.Update(ctx, k.id, func(s *keystore.Spec) error { s.Name = "admin\u200c"; return nil })
		require.ErrorContains(t, err, "Name: holds the format character U+200C")
		_, err = e.ks.UpdateTeam(ctx, teamID, func(s *keystore.TeamSpec) error {
			s.Policy.Models = append(s.Policy.Models, "o1\u200b")
			return nil
		})
		require.ErrorContains(t, err, "Policy.Models[2]: holds the format character U+200B")

		e.reopen()
		require.Equal(t, []string{"gpt-4o\u2060*", "claude-*"}, e.get(k.id).Policy.Models)
		a := e.admit(k.secret, keystore.Request{Model: "claude-3", Reserve: 10})
		e.finish(a, 5)
		require.Equal(t, int64(5), e.get(k.id).LifetimeTokens)
	})
}
