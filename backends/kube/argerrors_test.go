package kube_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/kube"
	"k8s.io/client-go/kubernetes/fake"
)

// TestArgumentErrorsNamed checks that a call refused for its arguments says
// so as every other error of the store does, naming the store and the
// operation ("kube: get: ..."), and wraps backends.ErrInvalid. The
// arguments are checked before any request: the fake clientset serves.
func TestArgumentErrorsNamed(t *testing.T) {
	st, err := kube.New(fake.NewClientset())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	v := []byte("v")
	for _, c := range []struct {
		want string
		do   func() error
	}{
		{"kube: get: ", func() error { _, err := st.Get(ctx, ""); return err }},
		{"kube: list: ", func() error { _, err := st.List(ctx, "bad\xff"); return err }},
		{"kube: create: ", func() error { _, err := st.CreateIfAbsent(ctx, "", v, 0); return err }},
		{"kube: cas: ", func() error { _, err := st.CompareAndSet(ctx, "k", -1, v, 0); return err }},
		{"kube: delete: ", func() error { return st.CompareAndDelete(ctx, "", 1) }},
		{`kube: delete "k": `, func() error { return st.CompareAndDelete(ctx, "k", 0) }},
		{"kube: keepalive: ", func() error { _, err := st.KeepAlive(ctx, "", 1, 1); return err }},
		{`kube: keepalive "k": `, func() error { _, err := st.KeepAlive(ctx, "k", 0, 1); return err }},
		{"kube: watch: ", func() error { _, err := st.Watch(ctx, "bad\xff"); return err }},
	} {
		err := c.do()
		if !errors.Is(err, backends.ErrInvalid) || !strings.HasPrefix(fmtErr(err), c.want) {
			t.Errorf("got %v, want an error beginning %q wrapping ErrInvalid", err, c.want)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
