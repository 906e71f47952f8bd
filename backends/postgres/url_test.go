package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/storeurl"
)

const secret = "s3cr%21t-pw" // percent-encoded in URLs; "s3cr!t-pw" decoded

// TestURLParse checks what storeurl accepts and refuses for postgres://, and
// that the password never shows in what it prints.
func TestURLParse(t *testing.T) {
	good := []string{
		"postgres://h/db",
		"postgres://u:" + secret + "@h1:5433,h2/db?table=claims.leases&sslmode=require",
		"postgres://h/db?table=leases&create=true",
		"POSTGRES://[::1]:5432/db",
		"postgresql://u:" + secret + "@h1,h2:5433/db?table=leases",
		"postgres://h/db?connect_timeout=5&application_name=billing-leader",
		"postgres://h/db?connect_timeout=0",
		"postgres:///db?host=/run/postgresql",
		"postgresql://u@/db?host=/var/run/postgresql&port=5433&create=true",
		"postgresql://u@%2Fvar%2Frun%2Fpostgresql/db",
		"postgres://%2frun%2fpostgresql:5433/db?table=leases",
		"postgres://h1,h2/db?target_session_attrs=read-write",
		"postgres://h1,h2/db?target_session_attrs=primary&async_standbys=accept",
		"postgres://u:" + secret + "@bouncer:6432/db?pooler=transaction",
		"postgres://bouncer:6432/db?pooler=transaction&listen=db1:5432,db2",
		"postgres://bouncer:6432/db?pooler=session",
		"postgres://h/db?pooler=none",
	}
	for _, raw := range good {
		loc, err := storeurl.Parse(raw)
		if err != nil {
			t.Errorf("storeurl.Parse(%q): %v, want success", raw, err)
			continue
		}
		if s := loc.String(); strings.Contains(s, "s3cr") {
			t.Errorf("Location.String() of %q = %q: shows the password", raw, s)
		}
	}
	bad := []string{
		"postgres://h",                                     // no database
		"postgres://h/",                                    // no database
		"postgres://h/a/b",                                 // two path segments
		"postgres:///db",                                   // no host
		"postgres://h/db?table=Bad",                        // upper case
		"postgres://h/db?table=a.b.c",                      // three parts
		"postgres://h/db?table=x;drop",                     // not an identifier
		"postgres://h/db?sslmode=maybe",                    // unknown mode
		"postgres://h/db?search_path=x",                    // unknown parameter
		"postgres://h1,h2/db?target_session_attrs=any",     // may reach a standby
		"postgres://h1,h2/db?target_session_attrs=standby", // a standby
		"postgres://h/db?async_standbys=yes",               // not the word that says what is accepted
		"postgres://u:" + secret + "@h:0/db",               // bad port, with a password
		"postgres://u:" + secret + "@h/db?x=1",             // unknown parameter, with a password
		"postgresql://h",                                   // no database
		"postgres://h/db?connect_timeout=1.5",              // libpq takes whole seconds
		"postgres://h/db?connect_timeout=-1",               // negative
		"postgres://h/db?connect_timeout=5s",               // not libpq's form
		"postgres://h/db?application_name=" + strings.Repeat("a", 64),
		"postgres:///db?host=run/postgresql",                  // a socket directory is absolute
		"postgres://h/db?host=/run/postgresql",                // two servers named
		"postgres:///db?host=/run/pg&port=0",                  // bad port
		"postgres://h/db?port=5433",                           // port= only with a socket
		"postgres://%2Frun%2Fpg:5433/db?port=5434",            // port twice
		"postgres://%2Frun%2F..%2Fpg/db",                      // not a clean path
		"postgres://%2Frun%2Fpg:/db",                          // empty port
		"postgres://%2Frun%2Fpg/db?host=/run/pg",              // two servers named
		"postgres:///db",                                      // no host at all
		"postgres://u:" + secret + "@/db?host=",               // empty socket directory, with a password
		"postgres://h/db?pooler=statement",                    // not a mode the store knows
		"postgres://h/db?listen=db1",                          // listen= without a transaction pooler
		"postgres://h/db?pooler=transaction&listen=db1:0",     // bad port
		"postgres://h/db?pooler=transaction&listen=",          // no host
		"postgres://h/db?pooler=transaction&listen=u:p@db1",   // no credentials there
		"postgres://h/db?pooler=transaction&listen=%2Fsocket", // hosts only
	}
	for _, raw := range bad {
		_, err := storeurl.Parse(raw)
		if err == nil {
			t.Errorf("storeurl.Parse(%q) = success, want an error", raw)
			continue
		}
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("storeurl.Parse(%q) = %v, want an error wrapping ErrInvalid", raw, err)
		}
		if strings.Contains(err.Error(), "s3cr") {
			t.Errorf("storeurl.Parse(%q) error %q shows the password", raw, err)
		}
	}
}

// TestURLOpen opens stores by URL on a real server: create=true makes the
// table; without it a missing table is ErrMissingResource; a server that
// cannot be reached is ErrUnavailable. No error shows the password.
func TestURLOpen(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	base := fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&table=urls.claims", secret, srv.Addr(), db)
	ctx := t.Context()

	_, err := storeurl.Open(ctx, base)
	if !errors.Is(err, backends.ErrMissingResource) {
		t.Errorf("Open(%s) of a missing table = %v, want ErrMissingResource", base, err)
	}
	noPassword(t, err)

	st, err := storeurl.Open(ctx, base+"&create=true")
	if err != nil {
		t.Fatalf("Open(create=true): %v", err)
	}
	e, err := st.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
	if err != nil {
		t.Fatalf("CreateIfAbsent: %v", err)
	}
	st.Close()
	st, err = storeurl.Open(ctx, base) // the table exists now
	if err != nil {
		t.Fatalf("Open of an existing table: %v", err)
	}
	defer st.Close()
	if got, err := st.Get(ctx, "k"); err != nil || got.CreateRevision != e.CreateRevision {
		t.Errorf("Get(k) after reopening = %+v, %v; want token %d", got, err, e.CreateRevision)
	}
	if schema, table := st.(*postgres.Store).Table(); schema != "urls" || table != "claims" {
		t.Errorf("Table() = %s.%s, want urls.claims", schema, table)
	}

	ctx2, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unreachable := fmt.Sprintf("postgres://postgres:%s@127.0.0.1:1/%s?sslmode=disable", secret, db)
	_, err = storeurl.Open(ctx2, unreachable)
	if backends.Classify(err) != backends.ClassTransient {
		t.Errorf("Open(%s) = %v, want a transient error", unreachable, err)
	}
	noPassword(t, err)
}

// TestURLOpenSocket opens a store through the server's unix socket,
// named by a host= directory as libpq allows, under the postgresql://
// spelling, with an application_name the server then shows for the
// store's connections.
func TestURLOpenSocket(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	raw := fmt.Sprintf("postgresql://postgres@/%s?host=%s&port=%d&application_name=tenure-socket-test&create=true", db, url.QueryEscape(srv.SocketDir()), srv.Port())
	st, err := storeurl.Open(within(t, 30*time.Second), raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	defer st.Close()
	if _, err := st.CreateIfAbsent(t.Context(), "k", []byte("v"), 0); err != nil {
		t.Fatalf("CreateIfAbsent over the socket: %v", err)
	}
	// libpq's other spelling: the directory percent-encoded before the path.
	other := fmt.Sprintf("postgres://postgres@%s:%d/%s", url.PathEscape(srv.SocketDir()), srv.Port(), db)
	if !strings.HasPrefix(other, "postgres://postgres@%2F") {
		t.Fatalf("url.PathEscape left the slashes of %s: %s", srv.SocketDir(), other)
	}
	st2, err := storeurl.Open(within(t, 30*time.Second), other)
	if err != nil {
		t.Fatalf("Open(%s): %v", other, err)
	}
	if got, err := st2.Get(t.Context(), "k"); err != nil || string(got.Value) != "v" {
		t.Errorf("Get(k) over %s = %+v, %v; want v", other, got, err)
	}
	st2.Close()
	c, err := pgxConnect(t.Context(), srv.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	q := `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'tenure-socket-test' AND client_port = -1`
	if err := c.QueryRow(t.Context(), q, db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("no connection of the store's on the unix socket with application_name tenure-socket-test (pg_stat_activity)")
	}
}

// TestURLConnectTimeout checks that connect_timeout bounds a connection
// attempt to a server that accepts the connection and never answers, when the
// caller's context has no deadline of its own to end it.
func TestURLConnectTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never answered
		}
	}()
	defer func() {
		l.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	}()
	raw := fmt.Sprintf("postgres://postgres@%s/db?sslmode=disable&connect_timeout=1", l.Addr())
	// The bound of the test, not of the open: connect_timeout must end it
	// long before.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	began := time.Now()
	_, err = storeurl.Open(ctx, raw)
	took := time.Since(began)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Open(%s) = %v after %v, want a timeout from connect_timeout before the test's bound", raw, err, took)
	}
	if backends.Classify(err) != backends.ClassTransient {
		t.Errorf("Open(%s) = %v, want a transient error", raw, err)
	}
	t.Logf("refused after %v: %v", took, err)
}

// TestURLOpenErrorLine checks that a store that cannot be opened says so in
// one line that names the database, the servers and the cause as the network
// or the server gave it, without pgx's account of the attempt or repeated
// prefixes, and never the password.
func TestURLOpenErrorLine(t *testing.T) {
	srv := pgtest.Shared(t)
	ctx := within(t, 30*time.Second)
	for _, c := range []struct {
		raw, want string
		class     backends.Class
	}{
		{
			fmt.Sprintf("postgres://postgres:%s@127.0.0.1:1,127.0.0.1:2/appdb?sslmode=disable", secret),
			`postgres: open database "appdb" on 127.0.0.1:1,127.0.0.1:2: connection refused`,
			backends.ClassTransient,
		},
		{
			// sslmode=prefer (the default) tries TLS first on each host.
			fmt.Sprintf("postgres://postgres:%s@127.0.0.1:1/appdb", secret),
			`postgres: open database "appdb" on 127.0.0.1:1: connection refused`,
			backends.ClassTransient,
		},
		{
			// The server refuses TLS, and pgx asks again without: the
			// refusal is not the cause.
			fmt.Sprintf("postgresql://postgres:%s@%s/nosuchdb", secret, srv.Addr()),
			`postgres: open database "nosuchdb" on ` + srv.Addr() + `: FATAL: database "nosuchdb" does not exist (SQLSTATE 3D000)`,
			backends.ClassFatal,
		},
		{
			fmt.Sprintf("postgresql://postgres:%s@%s/nosuchdb?sslmode=disable", secret, srv.Addr()),
			`postgres: open database "nosuchdb" on ` + srv.Addr() + `: FATAL: database "nosuchdb" does not exist (SQLSTATE 3D000)`,
			backends.ClassFatal,
		},
		{
			fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&table=none.here", secret, srv.Addr(), srv.NewDatabase(t)),
			`missing (create them with Setup, or with create=true in a store URL)`,
			backends.ClassFatal,
		},
	} {
		_, err := storeurl.Open(ctx, c.raw)
		noPassword(t, err)
		if err == nil {
			t.Errorf("Open(%s) = success, want an error", c.raw)
			continue
		}
		msg := err.Error()
		_, line, _ := strings.Cut(msg, `": `) // what follows storeurl's prefix
		if !strings.HasPrefix(line, "postgres: open database") || !strings.HasSuffix(line, c.want) && !strings.Contains(line, c.want) {
			t.Errorf("Open(%s) error\n%s\nwant after the URL a line ending in\n%s", c.raw, msg, c.want)
		}
		if strings.Contains(msg, "\n") || strings.Count(msg, "postgres: ") != 1 || strings.Contains(msg, "failed to connect") || strings.Contains(msg, "dial") || strings.Contains(msg, "tls") {
			t.Errorf("Open(%s) error is not one clean line: %q", c.raw, msg)
		}
		if got := backends.Classify(err); got != c.class {
			t.Errorf("Open(%s) class = %v, want %v (%v)", c.raw, got, c.class, err)
		}
	}
}

func noPassword(t *testing.T, err error) {
	t.Logf("error: %v", err)
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), "s3cr") || strings.Contains(fmt.Sprintf("%+v", err), "s3cr")) {
		t.Errorf("error %q shows the password", err)
	}
}
