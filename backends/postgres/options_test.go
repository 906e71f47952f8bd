package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// TestOptionsInvalid checks that an option given a value the store cannot use
// fails with an error that names the value and wraps backends.ErrInvalid, in
// SetupSQL as in New and Open, which check their options first.
func TestOptionsInvalid(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []postgres.Option
		want string
	}{
		{"nil clock", []postgres.Option{postgres.WithClock(nil)}, "postgres: nil clock"},
		{"upper-case schema", []postgres.Option{postgres.WithTable("Public", "t")}, `postgres: schema name "Public"`},
		{"empty table", []postgres.Option{postgres.WithTable("s", "")}, `postgres: table name ""`},
		{"long table", []postgres.Option{postgres.WithTable("s", strings.Repeat("a", 49))}, "postgres: table name"},
		{"unknown pooler", []postgres.Option{postgres.WithPooler("statement")}, `postgres: pooler "statement": want "none" or "transaction"`},
		{"empty listen", []postgres.Option{postgres.WithListen("")}, "postgres: empty listen connection string"},
		{"negative window", []postgres.Option{postgres.WithBatchedKeepAlive(-time.Millisecond)}, "postgres: negative batch window -1ms"},
	} {
		_, err := postgres.SetupSQL(c.opts...)
		if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: SetupSQL = %v, want an error with %q wrapping ErrInvalid", c.name, err, c.want)
		}
	}
	for _, opts := range [][]postgres.Option{
		nil,
		{nil},
		{postgres.WithPooler(""), postgres.WithBatchedKeepAlive(0), postgres.WithPooler(postgres.PoolerTransaction), postgres.WithListen("postgres://h/db")},
	} {
		if _, err := postgres.SetupSQL(opts...); err != nil {
			t.Errorf("SetupSQL(%d valid options) = %v", len(opts), err)
		}
	}
}
