package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/kube"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// openStore opens the store a --store URL names. ctx bounds start-up.
func openStore(ctx context.Context, raw string) (backends.Store, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", raw, err)
	}
	switch u.Scheme {
	case "file":
		dir := u.Host + u.Path // file:///abs and file://rel/dir alike
		if dir == "" {
			return nil, fmt.Errorf("--store %q: no directory", raw)
		}
		return filestore.Open(dir)
	case etcd.Scheme:
		return etcd.OpenURL(ctx, u)
	case "kube":
		return openKube(u)
	}
	return nil, fmt.Errorf("--store %q: unknown scheme %q (want file, etcd or kube)", raw, u.Scheme)
}

// openKube opens kube://NAMESPACE?kubeconfig=PATH: Lease objects in
// NAMESPACE, reached with the credentials of the kubeconfig file, or with
// the pod's service account when no kubeconfig is given.
func openKube(u *url.URL) (backends.Store, error) {
	ns := u.Host
	if ns == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("--store %q: want kube://NAMESPACE[?kubeconfig=PATH]", u.Redacted())
	}
	q := u.Query()
	for k := range q {
		if k != "kubeconfig" {
			return nil, fmt.Errorf("--store %q: unknown parameter %q", u.Redacted(), k)
		}
	}
	var cfg *rest.Config
	var err error
	if path := q.Get("kubeconfig"); path != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", u.Redacted(), err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--store %q: %w", u.Redacted(), err)
	}
	return kube.New(client, kube.WithNamespace(ns))
}
