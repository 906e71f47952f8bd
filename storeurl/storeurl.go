package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tenure-go/tenure/backends"
)

// Scheme is what a backend registers to open the stores of one URL
// scheme. Parse checks what every scheme shares before it calls the
// scheme's own Parse: no spaces or control characters, no fragment, no
// query parameter the scheme does not list or given twice, no user or
// password unless the scheme takes them, and an "@" only after the
// credentials.
type Scheme struct {
	// Name is the URL scheme, in lower case ("etcd"). URLs match it in any
	// case.
	Name string
	// Form is the scheme's URL form, for usage and error messages:
	// "etcd://HOST[:PORT][,HOST[:PORT]...]/PREFIX[?lease=shared]".
	Form string
	// Params are the query parameters the scheme takes, besides create.
	Params []string
	// Credentials says the scheme takes a user and password before its host.
	// Parse prints them redacted; the scheme's Parse gets them in u.User.
	Credentials bool
	// Create says the scheme can make a store that does not exist yet, when a
	// URL asks with create=true. A scheme without it refuses create=.
	Create bool
	// Parse checks the scheme's own parts of u and returns what opens the
	// store u names. u has been through the shared checks above; its Host
	// is the authority as written (several hosts separated by commas, see
	// Hosts), its Path is decoded, and its query holds no create. Parse
	// opens nothing. Its error is shown after the redacted URL, so it need
	// neither repeat the URL nor wrap backends.ErrInvalid.
	Parse func(u *url.URL) (Opener, error)
}

// Opener opens a store that a Scheme's Parse checked. ctx bounds every
// step of opening. An error names what could not be reached and why.
type Opener func(ctx context.Context, req Request) (backends.Store, error)

// Request is what a program asks of an Opener besides the URL.
type Request struct {
	// Create is true only for a Scheme with Create when the URL (or
	// Location.Create) asks for it; otherwise the store must already
	// exist.
	Create bool
	// ReadOnly is Location.ReadOnly: the program will only read the store,
	// and opening it must not write to it (make a directory, a file, a
	// key, a table or a bucket). A store that does not exist is refused,
	// whatever would stand in for it when written to. Never set with
	// Create. A scheme whose opening writes nothing may ignore it.
	ReadOnly bool
}

// Register makes a scheme known to Parse and Open. A backend calls it from
// an init function, so that a program opens by URL exactly the stores it
// links in (as database/sql drivers register). A scheme registered twice,
// or without a name, a form or a Parse, is not opened: Parse reports it.
func Register(s Scheme) {
	mu.Lock()
	defer mu.Unlock()
	name := strings.ToLower(s.Name)
	switch {
	case name == "" || s.Parse == nil || s.Form == "":
		broken[name] = fmt.Sprintf("scheme %q registered without a name, a form or a parser", s.Name)
	case schemes[name] != nil || broken[name] != "":
		broken[name] = fmt.Sprintf("scheme %s registered twice (two packages claim it)", name)
	default:
		s.Name = name
		schemes[name] = &s
	}
}

var (
	mu      sync.Mutex
	schemes = map[string]*Scheme{} // guarded by mu; by name
	broken  = map[string]string{}  // guarded by mu; why a name cannot be used
)

// linkable names the package that registers each scheme tenure provides,
// for the error a URL of a scheme not linked in gets.
var linkable = map[string]string{
	"mem":        "github.com/tenure-go/tenure/backends/memstore",
	"file":       "github.com/tenure-go/tenure/backends/filestore",
	"etcd":       "github.com/tenure-go/tenure/backends/etcd",
	"kube":       "github.com/tenure-go/tenure/backends/kube",
	"nats":       "github.com/tenure-go/tenure/backends/nats",
	"postgres":   "github.com/tenure-go/tenure/backends/postgres",
	"postgresql": "github.com/tenure-go/tenure/backends/postgres",
	"dynamodb":   "github.com/tenure-go/tenure/backends/dynamodb",
}

func lookup(name string) (*Scheme, string) {
	mu.Lock()
	defer mu.Unlock()
	if why := broken[name]; why != "" {
		return nil, why
	}
	return schemes[name], ""
}

// Forms is a one-line summary of the URL forms of the schemes linked in,
// for usage messages.
func Forms() string {
	mu.Lock()
	defer mu.Unlock()
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, n)
	}
	if len(names) == 0 {
		return "no store linked in"
	}
	slices.Sort(names)
	forms := make([]string, len(names))
	for i, n := range names {
		forms[i] = schemes[n].Form
	}
	return strings.Join(forms, ", ")
}

// Location is a checked store URL, as Parse returns it. Only Parse makes a
// Location that opens.
type Location struct {
	// Scheme is the URL's scheme, in lower case.
	Scheme string
	// Create is true when the URL asks with create=true for the store to be
	// made if it does not exist. A program may set it (from a flag of its
	// own) before Open, or refuse a Location that has it: a command that
	// only reads a store should never make one.
	Create bool
	// ReadOnly is set by a program that will only read the store, before
	// Open: opening it then writes nothing to it, and a store that does
	// not exist yet is refused (see Request). Open refuses a Location with
	// both Create and ReadOnly set.
	ReadOnly bool

	u    *url.URL // the URL as Parse checked it, Host restored as written
	pu   *url.URL // the URL the scheme's Parse was given
	open Opener
}

// User returns the user the URL names, "" if none, and whether the URL
// has a password too.
func (l *Location) User() (user string, hasPassword bool) {
	if l.pu == nil || l.pu.User == nil {
		return "", false
	}
	_, hasPassword = l.pu.User.Password()
	return l.pu.User.Username(), hasPassword
}

// WithPassword returns a copy of l that opens its store with the password
// pw, for a program that reads the password from somewhere other than the
// URL (an environment variable, a file), where the process list does not
// show it. The URL must name a user and no password, and its scheme must
// take credentials; String shows the password redacted, as for a password
// in the URL.
func (l *Location) WithPassword(pw string) (*Location, error) {
	sch, _ := lookup(l.Scheme)
	switch {
	case l.pu == nil || sch == nil:
		return nil, &Error{URL: l.String(), Msg: "Location not made by Parse"}
	case !sch.Credentials:
		return nil, &Error{URL: l.String(), Msg: fmt.Sprintf("%s:// takes no user or password", l.Scheme)}
	case l.pu.User == nil || l.pu.User.Username() == "":
		return nil, &Error{URL: l.String(), Msg: "a password needs a user in the URL (USER@HOST)"}
	}
	if _, has := l.pu.User.Password(); has {
		return nil, &Error{URL: l.String(), Msg: "the URL has a password already"}
	}
	pu := *l.pu
	pu.User = url.UserPassword(l.pu.User.Username(), pw)
	open, err := sch.Parse(&pu)
	if err != nil {
		return nil, &Error{URL: l.String(), Msg: err.Error(), Err: err}
	}
	given := *l.u
	given.User = pu.User
	c := *l
	c.u, c.pu, c.open = &given, &pu, open
	return &c, nil
}

// String is the URL with its password, if any, redacted.
func (l *Location) String() string {
	if l.u == nil {
		return l.Scheme + "://"
	}
	s := l.u.Redacted()
	if rest, ok := strings.CutPrefix(s, l.Scheme+":"); ok && !strings.HasPrefix(rest, "//") {
		s = l.Scheme + "://" + rest // url.URL writes no "//" before an empty authority and path
	}
	return s
}

// Open opens the store raw names: Parse, then Location.Open.
func Open(ctx context.Context, raw string) (backends.Store, error) {
	loc, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx)
}

// Open opens the store l names. ctx bounds every step (an etcd dial, a
// first request); with a ctx that has no deadline, an unreachable server
// makes Open wait until ctx is cancelled. A store that does not exist is
// made only when l.Create is set. Close the Store to release everything
// Open made. An error about the URL itself wraps backends.ErrInvalid; any
// other names the store and why it could not be opened.
func (l *Location) Open(ctx context.Context) (backends.Store, error) {
	if l.open == nil {
		return nil, &Error{URL: l.String(), Msg: "Location not made by Parse"}
	}
	if l.Create {
		if s, _ := lookup(l.Scheme); s == nil || !s.Create {
			return nil, &Error{URL: l.String(), Msg: fmt.Sprintf("%s:// stores cannot be created", l.Scheme)}
		}
		if l.ReadOnly {
			return nil, &Error{URL: l.String(), Msg: "a store opened read-only is never created"}
		}
	}
	s, err := l.open(ctx, Request{Create: l.Create, ReadOnly: l.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("storeurl: open %q: %w", l, err)
	}
	return s, nil
}

// Error is a URL that Parse (or Open) refuses. It wraps backends.ErrInvalid,
// so that a program can tell a bad URL (a usage error) from a store it
// could not reach, and the error the scheme's Parse returned, if any.
type Error struct {
	URL string // redacted
	Msg string
	Err error // from the scheme's Parse, or nil
}

func (e *Error) Error() string {
	if e.URL == "" {
		return "storeurl: " + e.Msg
	}
	return fmt.Sprintf("storeurl: %q: %s", e.URL, e.Msg)
}

// Unwrap returns backends.ErrInvalid and the scheme's error, if any.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{backends.ErrInvalid, e.Err}
	}
	return []error{backends.ErrInvalid}
}

// Parse checks raw without opening anything. Its errors are *Error (they
// wrap backends.ErrInvalid) and show raw with its password redacted.
func Parse(raw string) (*Location, error) {
	if raw == "" {
		return nil, &Error{Msg: "empty url: want " + Forms()}
	}
	bad := badURL(redact(raw))
	name, sch, rest, err := parseScheme(raw, bad)
	if err != nil {
		return nil, err
	}
	u, tail, err := splitURL(name, rest, bad)
	if err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad.errorf("query: %v", err)
	}
	if err := checkParams(q, sch, name, bad); err != nil {
		return nil, err
	}
	l := &Location{Scheme: name}
	given := *u // as written, for String
	if vs, ok := q["create"]; ok {
		switch vs[0] {
		case "true":
			l.Create = true
		case "false":
		default:
			return nil, bad.errorf("create %q: want create=true or create=false", vs[0])
		}
		q.Del("create")
		u.RawQuery = q.Encode()
	}
	if err := checkRest(u, tail, q, sch, name, bad); err != nil {
		return nil, err
	}
	open, err := sch.Parse(u)
	if err != nil {
		return nil, &Error{URL: string(bad), Msg: err.Error(), Err: err}
	}
	l.u, l.pu, l.open = &given, u, open
	return l, nil
}

// badURL is a URL as errors show it (its password redacted).
type badURL string

// errorf is the *Error of the URL that says what is wrong with it.
func (b badURL) errorf(format string, args ...any) error {
	return &Error{URL: string(b), Msg: fmt.Sprintf(format, args...)}
}

// parseScheme finds raw's scheme, which must be known and linked in, and
// returns it with what follows its "://".
func parseScheme(raw string, bad badURL) (name string, sch *Scheme, rest string, _ error) {
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return "", nil, "", bad.errorf("spaces and control characters are not allowed (percent-encode them)")
		}
	}
	i := strings.Index(raw, "://")
	if i < 0 {
		if j := strings.Index(raw, ":"); j > 0 {
			return "", nil, "", bad.errorf("want SCHEME://..., such as %s://", strings.ToLower(raw[:j]))
		}
		return "", nil, "", bad.errorf("no scheme: want %s", Forms())
	}
	name = strings.ToLower(raw[:i])
	sch, why := lookup(name)
	switch {
	case why != "":
		return "", nil, "", bad.errorf("%s", why)
	case sch == nil && linkable[name] != "":
		return "", nil, "", bad.errorf("scheme %s is not linked in: import _ %q", name, linkable[name])
	case sch == nil:
		return "", nil, "", bad.errorf("unknown scheme %q: want %s", raw[:i], Forms())
	}
	return name, sch, raw[i+3:], nil
}

// splitURL parses rest, what follows "name://". url.Parse refuses several
// hosts without ports (h1,h2:2379) and would print the password in its
// errors: the authority is split off here, and url.Parse sees a stand-in
// host. Credentials end at the last "@", as in redact, so that no part of
// a password is ever taken for a host or a path; an "@" elsewhere must be
// percent-encoded. tail is what follows the host.
func splitURL(name, rest string, bad badURL) (u *url.URL, tail string, _ error) {
	userinfo := ""
	if k := strings.LastIndex(rest, "@"); k >= 0 {
		userinfo, rest = rest[:k+1], rest[k+1:]
	}
	if strings.IndexFunc(userinfo[:max(len(userinfo)-1, 0)], badUserinfo) >= 0 {
		return nil, "", bad.errorf("bad character in user or password, or an unescaped %q (percent-encode it)", "@")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host, tail := rest[:end], rest[end:]
	u, err := url.Parse(name + "://" + userinfo + "h" + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.URL holds the password
		}
		return nil, "", bad.errorf("%v", err)
	}
	u.Host = host
	return u, tail, nil
}

// checkParams checks that every parameter of q is one the scheme takes,
// given once.
func checkParams(q url.Values, sch *Scheme, name string, bad badURL) error {
	for k, vs := range q {
		if !(k == "create" && sch.Create) && !slices.Contains(sch.Params, k) {
			return bad.errorf("unknown parameter %q (%s:// takes %s)", k, name, paramList(sch))
		}
		if len(vs) != 1 {
			return bad.errorf("parameter %q given %d times", k, len(vs))
		}
	}
	return nil
}

// checkRest refuses what no scheme takes: a fragment, a user or password
// where the scheme takes none, control characters in the path or in a
// parameter's decoded value.
func checkRest(u *url.URL, tail string, q url.Values, sch *Scheme, name string, bad badURL) error {
	switch {
	case u.Fragment != "" || strings.Contains(tail, "#"):
		return bad.errorf("fragments are not supported")
	case u.User != nil && !sch.Credentials:
		return bad.errorf("%s:// takes no user or password", name)
	}
	for _, r := range u.Path {
		if r < ' ' || r == 0x7f {
			return bad.errorf("control character in path")
		}
	}
	// The query's values reach the scheme decoded: no control character
	// there either.
	for _, vs := range q {
		if strings.IndexFunc(vs[0], func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
			return bad.errorf("control character in a parameter")
		}
	}
	return nil
}

func paramList(s *Scheme) string {
	ps := slices.Clone(s.Params)
	if s.Create {
		ps = append(ps, "create")
	}
	switch len(ps) {
	case 0:
		return "none"
	case 1:
		return "only " + ps[0]
	}
	return "only " + strings.Join(ps[:len(ps)-1], ", ") + " and " + ps[len(ps)-1]
}

// Hosts checks the comma-separated HOST[:PORT] list of u.Host, for schemes
// whose URL names servers, and returns it as host:port pairs, in order,
// with defaultPort where a host has none. A HOST is a name of letters,
// digits, '-', '.' and '_', or an IPv6 address in brackets. Its errors
// are shown after the URL by Parse.
func Hosts(u *url.URL, defaultPort string) ([]string, error) {
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	var hosts []string
	for _, h := range strings.Split(u.Host, ",") {
		ep, err := hostPort(h, defaultPort)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, ep)
	}
	return hosts, nil
}

// hostPort checks one host of a host list and returns it as host:port.
func hostPort(h, defaultPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host")
	}
	host, port := h, defaultPort
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
			host = h[1 : len(h)-1]
		} else {
			var err error
			if host, port, err = net.SplitHostPort(h); err != nil {
				return "", fmt.Errorf("host %q: %v", h, err)
			}
		}
	} else if strings.Contains(h, ":") {
		return "", fmt.Errorf("host %q: an IPv6 address goes in brackets", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", fmt.Errorf("host %q: bad port %q", h, port)
	}
	if strings.HasPrefix(h, "[") {
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return "", fmt.Errorf("host %q: bad IPv6 address", h)
		}
	} else if host == "" || strings.IndexFunc(host, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_')
	}) >= 0 {
		return "", fmt.Errorf("host %q: bad host name", h)
	}
	return net.JoinHostPort(host, port), nil
}

// badUserinfo: r may not appear unescaped in the user or password of a URL
// (RFC 3986 unreserved and sub-delims, ":" and "%" may). Checked before
// url.Parse, whose errors would quote the password.
func badUserinfo(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~!$&'()*+,;=:%", r)
}

// redact hides the password of raw the way url.URL.Redacted does, even when
// raw is too malformed for url.Parse. Credentials end at the last "@".
func redact(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		if strings.Contains(raw, "@") {
			// An opaque URL (scheme:user:pass@host): show the scheme only.
			if j := strings.Index(raw, ":"); j >= 0 {
				return raw[:j+1] + "xxxxx"
			}
			return "xxxxx"
		}
		return raw
	}
	rest := raw[i+3:]
	k := strings.LastIndex(rest, "@")
	if k < 0 {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:k], ":")
	if !hasPass {
		return raw
	}
	return raw[:i+3] + user + ":xxxxx" + rest[k:]
}
