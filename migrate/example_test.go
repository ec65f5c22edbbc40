package migrate_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/migrate"
)

// A legacy key file imported into a new database: all or nothing, with a
// report of what was taken, left out or tolerated. The keys keep their
// secrets (stored hashed) and their usage windows.
func ExampleImportLegacy() {
	dir, err := os.MkdirTemp("", "migrate-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC)
	db, err := ratestore.Open(filepath.Join(dir, "db"), ratestore.Options{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	file := `{"keys": [{
		"key": "pk_live_3c9e1f7a2b8d4e6f0a1b2c3d4e5f6a7b",
		"name": "gateway-prod", "model": "glm-4.7",
		"token_limit_per_5h": 100000,
		"expiry_date": "2027-01-01T00:00:00Z",
		"created_at": "2026-01-02T10:00:00.000Z",
		"last_used": "2026-01-18T11:58:30.250Z",
		"total_lifetime_tokens": 1834411,
		"usage_windows": [{"window_start": "2026-01-18T09:30:00.000Z", "tokens_used": 41250}]
	}]}`
	rep, err := migrate.ImportLegacy(context.Background(), db, strings.NewReader(file))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d keys, %d usage windows\n", rep.Keys, rep.Windows)

	keys, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	k, err := keys.Authenticate(context.Background(), "pk_live_3c9e1f7a2b8d4e6f0a1b2c3d4e5f6a7b")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(k.Name, "authenticates with its old secret")
	// Output:
	// 1 keys, 1 usage windows
	// gateway-prod authenticates with its old secret
}
