package etcd

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Scheme is the URL scheme OpenURL accepts.
const Scheme = "etcd"

// DefaultPort is the port OpenURL uses for a host given without one.
const DefaultPort = "2379"

// dialTimeout bounds OpenURL's first connection to etcd.
const dialTimeout = 5 * time.Second

// OpenURL opens a client for the etcd cluster named by u and returns a Store
// over it; the Store owns the client and closes it on Close.
//
// The URL's form is
//
//	etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/PREFIX
//
// HOSTs are the cluster's client endpoints, reached over plain HTTP (port
// 2379 when omitted); USER and PASSWORD, if given, authenticate with etcd's
// auth. PREFIX is required, and every key of the store lives under
// "PREFIX/": etcd://10.0.0.1:2379,10.0.0.2:2379/indexer/prod stores key k as
// "indexer/prod/k". Query parameters and fragments are refused rather than
// ignored. TLS endpoints are not supported by OpenURL: build a
// *clientv3.Client with the TLS configuration and call New.
//
// A program that takes a --store flag parses it with url.Parse and calls
// OpenURL(ctx, u) when u.Scheme is Scheme, with a ctx that bounds start-up.
func OpenURL(ctx context.Context, u *url.URL, opts ...Option) (*Store, error) {
	endpoints, prefix, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: open %s: %w", redacted(u), mapError(err))
	}
	s, err := newStore(ctx, cli, true, prefix, opts)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return s, nil
}

// parseURL splits an etcd:// URL into client endpoints and a key prefix.
func parseURL(u *url.URL) (endpoints []string, prefix string, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("etcd: url %s: %s: %w", redacted(u), fmt.Sprintf(format, args...), backends.ErrInvalid)
	}
	switch {
	case u == nil:
		return nil, "", fmt.Errorf("etcd: nil url: %w", backends.ErrInvalid)
	case u.Scheme != Scheme:
		return nil, "", bad("scheme %q, want %q", u.Scheme, Scheme)
	case u.Opaque != "":
		return nil, "", bad("want %s://HOST:PORT/PREFIX", Scheme)
	case u.RawQuery != "" || u.ForceQuery:
		return nil, "", bad("query parameters are not supported")
	case u.Fragment != "":
		return nil, "", bad("fragments are not supported")
	case u.Host == "":
		return nil, "", bad("no host")
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, "", bad("empty host in %q", u.Host)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, DefaultPort
			if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
				return nil, "", bad("host %q: %v", h, err)
			}
			host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		}
		if host == "" || port == "" {
			return nil, "", bad("host %q needs a name and a port", h)
		}
		endpoints = append(endpoints, "http://"+net.JoinHostPort(host, port))
	}
	prefix = strings.Trim(u.Path, "/")
	if prefix == "" {
		return nil, "", bad("no key prefix: want %s://HOST:PORT/PREFIX", Scheme)
	}
	prefix += "/"
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, "", fmt.Errorf("etcd: url %s: prefix: %w", redacted(u), err)
	}
	return endpoints, prefix, nil
}

// redacted prints u without its password.
func redacted(u *url.URL) string {
	if u == nil {
		return "<nil>"
	}
	return u.Redacted()
}
