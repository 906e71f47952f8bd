package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// Scheme is the URL scheme of a PostgreSQL store.
const Scheme = "postgres"

// DefaultPort is the port of a host a URL gives without one.
const DefaultPort = "5432"

// form is the form of a PostgreSQL store's URL.
const form = "postgres://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?table=[SCHEMA.]TABLE&sslmode=MODE&create=true]"

// sslModes are the libpq sslmode values a URL may give.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// A program that imports this package opens PostgreSQL stores by URL with
// storeurl.Open:
//
//	postgres://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?table=[SCHEMA.]TABLE&sslmode=MODE&create=true]
//
// connects to DATABASE (port 5432 when omitted; several hosts are tried in
// order) and keeps entries in TABLE (default public.tenure_entries).
// sslmode is libpq's (default prefer). create=true runs Setup, creating
// the table, its sequence and its trigger where missing; without it they
// must exist, and opening fails with an error wrapping
// backends.ErrMissingResource if they do not. The password is never
// printed: storeurl shows the URL redacted, and the store's errors name
// the hosts and the database only.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:        Scheme,
		Form:        form,
		Params:      []string{"table", "sslmode"},
		Credentials: true,
		Create:      true,
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			c, err := parseURL(u)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, req storeurl.Request) (backends.Store, error) {
				return c.open(ctx, req.Create)
			}, nil
		},
	})
}

// urlConfig is what a postgres URL asks for.
type urlConfig struct {
	hosts         []string // host:port
	database      string
	schema, table string
	sslmode       string
	user          *url.Userinfo
}

func parseURL(u *url.URL) (urlConfig, error) {
	c := urlConfig{schema: DefaultSchema, table: DefaultTable}
	hosts, err := storeurl.Hosts(u, DefaultPort)
	if err != nil {
		return c, fmt.Errorf("%v: want %s", err, form)
	}
	c.hosts = hosts
	c.database = strings.Trim(u.Path, "/")
	if c.database == "" || strings.Contains(c.database, "/") {
		return c, fmt.Errorf("database %q: want one name: %s", c.database, form)
	}
	q := u.Query()
	if q.Has("table") {
		v := q.Get("table")
		schema, table, ok := strings.Cut(v, ".")
		if !ok {
			schema, table = DefaultSchema, v
		}
		if err := checkIdent("schema", schema); err != nil {
			return c, err
		}
		if err := checkIdent("table", table); err != nil {
			return c, err
		}
		c.schema, c.table = schema, table
	}
	if q.Has("sslmode") {
		v := q.Get("sslmode")
		ok := false
		for _, m := range sslModes {
			ok = ok || v == m
		}
		if !ok {
			return c, fmt.Errorf("sslmode %q: want one of %s", v, strings.Join(sslModes, ", "))
		}
		c.sslmode = v
	}
	c.user = u.User
	return c, nil
}

// connString is the libpq URL pgx connects with; it holds the password.
func (c urlConfig) connString() string {
	u := url.URL{Scheme: "postgres", User: c.user, Host: strings.Join(c.hosts, ","), Path: "/" + c.database}
	if c.sslmode != "" {
		u.RawQuery = url.Values{"sslmode": {c.sslmode}}.Encode()
	}
	return u.String()
}

func (c urlConfig) open(ctx context.Context, create bool) (*Store, error) {
	opts := []Option{WithTable(c.schema, c.table)}
	if !create {
		opts = append(opts, WithoutSetup())
	}
	s, err := Open(ctx, c.connString(), opts...)
	if err != nil {
		return nil, fmt.Errorf("postgres: open database %q on %s: %w", c.database, strings.Join(c.hosts, ","), scrub(err, c.user))
	}
	return s, nil
}

// scrub makes sure an error does not carry the password, whatever a driver
// put in its text: the text is rewritten if it does, keeping the sentinels.
func scrub(err error, user *url.Userinfo) error {
	if user == nil {
		return err
	}
	pw, ok := user.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), pw, "xxxxx"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }

// Unwrap keeps errors.Is working on the sentinels; the wrapped error's
// text is not shown by the scrubbed one.
func (e *scrubbed) Unwrap() error { return e.err }
