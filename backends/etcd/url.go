package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Scheme is the URL scheme of an etcd store.
const Scheme = "etcd"

// DefaultPort is the port of a host an etcd URL gives without one.
const DefaultPort = "2379"

// The values of an etcd URL's lease parameter.
const (
	leaseShared   = "shared"
	leasePerClaim = "per-claim"
)

// A program that imports this package opens etcd stores by URL with
// storeurl.Open. The form is
//
//	etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/PREFIX[?lease=MODE]
//
// HOSTs are the cluster's client endpoints, reached over plain HTTP (port
// 2379 when omitted); USER and PASSWORD, if given, authenticate with etcd's
// auth. PREFIX is required, and every key of the store lives under
// "PREFIX/": etcd://10.0.0.1:2379,10.0.0.2:2379/indexer/prod stores key k as
// "indexer/prod/k". lease=shared opens the store WithSharedLease (its
// default batch interval); lease=per-claim, the default, grants a lease
// per write. Any other parameter, and a fragment, is refused rather than
// ignored. TLS endpoints are not supported here: build a *clientv3.Client
// with the TLS configuration and call New. The Store owns the client it
// made and closes it on Close.
//
// ctx bounds every step of opening: the dial (which waits until one
// endpoint answers) and the probe of the server's shortest lease. When it
// ends first, the error names the endpoints and the last dial error (such
// as "connection refused") and wraps backends.ErrUnavailable and ctx's
// error. With a ctx that has no deadline, opening waits for as long as no
// endpoint answers.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:        Scheme,
		Form:        "etcd://HOST[:PORT][,HOST[:PORT]...]/PREFIX[?lease=shared]",
		Params:      []string{"lease"},
		Credentials: true,
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			c, err := parseURL(u)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, _ storeurl.Request) (backends.Store, error) { return c.open(ctx) }, nil
		},
	})
}

// urlConfig is what an etcd URL asks for.
type urlConfig struct {
	endpoints      []string // host:port
	prefix         string   // ends in "/"
	user, password string
	shared         bool
}

// parseURL checks the parts of an etcd URL that storeurl leaves to the
// scheme. Its errors neither repeat the URL nor show the password.
func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	eps, err := storeurl.Hosts(u, DefaultPort)
	if err != nil {
		return c, fmt.Errorf("%v: want etcd://HOST:PORT[,HOST:PORT...]/PREFIX", err)
	}
	c.endpoints = eps
	prefix := strings.Trim(u.Path, "/")
	if prefix == "" {
		return c, errors.New("no key prefix: want etcd://HOST:PORT/PREFIX")
	}
	c.prefix = prefix + "/"
	if err := backends.ValidatePrefix(c.prefix); err != nil {
		return c, fmt.Errorf("prefix: %v", err)
	}
	q := u.Query()
	if q.Has("lease") {
		switch v := q.Get("lease"); v {
		case leaseShared:
			c.shared = true
		case leasePerClaim:
		default:
			return c, fmt.Errorf("lease %q: want lease=%s or lease=%s", v, leaseShared, leasePerClaim)
		}
	}
	if u.User != nil {
		c.user = u.User.Username()
		c.password, _ = u.User.Password()
	}
	return c, nil
}

// open dials the endpoints and makes a Store that owns the client. ctx
// bounds the dial and the probe; once open, the client no longer depends
// on ctx.
func (c urlConfig) open(ctx context.Context) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("etcd: open %s: %w", strings.Join(c.endpoints, ","), err)
	}
	// The client lives on after ctx, but its dial (and its auth) must end
	// with ctx: cliCtx is cancelled if ctx ends before the store is open.
	cliCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	eps := make([]string, len(c.endpoints))
	for i, ep := range c.endpoints {
		eps[i] = "http://" + ep
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: eps,
		Context:   cliCtx,
		Username:  c.user,
		Password:  c.password,
		Logger:    zap.NewNop(),
		// Wait until an endpoint answers, and say why none did: without
		// these the dial returns at once, and the first request waits for
		// a connection and fails with ctx's error alone.
		DialOptions: []grpc.DialOption{grpc.WithBlock(), grpc.WithReturnConnectionError()}, //nolint:staticcheck // clientv3 dials with grpc.DialContext, which honours them
	})
	if err != nil {
		stop()
		cancel()
		return nil, c.unreachable(ctx, err)
	}
	var opts []Option
	if c.shared {
		opts = append(opts, WithSharedLease(0))
	}
	s, err := newStore(ctx, cli, true, c.prefix, opts)
	if err != nil {
		stop()
		cli.Close()
		cancel()
		return nil, fmt.Errorf("etcd: open %s: %w", strings.Join(c.endpoints, ","), err)
	}
	if !stop() {
		// ctx ended as the store opened, and took the client with it.
		s.Close()
		cancel()
		return nil, fmt.Errorf("etcd: open %s: %w", strings.Join(c.endpoints, ","), ctx.Err())
	}
	return s, nil
}

// unreachable is the error of a dial that failed: it names the endpoints
// and the last dial error ("dial tcp 127.0.0.1:1: connect: connection
// refused"), without the context error and the wrapping gRPC puts around
// it (ctx's own error comes last).
func (c urlConfig) unreachable(ctx context.Context, err error) error {
	eps := strings.Join(c.endpoints, ",")
	if ctx.Err() == nil {
		return fmt.Errorf("etcd: open %s: %w", eps, mapError(err))
	}
	msg := err.Error()
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		msg = strings.TrimPrefix(msg, e.Error())
	}
	msg = strings.TrimPrefix(msg, ": ")
	// gRPC: connection error: desc = "transport: Error while dialing: ..."
	if _, desc, ok := strings.Cut(msg, "desc = "); ok {
		if d, err := strconv.Unquote(desc); err == nil {
			msg = strings.TrimPrefix(strings.TrimPrefix(d, "transport: "), "Error while dialing: ")
		}
	}
	if msg == "" {
		return fmt.Errorf("etcd: cannot reach %s: %w: %w", eps, backends.ErrUnavailable, ctx.Err())
	}
	return fmt.Errorf("etcd: cannot reach %s (%s): %w: %w", eps, msg, backends.ErrUnavailable, ctx.Err())
}
