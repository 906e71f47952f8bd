package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

// TestArgumentErrorsNamed checks that a call refused for its arguments says
// so as every other error of the store does, naming the store and the
// operation ("postgres: txn: ..."), and wraps backends.ErrInvalid.
func TestArgumentErrorsNamed(t *testing.T) {
	srv := sharedServer(t)
	st := open(t, srv.DSN(srv.NewDatabase(t)), newTable())
	ctx := testCtx(t)
	v := []byte("v")
	for _, c := range []struct {
		want string
		do   func() error
	}{
		{"postgres: get: ", func() error { _, err := st.Get(ctx, ""); return err }},
		{"postgres: list: ", func() error { _, err := st.List(ctx, "bad\xff"); return err }},
		{"postgres: create: ", func() error { _, err := st.CreateIfAbsent(ctx, "", v, 0); return err }},
		{"postgres: cas: ", func() error { _, err := st.CompareAndSet(ctx, "k", -1, v, 0); return err }},
		{"postgres: delete: ", func() error { return st.CompareAndDelete(ctx, "", 1) }},
		{`postgres: delete "k": `, func() error { return st.CompareAndDelete(ctx, "k", 0) }},
		{"postgres: keepalive: ", func() error { _, err := st.KeepAlive(ctx, "", 1, 1); return err }},
		{`postgres: keepalive "k": `, func() error { _, err := st.KeepAlive(ctx, "k", 0, 1); return err }},
		{"postgres: txn: ", func() error {
			_, err := st.Txn(ctx, nil, []backends.Op{{Kind: backends.OpPut, Key: ""}})
			return err
		}},
		{"postgres: watch: ", func() error { _, err := st.Watch(ctx, "bad\xff"); return err }},
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
