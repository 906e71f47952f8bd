package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/kube"
	"github.com/tenure-go/tenure/backends/memstore"
)

// The schemes Open accepts.
const (
	SchemeMem  = "mem"
	SchemeFile = "file"
	SchemeEtcd = etcd.Scheme
	SchemeKube = "kube"
)

// Forms is a one-line summary of the URL forms, for usage messages.
const Forms = "mem://, file:///DIR, etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?lease=shared] or kube://NAMESPACE[?kubeconfig=PATH&session=DURATION] (each parameter optional)"

// Location is a checked store URL, as Parse returns it. Its fields are
// for reading (to log, or to build a backend by hand); Open uses the URL
// Parse checked. Only Parse makes a Location that opens.
type Location struct {
	// Scheme is one of the Scheme constants.
	Scheme string
	// Dir is the directory of a file:// URL, absolute and cleaned.
	Dir string
	// Endpoints are the host:port pairs of an etcd:// URL, in order.
	Endpoints []string
	// Prefix is the key prefix of an etcd:// URL, without its slashes.
	Prefix string
	// Namespace and Kubeconfig are the parts of a kube:// URL; Kubeconfig
	// is empty when the pod's service account is to be used.
	Namespace, Kubeconfig string
	// SharedLease is true when an etcd:// URL asks for lease=shared: the
	// store is opened with etcd.WithSharedLease (default batch interval).
	SharedLease bool
	// Session is the batch interval of a kube:// URL's session=DURATION,
	// with which the store is opened with kube.WithSession; zero when the
	// URL has no session parameter (a Lease per claim).
	Session time.Duration

	u *url.URL // the parsed URL, Host restored as written
}

// String is the URL with its password, if any, redacted.
func (l *Location) String() string {
	if l.u == nil {
		return l.Scheme + "://"
	}
	return l.u.Redacted()
}

// Open opens the store raw names; ctx bounds start-up (etcd dials and asks
// for a lease). Close the Store to release everything Open made. An error
// about the URL itself wraps backends.ErrInvalid.
func Open(ctx context.Context, raw string) (backends.Store, error) {
	loc, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return loc.Open(ctx)
}

// Open opens the store l names; see the package function Open.
func (l *Location) Open(ctx context.Context) (backends.Store, error) {
	if l.u == nil {
		return nil, fmt.Errorf("storeurl: open: Location not made by Parse: %w", backends.ErrInvalid)
	}
	s, err := l.open(ctx)
	if err != nil {
		return nil, fmt.Errorf("storeurl: open %q: %w", l, err)
	}
	return s, nil
}

func (l *Location) open(ctx context.Context) (backends.Store, error) {
	switch l.Scheme {
	case SchemeMem:
		return memstore.New(), nil
	case SchemeFile:
		return filestore.Open(l.Dir)
	case SchemeEtcd:
		// etcd.OpenURL takes no query: the parameters Parse checked become
		// options.
		u := *l.u
		u.RawQuery = ""
		var opts []etcd.Option
		if l.SharedLease {
			opts = append(opts, etcd.WithSharedLease(0))
		}
		return etcd.OpenURL(ctx, &u, opts...)
	case SchemeKube:
		var cfg *rest.Config
		var err error
		if l.Kubeconfig != "" {
			cfg, err = clientcmd.BuildConfigFromFlags("", l.Kubeconfig)
		} else {
			cfg, err = rest.InClusterConfig()
		}
		if err != nil {
			return nil, err
		}
		// No client-side rate limit: client-go's default (5 requests a
		// second, bursts of 10) would hold a process's renewals back in the
		// client past their deadlines once it holds a few claims, each
		// renewed on its own. The API server's own flow control throttles
		// instead, with answers the store reports as throttling.
		cfg.QPS = -1
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		opts := []kube.Option{kube.WithNamespace(l.Namespace)}
		if l.Session > 0 {
			opts = append(opts, kube.WithSession(l.Session))
		}
		return kube.New(client, opts...)
	}
	return nil, fmt.Errorf("scheme %q: %w", l.Scheme, backends.ErrInvalid)
}

// Parse checks raw without opening anything. Its errors wrap
// backends.ErrInvalid and show raw with its password redacted.
func Parse(raw string) (*Location, error) {
	shown := redact(raw)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("storeurl: %q: %s: %w", shown, fmt.Sprintf(format, args...), backends.ErrInvalid)
	}
	if raw == "" {
		return nil, fmt.Errorf("storeurl: empty url: want %s: %w", Forms, backends.ErrInvalid)
	}
	for _, r := range raw {
		if r <= ' ' || r == 0x7f {
			return nil, bad("spaces and control characters are not allowed (percent-encode them)")
		}
	}
	i := strings.Index(raw, "://")
	if i < 0 {
		return nil, bad("no scheme: want %s", Forms)
	}
	scheme := strings.ToLower(raw[:i])
	switch scheme {
	case SchemeMem, SchemeFile, SchemeEtcd, SchemeKube:
	default:
		return nil, bad("unknown scheme %q: want %s", raw[:i], Forms)
	}

	// url.Parse refuses several hosts without ports (h1,h2:2379) and would
	// print the password in its errors: the authority is split off here,
	// and url.Parse sees a stand-in host. Credentials end at the last "@",
	// as in redact, so that no part of a password is ever taken for a host
	// or a path; an "@" elsewhere must be percent-encoded.
	rest, userinfo := raw[i+3:], ""
	if k := strings.LastIndex(rest, "@"); k >= 0 {
		userinfo, rest = rest[:k+1], rest[k+1:]
	}
	if strings.IndexFunc(userinfo[:max(len(userinfo)-1, 0)], badUserinfo) >= 0 {
		return nil, bad("bad character in user or password, or an unescaped %q (percent-encode it)", "@")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	host, tail := rest[:end], rest[end:]
	u, err := url.Parse(scheme + "://" + userinfo + "h" + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.URL holds the password
		}
		return nil, bad("%v", err)
	}
	u.Host = host
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query: %v", err)
	}
	for k, vs := range q {
		if !takes(scheme, k) {
			return nil, bad("unknown parameter %q (%s:// takes %s)", k, scheme, params[scheme])
		}
		if len(vs) != 1 {
			return nil, bad("parameter %q given %d times", k, len(vs))
		}
	}
	switch {
	case u.Fragment != "" || strings.Contains(tail, "#"):
		return nil, bad("fragments are not supported")
	case u.User != nil && scheme != SchemeEtcd:
		return nil, bad("%s:// takes no user or password", scheme)
	}
	for _, r := range u.Path {
		if r < ' ' || r == 0x7f {
			return nil, bad("control character in path")
		}
	}

	l := &Location{Scheme: scheme, u: u}
	switch scheme {
	case SchemeMem:
		if host != "" || u.Path != "" {
			return nil, bad("want mem:// with nothing after it")
		}
	case SchemeFile:
		if host != "" && host != "localhost" {
			return nil, bad("host %q: want file:///ABSOLUTE/DIR (a relative directory is not accepted)", host)
		}
		if u.Path == "" || u.Path == "/" {
			return nil, bad("no directory: want file:///ABSOLUTE/DIR")
		}
		if !filepath.IsAbs(u.Path) {
			return nil, bad("directory %q is not absolute", u.Path)
		}
		l.Dir = filepath.Clean(u.Path)
	case SchemeEtcd:
		if host == "" {
			return nil, bad("no host: want etcd://HOST:PORT[,HOST:PORT...]/PREFIX")
		}
		for _, h := range strings.Split(host, ",") {
			ep, err := endpoint(h)
			if err != nil {
				return nil, bad("%v", err)
			}
			l.Endpoints = append(l.Endpoints, ep)
		}
		l.Prefix = strings.Trim(u.Path, "/")
		if l.Prefix == "" {
			return nil, bad("no key prefix: want etcd://HOST:PORT/PREFIX")
		}
		if err := backends.ValidatePrefix(l.Prefix + "/"); err != nil {
			return nil, bad("prefix: %v", err)
		}
		if vs, ok := q["lease"]; ok {
			switch vs[0] {
			case leaseShared:
				l.SharedLease = true
			case leasePerClaim:
			default:
				return nil, bad("lease %q: want lease=%s or lease=%s", vs[0], leaseShared, leasePerClaim)
			}
		}
	case SchemeKube:
		if host == "" {
			return nil, bad("no namespace: want kube://NAMESPACE[?kubeconfig=PATH]")
		}
		if errs := validation.IsDNS1123Label(host); len(errs) > 0 {
			return nil, bad("namespace %q: %s", host, strings.Join(errs, "; "))
		}
		if u.Path != "" && u.Path != "/" {
			return nil, bad("path %q: want kube://NAMESPACE[?kubeconfig=PATH]", u.Path)
		}
		l.Namespace = host
		if vs, ok := q["kubeconfig"]; ok {
			if vs[0] == "" {
				return nil, bad("kubeconfig is empty")
			}
			l.Kubeconfig = vs[0]
		}
		if vs, ok := q["session"]; ok {
			d, err := time.ParseDuration(vs[0])
			switch {
			case err != nil:
				return nil, bad("session %q: want a batch interval such as session=1s", vs[0])
			case d <= 0:
				// Zero would read as "off" to some and as "no pause between
				// batches" to others: neither is taken.
				return nil, bad("session %q: the batch interval must be positive, such as session=1s", vs[0])
			}
			l.Session = d
		}
	}
	return l, nil
}

// The values of an etcd:// URL's lease parameter.
const (
	leaseShared   = "shared"
	leasePerClaim = "per-claim"
)

// params says which query parameters each scheme takes, as error messages
// name them; takes is the same list for the parser.
var params = map[string]string{
	SchemeMem:  "none",
	SchemeFile: "none",
	SchemeEtcd: "only lease",
	SchemeKube: "only kubeconfig and session",
}

func takes(scheme, param string) bool {
	switch scheme {
	case SchemeEtcd:
		return param == "lease"
	case SchemeKube:
		return param == "kubeconfig" || param == "session"
	}
	return false
}

// endpoint checks one etcd host of an etcd:// URL and returns it as
// host:port, with the default port when it has none.
func endpoint(h string) (string, error) {
	if h == "" {
		return "", errors.New("empty host")
	}
	host, port := h, etcd.DefaultPort
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
