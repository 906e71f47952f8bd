package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// Scheme is the URL scheme of a DynamoDB store.
const Scheme = "dynamodb"

// A program that imports this package opens DynamoDB stores by URL with
// storeurl.Open. The form is
//
//	dynamodb://TABLE[?region=REGION&endpoint=URL&create=true]
//
// TABLE is the table's name (3 to 255 letters, digits, '_', '-' and '.').
// region is the AWS region (such as eu-west-1); without it the SDK's
// default configuration gives it (AWS_REGION, the shared config file), and
// a URL that leaves every source empty is refused at open. endpoint is an
// http:// or https:// URL of another server than AWS's (dynalite or
// DynamoDB Local, for tests and development): a host and an optional
// port, nothing else. create=true creates a missing table (CreateTable:
// on-demand billing). Credentials come from the SDK's default chain
// (environment variables, the shared credentials file, SSO, an instance
// or task role); a URL cannot carry them, and no error shows them. Any
// other parameter, a path, a user, a password and a fragment are refused.
//
// ctx bounds the SDK's configuration, the table's creation and the
// description Open asks for. A server that cannot be reached fails the
// open with an error naming the endpoint (or the region) and wrapping
// backends.ErrUnavailable. Close ends the store's idle connections.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:   Scheme,
		Form:   "dynamodb://TABLE[?region=REGION&endpoint=URL&create=true]",
		Params: []string{"region", "endpoint"},
		Create: true,
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

// urlConfig is what a DynamoDB URL asks for.
type urlConfig struct {
	table    string
	region   string // "": the SDK's default configuration
	endpoint string // "": AWS's
}

// parseURL checks the parts of a DynamoDB URL that storeurl leaves to the
// scheme. Its errors do not repeat the URL.
func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	c.table = u.Host
	switch {
	case c.table == "":
		return c, errors.New("no table: want dynamodb://TABLE")
	case strings.ContainsAny(c.table, ",:[]"):
		return c, fmt.Errorf("table %q: want only letters, digits, '_', '-' and '.', 3 to 255 of them", c.table)
	case u.Path != "" && u.Path != "/":
		return c, errors.New("a path: want dynamodb://TABLE, with the table as the host part")
	}
	if err := validTable(c.table); err != nil {
		return c, fmt.Errorf("table %q: want only letters, digits, '_', '-' and '.', 3 to 255 of them", c.table)
	}
	q := u.Query()
	if q.Has("region") {
		c.region = q.Get("region")
		if !validRegion(c.region) {
			return c, fmt.Errorf("region %q: want a region name such as eu-west-1", c.region)
		}
	}
	if q.Has("endpoint") {
		e, err := parseEndpoint(q.Get("endpoint"))
		if err != nil {
			return c, err
		}
		c.endpoint = e
	}
	return c, nil
}

// validRegion accepts what region names are made of: lower-case letters,
// digits and '-', starting with a letter, at most 64.
func validRegion(r string) bool {
	if r == "" || len(r) > 64 || r[0] < 'a' || r[0] > 'z' {
		return false
	}
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// parseEndpoint accepts an http:// or https:// URL of a host and an
// optional port, and nothing else: no user or password (credentials come
// from the SDK's chain), no path, query or fragment.
func parseEndpoint(raw string) (string, error) {
	want := "want endpoint=http://HOST[:PORT] or https://HOST[:PORT]"
	e, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("endpoint: %s", want)
	}
	switch {
	case e.Scheme != "http" && e.Scheme != "https":
		return "", fmt.Errorf("endpoint scheme %q: %s", e.Scheme, want)
	case e.User != nil:
		return "", fmt.Errorf("endpoint with a user or password (credentials come from the SDK's default chain): %s", want)
	case e.Host == "" || e.Opaque != "":
		return "", fmt.Errorf("endpoint without a host: %s", want)
	case (e.Path != "" && e.Path != "/") || e.RawQuery != "" || e.Fragment != "" || strings.Contains(raw, "#"):
		return "", fmt.Errorf("endpoint with a path, a query or a fragment: %s", want)
	}
	host, port := e.Hostname(), e.Port()
	if host == "" {
		return "", fmt.Errorf("endpoint without a host: %s", want)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("endpoint port %q: want 1 to 65535", port)
		}
	} else if strings.HasSuffix(e.Host, ":") {
		return "", fmt.Errorf("endpoint with an empty port: %s", want)
	}
	return e.Scheme + "://" + e.Host, nil
}

// where names the server a URL's store talks to, for errors.
func (c urlConfig) where() string {
	if c.endpoint != "" {
		return c.endpoint
	}
	if c.region != "" {
		return "region " + c.region
	}
	return "the default region"
}

// open loads the SDK's default configuration and opens the store over a
// client of its own, whose idle connections Close ends.
func (c urlConfig) open(ctx context.Context, create bool) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dynamodb: open %q at %s: %w", c.table, c.where(), err)
	}
	var lopts []func(*config.LoadOptions) error
	if c.region != "" {
		lopts = append(lopts, config.WithRegion(c.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, lopts...)
	if err != nil {
		return nil, fmt.Errorf("dynamodb: open %q: the SDK's default configuration: %w: %w", c.table, backends.ErrInvalid, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("dynamodb: open %q: no region: give region= in the URL, or AWS_REGION: %w", c.table, backends.ErrInvalid)
	}
	// The client built from the configuration (with its CA bundle, say)
	// is the store's own: its transport is kept, for Close to end its
	// idle connections.
	tr := &http.Transport{}
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		frozen := bc.Freeze()
		if hc, ok := frozen.(*http.Client); ok {
			if t, ok := hc.Transport.(*http.Transport); ok {
				tr = t
			}
		}
		cfg.HTTPClient = frozen
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if c.endpoint != "" {
			o.BaseEndpoint = aws.String(c.endpoint)
		}
	})
	opts := []Option{withTransport(tr)}
	if create {
		opts = append(opts, WithCreateTable())
	}
	s, err := Open(ctx, client, c.table, opts...)
	if err != nil {
		tr.CloseIdleConnections()
		if !create && errors.Is(err, backends.ErrMissingResource) && !errors.Is(err, ErrSchema) {
			return nil, fmt.Errorf("dynamodb: open at %s: %w (create=true in the URL makes it)", c.where(), err)
		}
		return nil, fmt.Errorf("dynamodb: open at %s: %w", c.where(), err)
	}
	return s, nil
}
