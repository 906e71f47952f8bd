package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// Scheme is the URL scheme of a NATS store.
const Scheme = "nats"

// DefaultPort is the port of a host a NATS URL gives without one.
const DefaultPort = "4222"

// A program that imports this package opens NATS stores by URL with
// storeurl.Open. The form is
//
//	nats://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/BUCKET[?create=true&replicas=N&gcgrace=DURATION]
//
// HOSTs are servers of one cluster (port 4222 when omitted), reached over
// plain TCP; USER and PASSWORD, if given, authenticate. BUCKET is a
// key-value bucket name (letters, digits, '-' and '_'). create=true
// creates a missing bucket (see WithCreate) with replicas=N replicas (1 to
// 5, default 1; replicas without create=true is refused). gcgrace is
// WithGCGrace (a Go duration of at least 1s). Any other parameter, and a
// fragment, is refused rather than ignored. For TLS or credentials files,
// connect with nats.Connect and call New.
//
// The Store owns the connection it made and closes it on Close. ctx
// bounds the connection and the checks of New. A server that cannot be
// reached fails the open with an error naming the hosts and wrapping
// backends.ErrUnavailable.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:        Scheme,
		Form:        "nats://HOST[:PORT][,HOST[:PORT]...]/BUCKET[?create=true&replicas=N&gcgrace=DURATION]",
		Params:      []string{"replicas", "gcgrace"},
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

// urlConfig is what a NATS URL asks for.
type urlConfig struct {
	servers        []string // host:port
	bucket         string
	user, password string
	replicas       int           // 0: not given
	grace          time.Duration // 0: not given
}

// parseURL checks the parts of a NATS URL that storeurl leaves to the
// scheme. Its errors neither repeat the URL nor show the password.
func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	hosts, err := storeurl.Hosts(u, DefaultPort)
	if err != nil {
		return c, fmt.Errorf("%v: want nats://HOST:PORT[,HOST:PORT...]/BUCKET", err)
	}
	c.servers = hosts
	c.bucket = strings.TrimPrefix(u.Path, "/")
	if c.bucket == "" {
		return c, errors.New("no bucket: want nats://HOST:PORT/BUCKET")
	}
	if err := validBucket(c.bucket); err != nil {
		return c, fmt.Errorf("bucket %q: want only letters, digits, '-' and '_', at most 255", c.bucket)
	}
	q := u.Query()
	if q.Has("replicas") {
		v := q.Get("replicas")
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 || strconv.Itoa(n) != v {
			return c, fmt.Errorf("replicas %q: want 1 to 5", v)
		}
		c.replicas = n
	}
	if q.Has("gcgrace") {
		v := q.Get("gcgrace")
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return c, fmt.Errorf("gcgrace %q: want a duration of at least 1s, such as gcgrace=1h", v)
		}
		c.grace = d
	}
	if u.User != nil {
		c.user = u.User.Username()
		c.password, _ = u.User.Password()
	}
	return c, nil
}

// open connects and makes a Store that owns the connection.
func (c urlConfig) open(ctx context.Context, create bool) (*Store, error) {
	servers := strings.Join(c.servers, ",")
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("nats: open %s: %w", servers, err)
	}
	var own []Option
	switch {
	case create:
		own = append(own, WithCreate(max(c.replicas, 1)))
	case c.replicas > 0:
		return nil, fmt.Errorf("nats: open %s: replicas=%d applies only with create=true: %w", servers, c.replicas, backends.ErrInvalid)
	}
	if c.grace > 0 {
		own = append(own, WithGCGrace(c.grace))
	}
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = "nats://" + s
	}
	dial := 2 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		dial = max(clock.New().Until(dl), time.Millisecond)
	}
	reconnect := &connErr{}
	nopts := []nats.Option{nats.Name("tenure"), nats.Timeout(dial), nats.MaxReconnects(-1), nats.NoEcho(), nats.ReconnectErrHandler(reconnect.set)}
	if c.user != "" {
		nopts = append(nopts, nats.UserInfo(c.user, c.password))
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nopts...)
	if err != nil {
		return nil, fmt.Errorf("nats: cannot reach %s: %w: %w", servers, backends.ErrUnavailable, mapErr(err))
	}
	own = append(own, withReconnectErrors(reconnect))
	s, err := newStore(ctx, nc, true, c.bucket, own)
	if err != nil {
		nc.Close()
		if !create && errors.Is(err, backends.ErrMissingResource) {
			return nil, fmt.Errorf("nats: open %s: %w (create=true in the URL makes it)", servers, err)
		}
		return nil, fmt.Errorf("nats: open %s: %w", servers, err)
	}
	return s, nil
}
