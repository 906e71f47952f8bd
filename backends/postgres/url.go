package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// Scheme is the URL scheme of a PostgreSQL store. SchemeLong, libpq's
// other spelling, opens the same stores.
const (
	Scheme     = "postgres"
	SchemeLong = "postgresql"
)

// DefaultPort is the port of a host a URL gives without one.
const DefaultPort = "5432"

// shortForm is a PostgreSQL store URL's form in usage messages, which list
// every scheme's on one line; the parameters are listed in url.go's doc
// and in the error an unknown one gets.
const shortForm = "postgres://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?table=[SCHEMA.]TABLE&PARAM=VALUE...&create=true]"

// formTail is what follows a PostgreSQL store URL's scheme, in full.
const formTail = "://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?table=[SCHEMA.]TABLE&sslmode=MODE&connect_timeout=SECONDS&application_name=NAME&target_session_attrs=read-write|primary&async_standbys=accept&pooler=transaction&listen=HOST[:PORT]&create=true], or ?host=/SOCKET/DIR[&port=PORT] instead of HOST"

// params are the query parameters a URL may give, besides create.
var params = []string{"table", "sslmode", "connect_timeout", "application_name", "host", "port", "target_session_attrs", "async_standbys", "pooler", "listen"}

// sslModes are the libpq sslmode values a URL may give.
var sslModes = []string{"disable", "allow", "prefer", "require", "verify-ca", "verify-full"}

// sessionAttrs are the libpq target_session_attrs values a URL may give:
// those that reach only a server that accepts writes.
var sessionAttrs = []string{"read-write", "primary"}

// A program that imports this package opens PostgreSQL stores by URL with
// storeurl.Open, under either of libpq's scheme names:
//
//	postgres://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?PARAMS]
//	postgresql://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?PARAMS]
//	postgres://[USER[:PASSWORD]@]/DATABASE?host=/SOCKET/DIR[&port=PORT][&PARAMS]
//	postgres://[USER[:PASSWORD]@]%2FSOCKET%2FDIR[:PORT]/DATABASE[?PARAMS]
//
// connects to DATABASE (port 5432 when omitted; several hosts are tried in
// order) and keeps entries in TABLE (default public.tenure_entries). The
// parameters are:
//
//   - table=[SCHEMA.]TABLE: where the entries are kept;
//   - sslmode=MODE: libpq's (default prefer);
//   - connect_timeout=SECONDS: bounds each connection attempt, as libpq's
//     does (0 or absent: only the caller's context bounds it);
//   - application_name=NAME: shown by the server in pg_stat_activity;
//   - target_session_attrs=read-write|primary: libpq's, limited to the
//     values that reach only a writable server: read-write (the default:
//     the first host that accepts writes) or primary (the first that is
//     not in recovery); after a failover the store's next connections go
//     to the new primary;
//   - async_standbys=accept: WithAsyncStandbys, the store opens on a
//     primary with asynchronous standbys, which it refuses otherwise;
//   - host=/DIR: a directory holding the server's unix socket, as libpq
//     allows, in place of the hosts before the path (or percent-encoded
//     there, %2FDIR[:PORT]); port=PORT then names the socket's port
//     (default 5432);
//   - pooler=transaction: the hosts are a pooler in transaction mode
//     (PgBouncer's pool_mode = transaction): see WithPooler. pooler=session
//     and pooler=none (the default) are a session-mode pooler and a direct
//     connection, where the store may keep session state;
//   - listen=HOST[:PORT][,HOST[:PORT]...]: the server(s) the watch
//     listens on, directly, with the URL's user, password, database and
//     other parameters, when the hosts before the path are a
//     transaction-mode pooler (see WithListen); without it, a store behind
//     one declares no watch;
//   - create=true: runs Setup, creating the table, its sequence and its
//     trigger where missing; without it they must exist, and opening fails
//     with an error wrapping backends.ErrMissingResource if they do not.
//
// A program that opens the store read-only (storeurl's Location.ReadOnly,
// as tenure's holders and watch do) gets a store opened WithReadOnly:
// it refuses writes, and opens on a primary whose standbys the store
// would otherwise refuse, with or without async_standbys=accept.
//
// What the URL leaves out is taken from libpq's environment variables, as
// pgx reads them: PGUSER and PGPASSWORD (or the password file, PGPASSFILE,
// default ~/.pgpass) when the URL names no user or password, PGSSLMODE,
// PGSSLCERT, PGSSLKEY, PGSSLROOTCERT and PGSSLPASSWORD, PGAPPNAME,
// PGCONNECT_TIMEOUT, PGOPTIONS and PGTZ. The host, the database and
// target_session_attrs always come from the URL. The password is never printed:
// storeurl shows the URL redacted, and the store's errors name the hosts,
// the database and the cause only, on one line.
func init() {
	for name, form := range map[string]string{Scheme: shortForm, SchemeLong: SchemeLong + ":// (as postgres://)"} {
		storeurl.Register(storeurl.Scheme{
			Name:        name,
			Form:        form,
			Params:      params,
			Credentials: true,
			Create:      true,
			Parse: func(u *url.URL) (storeurl.Opener, error) {
				c, err := parseURL(u)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context, req storeurl.Request) (backends.Store, error) {
					return c.open(ctx, req.Create, req.ReadOnly)
				}, nil
			},
		})
	}
}

// urlConfig is what a postgres URL asks for.
type urlConfig struct {
	hosts         []string // host:port; empty with a socket directory
	socket        string   // a unix-socket directory, or ""
	port          string   // the socket's port, with socket
	database      string
	schema, table string
	sslmode       string
	timeout       string // connect_timeout, in seconds
	appName       string
	sessionAttrs  string // target_session_attrs
	asyncStandbys bool
	pooler        Pooler
	listen        []string // host:port of the watch's direct connection
	user          *url.Userinfo
}

func parseURL(u *url.URL) (urlConfig, error) {
	c := urlConfig{schema: DefaultSchema, table: DefaultTable, sessionAttrs: "read-write"}
	form := u.Scheme + formTail
	q := u.Query()
	if err := c.parseServer(u, q, form); err != nil {
		return c, err
	}
	c.database = strings.Trim(u.Path, "/")
	if c.database == "" || strings.Contains(c.database, "/") {
		return c, fmt.Errorf("database %q: want one name: %s", c.database, form)
	}
	if err := c.parseTable(q); err != nil {
		return c, err
	}
	if err := c.parseConnParams(q); err != nil {
		return c, err
	}
	if err := c.parsePooler(q); err != nil {
		return c, err
	}
	c.user = u.User
	return c, nil
}

// parseServer reads where the server is: a socket directory, given as
// host=/DIR or percent-encoded before the path (%2FDIR[:PORT]), libpq's two
// spellings, or the hosts before the path.
func (c *urlConfig) parseServer(u *url.URL, q url.Values, form string) error {
	encoded := strings.HasPrefix(strings.ToUpper(u.Host), "%2F")
	if !q.Has("host") && !encoded {
		if q.Has("port") {
			return fmt.Errorf("port= goes with host=/SOCKET/DIR only; give a host's port as HOST:PORT")
		}
		hosts, err := storeurl.Hosts(u, DefaultPort)
		if err != nil {
			return fmt.Errorf("%v: want %s", err, form)
		}
		c.hosts = hosts
		return nil
	}
	dir, port := q.Get("host"), ""
	if q.Has("host") && u.Host != "" {
		return fmt.Errorf("host %q and host=%s: give the server either before the path or as a socket directory, not both", u.Host, dir)
	}
	if encoded {
		raw := u.Host
		if i := strings.LastIndex(raw, ":"); i >= 0 {
			raw, port = raw[:i], raw[i+1:]
			if port == "" {
				return fmt.Errorf("host %q: empty port", u.Host)
			}
		}
		var err error
		if dir, err = url.PathUnescape(raw); err != nil {
			return fmt.Errorf("host %q: %v", u.Host, err)
		}
	}
	if !strings.HasPrefix(dir, "/") || path.Clean(dir) != dir {
		return fmt.Errorf("socket directory %q: want the absolute path of the directory that holds the server's unix socket (a host name goes before the path)", dir)
	}
	if q.Has("port") {
		if port != "" {
			return fmt.Errorf("port given twice, as %s and port=%s", port, q.Get("port"))
		}
		port = q.Get("port")
	}
	if port == "" {
		port = DefaultPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	c.socket, c.port = dir, port
	return nil
}

// parseTable reads table=[SCHEMA.]TABLE.
func (c *urlConfig) parseTable(q url.Values) error {
	if !q.Has("table") {
		return nil
	}
	v := q.Get("table")
	schema, table, ok := strings.Cut(v, ".")
	if !ok {
		schema, table = DefaultSchema, v
	}
	if err := checkIdent("schema", schema); err != nil {
		return err
	}
	if err := checkIdent("table", table); err != nil {
		return err
	}
	c.schema, c.table = schema, table
	return nil
}

// parseConnParams reads the libpq parameters the store passes on
// (sslmode, connect_timeout, application_name, target_session_attrs), and
// async_standbys.
func (c *urlConfig) parseConnParams(q url.Values) error {
	if q.Has("sslmode") {
		v := q.Get("sslmode")
		if !slices.Contains(sslModes, v) {
			return fmt.Errorf("sslmode %q: want one of %s", v, strings.Join(sslModes, ", "))
		}
		c.sslmode = v
	}
	if q.Has("connect_timeout") {
		v := q.Get("connect_timeout")
		if n, err := strconv.Atoi(v); err != nil || n < 0 || strconv.Itoa(n) != v {
			return fmt.Errorf("connect_timeout %q: want whole seconds, 0 or more (libpq's form)", v)
		}
		c.timeout = v
	}
	if q.Has("application_name") {
		v := q.Get("application_name")
		if len(v) > 63 {
			return fmt.Errorf("application_name %q: at most 63 bytes (the server keeps no more)", v)
		}
		c.appName = v
	}
	if q.Has("target_session_attrs") {
		v := q.Get("target_session_attrs")
		ok := false
		for _, a := range sessionAttrs {
			ok = ok || v == a
		}
		if !ok {
			return fmt.Errorf("target_session_attrs %q: want one of %s (a store writes: it must not connect to a standby)", v, strings.Join(sessionAttrs, ", "))
		}
		c.sessionAttrs = v
	}
	if q.Has("async_standbys") {
		if v := q.Get("async_standbys"); v != "accept" {
			return fmt.Errorf("async_standbys %q: want accept, or leave it out", v)
		}
		c.asyncStandbys = true
	}
	return nil
}

// parsePooler reads pooler= and listen=, which goes with a transaction
// pooler only.
func (c *urlConfig) parsePooler(q url.Values) error {
	c.pooler = PoolerNone
	if q.Has("pooler") {
		switch v := q.Get("pooler"); v {
		case "none", "session":
		case "transaction":
			c.pooler = PoolerTransaction
		default:
			return fmt.Errorf("pooler %q: want transaction (PgBouncer's pool_mode = transaction), session or none", v)
		}
	}
	if q.Has("listen") {
		v := q.Get("listen")
		hosts, err := storeurl.Hosts(&url.URL{Host: v}, DefaultPort)
		if err != nil {
			return fmt.Errorf("listen=%s: %v: want HOST[:PORT][,HOST[:PORT]...], the server(s) the watch listens on directly", v, err)
		}
		if c.pooler != PoolerTransaction {
			return fmt.Errorf("listen=%s goes with pooler=transaction only: without a transaction-mode pooler, the watch listens on the URL's own hosts", v)
		}
		c.listen = hosts
	}
	return nil
}

// connString is the libpq URL pgx connects with; it holds the password.
func (c urlConfig) connString() string { return c.connStringTo(c.hosts) }

// connStringTo is connString with other hosts (the watch's).
func (c urlConfig) connStringTo(hosts []string) string {
	u := url.URL{Scheme: "postgres", User: c.user, Host: strings.Join(hosts, ","), Path: "/" + c.database}
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if c.socket != "" && len(hosts) == 0 {
		set("host", c.socket)
		set("port", c.port)
	}
	set("sslmode", c.sslmode)
	set("connect_timeout", c.timeout)
	set("application_name", c.appName)
	set("target_session_attrs", c.sessionAttrs)
	u.RawQuery = q.Encode()
	return u.String()
}

// where names the server(s) a URL points at, for errors.
func (c urlConfig) where() string {
	if c.socket != "" {
		return "socket " + path.Join(c.socket, ".s.PGSQL."+c.port)
	}
	return strings.Join(c.hosts, ",")
}

func (c urlConfig) open(ctx context.Context, create, readOnly bool) (*Store, error) {
	opts := []Option{WithTable(c.schema, c.table), WithPooler(c.pooler)}
	if c.asyncStandbys {
		opts = append(opts, WithAsyncStandbys())
	}
	if len(c.listen) > 0 {
		opts = append(opts, WithListen(c.connStringTo(c.listen)))
	}
	if !create {
		opts = append(opts, WithoutSetup())
	}
	if readOnly {
		opts = append(opts, WithReadOnly())
	}
	s, err := Open(ctx, c.connString(), opts...)
	if err != nil {
		return nil, openError(c, err)
	}
	return s, nil
}

// openError is the one line an Open through a URL fails with: the
// database, the servers and the cause, never the password, wrapping the
// class's sentinel and err.
func openError(c urlConfig, err error) error {
	msg := fmt.Sprintf("postgres: open database %q on %s: %s", c.database, c.where(), cause(err))
	if user := c.user; user != nil {
		if pw, ok := user.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return &lineError{msg: msg, err: err}
}

// cause is why err happened, in a few words: what the server said (its
// message and SQLSTATE), or what the network said ("connection refused"),
// without pgx's account of the attempt and without this package's
// prefixes and sentinels. Several hosts that failed alike are said once.
// A failed attempt with TLS is left out when another attempt failed for
// another reason: with sslmode=prefer (the default) pgx tries TLS first
// and, refused, asks again without, and the second answer is the cause.
func cause(err error) string {
	var out, tlsOut []string
	add := func(s string, tls bool) {
		s = strings.ReplaceAll(strings.TrimPrefix(s, "postgres: "), "\n", " ")
		s = strings.TrimPrefix(s, "open: ") // openError says open already
		if tls {
			if !slices.Contains(tlsOut, s) {
				tlsOut = append(tlsOut, s)
			}
			return
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	var walk func(e error, tls bool)
	walk = func(e error, tls bool) {
		if p, ok := e.(*poolerError); ok {
			// What to do, then what the server said.
			add(poolerHint+": "+cause(p.err), tls)
			return
		}
		if x, ok := e.(interface{ Unwrap() []error }); ok {
			for _, y := range x.Unwrap() {
				if !isSentinel(y) {
					walk(y, tls)
				}
			}
			return
		}
		next := errors.Unwrap(e)
		switch {
		case next == nil && e == context.DeadlineExceeded:
			add("no answer before the deadline ("+e.Error()+")", tls)
		case next == nil:
			add(e.Error(), tls)
		case isSentinel(next):
			// One of this package's own errors: its words, less the class.
			add(strings.TrimSuffix(e.Error(), ": "+next.Error()), tls)
		default:
			// pgx says "tls error: " of an attempt that failed to set up
			// TLS (or was refused it).
			walk(next, tls || strings.HasPrefix(e.Error(), "tls error: "))
		}
	}
	walk(err, false)
	if len(out) == 0 {
		out = tlsOut
	}
	if len(out) == 0 {
		return err.Error()
	}
	return strings.Join(out, "; ")
}

// isSentinel reports whether err is one of the backends sentinels a store
// error wraps to state its class, or ErrSchema, which states one too.
func isSentinel(err error) bool {
	for _, e := range []error{ErrSchema, backends.ErrUnavailable, backends.ErrThrottled, backends.ErrPermission, backends.ErrMissingResource, backends.ErrInvalid, backends.ErrUnsupported, backends.ErrCorrupt} {
		if err == e {
			return true
		}
	}
	return false
}

// lineError is an error whose text is one line of its own, wrapping the
// error it sums up (for errors.Is and errors.As); that error's text is not
// shown.
type lineError struct {
	msg string
	err error
}

func (e *lineError) Error() string { return e.msg }

func (e *lineError) Unwrap() error { return e.err }
