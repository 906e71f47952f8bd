package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// A program that imports this package opens kube stores by URL with
// storeurl.Open:
//
//	kube://NAMESPACE[?kubeconfig=PATH&context=NAME&session=DURATION]
//
// names the Lease objects in NAMESPACE. Credentials are found as kubectl
// finds them: in the kubeconfig file PATH (percent-encoded in the query)
// if given, else in the files $KUBECONFIG lists, else in ~/.kube/config;
// only when there is no kubeconfig at all, from the pod's service account
// (in-cluster). context=NAME picks a context of the kubeconfig instead of
// its current one. session=DURATION (a Go
// duration such as 1s; positive) opens the store WithSession(DURATION);
// without it each claim is a Lease renewed on its own. The client has no
// client-side rate limit (client-go's default is 5 requests a second), so
// that a process renewing many claims is throttled only by the API
// server's flow control. Opening lists the namespace's Leases once, bounded
// by ctx, so that an API server that cannot be reached or refuses the
// credentials fails the open, naming the server.
func init() {
	storeurl.Register(storeurl.Scheme{
		Name:   "kube",
		Form:   "kube://NAMESPACE[?kubeconfig=PATH&context=NAME&session=DURATION]",
		Params: []string{"kubeconfig", "context", "session"},
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			c, err := parseURL(u)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, _ storeurl.Request) (backends.Store, error) { return c.open(ctx) }, nil
		},
	})
}

// urlConfig is what a kube URL asks for.
type urlConfig struct {
	namespace, kubeconfig string
	context               string        // the kubeconfig context; "": its current one
	session               time.Duration // 0: a Lease per claim
}

func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	if u.Host == "" {
		return c, errors.New("no namespace: want kube://NAMESPACE[?kubeconfig=PATH]")
	}
	if errs := validation.IsDNS1123Label(u.Host); len(errs) > 0 {
		return c, fmt.Errorf("namespace %q: %s", u.Host, strings.Join(errs, "; "))
	}
	if u.Path != "" && u.Path != "/" {
		return c, fmt.Errorf("path %q: want kube://NAMESPACE[?kubeconfig=PATH]", u.Path)
	}
	c.namespace = u.Host
	q := u.Query()
	if q.Has("kubeconfig") {
		if c.kubeconfig = q.Get("kubeconfig"); c.kubeconfig == "" {
			return c, errors.New("kubeconfig is empty")
		}
	}
	if q.Has("context") {
		if c.context = q.Get("context"); c.context == "" {
			return c, errors.New("context is empty")
		}
	}
	if q.Has("session") {
		v := q.Get("session")
		d, err := time.ParseDuration(v)
		switch {
		case err != nil:
			return c, fmt.Errorf("session %q: want a batch interval such as session=1s", v)
		case d <= 0:
			// Zero would read as "off" to some and as "no pause between
			// batches" to others: neither is taken.
			return c, fmt.Errorf("session %q: the batch interval must be positive, such as session=1s", v)
		}
		c.session = d
	}
	return c, nil
}

// restConfig finds the client configuration as kubectl does: the
// kubeconfig file of the URL, else $KUBECONFIG's files, else
// ~/.kube/config, with the URL's context if it names one; in-cluster
// configuration only when no kubeconfig file exists.
func (c urlConfig) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.kubeconfig != "" {
		rules.ExplicitPath = c.kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no kubeconfig (kubeconfig=PATH, $KUBECONFIG or ~/.kube/config) and no in-cluster configuration: %w", err)
	}
	return cfg, nil
}

func (c urlConfig) open(ctx context.Context) (*Store, error) {
	cfg, err := c.restConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: open: %w", err)
	}
	// No client-side rate limit: client-go's default (5 requests a
	// second, bursts of 10) would hold a process's renewals back in the
	// client past their deadlines once it holds a few claims, each
	// renewed on its own. The API server's own flow control throttles
	// instead, with answers the store reports as throttling.
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: open %s: %w", cfg.Host, err)
	}
	if _, err := client.CoordinationV1().Leases(c.namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("kube: open %s: %w", cfg.Host, (&Store{namespace: c.namespace}).classify("list leases", "", err))
	}
	opts := []Option{WithNamespace(c.namespace)}
	if c.session > 0 {
		opts = append(opts, WithSession(c.session))
	}
	return New(client, opts...)
}
