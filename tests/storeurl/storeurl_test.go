package storeurl_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tenure-go/tenure/backends"
	_ "github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	_ "github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/kube"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	_ "github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/storeurl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.LeakOptions()...) }

// TestParse checks that Parse accepts a URL of each scheme linked in and keeps
// its scheme, its create parameter and its text (for String) as written. What
// each scheme makes of its own parts is tested with the backend.
func TestParse(t *testing.T) {
	tests := []struct {
		raw, scheme string
		create      bool
		shown       string
	}{
		{"mem://", "mem", false, "mem://"},
		{"MEM://", "mem", false, "mem://"},
		{"file:///var/lib/claims", "file", false, "file:///var/lib/claims"},
		{"file://localhost/var/a%20b", "file", false, "file://localhost/var/a%20b"},
		{"file:///var/lib/claims?create=true", "file", true, "file:///var/lib/claims?create=true"},
		{"file:///var/lib/claims?create=false", "file", false, "file:///var/lib/claims?create=false"},
		{"etcd://127.0.0.1:2379/app", "etcd", false, "etcd://127.0.0.1:2379/app"},
		{"etcd://h1,h2:2380/a/b/", "etcd", false, "etcd://h1,h2:2380/a/b/"},
		{"etcd://[::1]:1,[::1]/p", "etcd", false, "etcd://[::1]:1,[::1]/p"},
		{"etcd://user:p%40ss@etcd-0.svc:2379/p?lease=shared", "etcd", false, "etcd://user:xxxxx@etcd-0.svc:2379/p?lease=shared"},
		{"kube://team-a/?kubeconfig=%2Fhome%2Fme%2F.kube%2Fconfig&session=1s", "kube", false, "kube://team-a/?kubeconfig=%2Fhome%2Fme%2F.kube%2Fconfig&session=1s"},
	}
	for _, tt := range tests {
		got, err := storeurl.Parse(tt.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.raw, err)
			continue
		}
		if got.Scheme != tt.scheme || got.Create != tt.create || got.String() != tt.shown {
			t.Errorf("Parse(%q) = scheme %q, create %v, shown %q; want %q, %v, %q", tt.raw, got.Scheme, got.Create, got, tt.scheme, tt.create, tt.shown)
		}
	}
}

// TestParseRefuses feeds Parse hostile and malformed URLs: each is refused
// with an error wrapping backends.ErrInvalid that says what is wrong.
func TestParseRefuses(t *testing.T) {
	tests := []struct{ raw, says string }{
		{"", "empty url"},
		{" ", "spaces"},
		{" mem://", "spaces"},
		{"mem:// ", "spaces"},
		{"file:///a b", "spaces"},
		{"file:///a\tb", "control"},
		{"file:///a\x00b", "control"},
		{"file:///a%00b", "control character in path"},
		{"mem", "no scheme"},
		{"mem:", "want SCHEME://..., such as mem://"},
		{"mem::", "want SCHEME://..., such as mem://"},
		{"nats://127.0.0.1:4222/b", `scheme nats is not linked in: import _ "github.com/tenure-go/tenure/backends/nats"`},
		{"postgres://u:pw@db/tenure", `scheme postgres is not linked in: import _ "github.com/tenure-go/tenure/backends/postgres"`},
		{"dynamodb://claims?region=eu-west-1", `scheme dynamodb is not linked in: import _ "github.com/tenure-go/tenure/backends/dynamodb"`},
		{"file:///d?create=yes", `create "yes": want create=true or create=false`},
		{"file:///d?create=1", `create "1"`},
		{"file:///d?create=true&create=true", `parameter "create" given 2 times`},
		{"etcd://h:1/p?create=true", `unknown parameter "create" (etcd:// takes only lease)`},
		{"kube://ns?create=true", `unknown parameter "create"`},
		{"mem://?create=true", `unknown parameter "create" (mem:// takes none)`},
		{"/var/lib/claims", "no scheme"},
		{"ftp://x", `unknown scheme "ftp"`},
		{"http://127.0.0.1:2379/p", `unknown scheme "http"`},
		{"://x", `unknown scheme ""`},
		{"mem://x", "nothing after it"},
		{"mem:///p", "nothing after it"},
		{"mem://?size=1", `unknown parameter "size"`},
		{"mem://#f", "fragments"},
		{"file://", "no directory"},
		{"file:///", "no directory"},
		{"file://localhost", "no directory"},
		{"file://rel/dir", `host "rel"`},
		{"file://./dir", `host "."`},
		{"file://u:p@/dir", "no user or password"},
		{"file:///dir?mode=0700", `unknown parameter "mode"`},
		{"file:///dir?%zz", "query"},
		{"etcd://", "no host"},
		{"etcd:///p", "no host"},
		{"etcd://h:2379", "no key prefix"},
		{"etcd://h:2379/", "no key prefix"},
		{"etcd://h:2379//", "no key prefix"},
		{"etcd://h1,,h2/p", "empty host"},
		{"etcd://h1,/p", "empty host"},
		{"etcd://h:/p", "bad port"},
		{"etcd://h:0/p", "bad port"},
		{"etcd://h:65536/p", "bad port"},
		{"etcd://h:-1/p", "bad port"},
		{"etcd://h:+1/p", "bad port"},
		{"etcd://h:02379/p", "bad port"},
		{"etcd://h:x/p", "bad port"},
		{"etcd://::1/p", "brackets"},
		{"etcd://[zz]:1/p", "bad IPv6"},
		{"etcd://[1.2.3.4]:1/p", "bad IPv6"},
		{"etcd://[::1/p", "missing ']'"},
		{"etcd://h%41:1/p", "bad host name"},
		{"etcd://h:1/p?dial-timeout=1s", `unknown parameter "dial-timeout"`},
		{"etcd://h:1/p?x=1&x=2", `unknown parameter "x"`},
		{"etcd://h:1/p#frag", "fragments"},
		{"kube://", "no namespace"},
		{"kube:///x", "no namespace"},
		{"kube://?kubeconfig=/k", "no namespace"},
		{"kube://Team", "namespace"},
		{"kube://a_b", "namespace"},
		{"kube://ns/extra", `path "/extra"`},
		{"kube://ns?other=1", `unknown parameter "other"`},
		{"kube://ns?kubeconfig=", "kubeconfig is empty"},
		{"kube://ns?kubeconfig=/a&kubeconfig=/b", "given 2 times"},
		{"kube://ns:443", "namespace"},
		{"kube://u:p@ns", "no user or password"},
		{"kube://ns?kubeconfig=/a@b", "unescaped"},
		{"etcd://u:p/q@h/p", "unescaped"},
		// The lease mode of etcd:// and the session of kube://.
		{"etcd://h:1/p?lease=", `lease "": want lease=shared or lease=per-claim`},
		{"etcd://h:1/p?lease", `lease "": want`},
		{"etcd://h:1/p?lease=Shared", `lease "Shared"`},
		{"etcd://h:1/p?lease=session", `lease "session"`},
		{"etcd://h:1/p?lease=shared%20", `lease "shared "`},
		{"etcd://h:1/p?lease=shared%00", "control character in a parameter"},
		{"etcd://h:1/p?lease=shared&lease=shared", `parameter "lease" given 2 times`},
		{"etcd://h:1/p?lease=shared&lease=per-claim", "given 2 times"},
		{"etcd://h:1/p?session=1s", `unknown parameter "session" (etcd:// takes only lease)`},
		{"etcd://h:1/p?lease=shared;x=1", "query"},
		{"kube://ns?lease=shared", `unknown parameter "lease" (kube:// takes only kubeconfig, context and session)`},
		{"kube://ns?session=", `session "": want a batch interval`},
		{"kube://ns?session", `session "": want a batch interval`},
		{"kube://ns?session=true", `session "true": want a batch interval`},
		{"kube://ns?session=1", `session "1": want a batch interval`},
		{"kube://ns?session=1x", `session "1x"`},
		{"kube://ns?session=-1s", `session "-1s": the batch interval must be positive`},
		{"kube://ns?session=0", "must be positive"},
		{"kube://ns?session=0s", "must be positive"},
		{"kube://ns?session=1s&session=2s", `parameter "session" given 2 times`},
		{"kube://ns?session=99999999999h", `session "99999999999h"`},
		{"file:///d?lease=shared", `unknown parameter "lease"`},
		{"mem://?session=1s", `unknown parameter "session"`},
	}
	for _, tt := range tests {
		_, err := storeurl.Parse(tt.raw)
		var ue *storeurl.Error
		if !errors.Is(err, backends.ErrInvalid) || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.says) || !strings.HasPrefix(err.Error(), "storeurl: ") {
			t.Errorf("Parse(%q) = %v, want a *storeurl.Error wrapping ErrInvalid saying %q", tt.raw, err, tt.says)
		}
		if err != nil && strings.HasSuffix(err.Error(), backends.ErrInvalid.Error()) {
			t.Errorf("Parse(%q) = %v: ends with %q, which says nothing", tt.raw, err, backends.ErrInvalid.Error())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := storeurl.Open(ctx, tt.raw)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", tt.raw)
		}
	}
}

// TestZeroLocation checks that a Location not made by Parse does not open.
func TestZeroLocation(t *testing.T) {
	l := &storeurl.Location{Scheme: "mem"}
	if s, err := l.Open(context.Background()); !errors.Is(err, backends.ErrInvalid) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of a zero Location = %v, want ErrInvalid", err)
	}
	if got := l.String(); got != "mem://" {
		t.Errorf("String() = %q", got)
	}
}

// TestPasswordNeverShown checks that whatever is wrong with a URL carrying a
// password, and wherever the password sits, the error does not print it.
func TestPasswordNeverShown(t *testing.T) {
	const pw = "s3cr3t"
	urls := []string{
		"etcd://user:" + pw + "@h1:2379,h2/p?x=1", // unknown parameter, after a multi-host authority url.Parse refuses
		"etcd://user:" + pw + "@h1:x/p",           // bad port
		"etcd://user:" + pw + "@h1:1",             // no prefix
		"etcd://user:" + pw + "@/p",               // no host
		"etcd://user:" + pw + "%zz@h/p",           // bad escape in the password itself
		"etcd://user:" + pw + "/x@h/p",            // unescaped slash in the password
		"etcd://user:" + pw + "?x@h/p",            // unescaped ? in the password
		"etcd://user:" + pw + "#x@h/p",            // unescaped # in the password
		"etcd:user:" + pw + "@h/p",                // opaque
		"ftp://user:" + pw + "@h/p",               // unknown scheme
		"file://user:" + pw + "@/dir",             // credentials where none belong
		"kube://user:" + pw + "@ns",
		"etcd://user:" + pw + "@h:1/p q",       // a space
		"etcd://user:" + pw + "@127.0.0.1:1/p", // valid, but nothing listens: the open fails
		"etcd://user:" + pw + "@h:1/p?lease=bogus",
		"etcd://user:" + pw + "@h:1/p?lease=shared&lease=shared",
		"etcd://user:" + pw + "@127.0.0.1:1/p?lease=shared", // valid mode, nothing listens
	}
	for _, raw := range urls {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s, err := storeurl.Open(ctx, raw)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
}

func TestOpenMem(t *testing.T) {
	s, err := storeurl.Open(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, s)
}

// TestOpenFile checks that a file:// URL opens the store in the directory it
// names, which must exist: a directory that does not is refused, by name, and
// not made, unless the URL asks for it with create=true.
func TestOpenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "claims dir", "sub")
	raw := (&url.URL{Scheme: "file", Path: dir}).String()
	if s, err := storeurl.Open(context.Background(), raw); err == nil {
		s.Close()
		t.Errorf("Open(%q) of a directory that does not exist succeeded", raw)
	} else if !strings.Contains(err.Error(), dir) || !errors.Is(err, backends.ErrMissingResource) {
		t.Errorf("Open(%q) = %v, want an error naming %s and wrapping ErrMissingResource", raw, err, dir)
	}
	if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after a refused Open(%q), stat %s: %v; want it not to exist", raw, filepath.Dir(dir), err)
	}

	s, err := storeurl.Open(context.Background(), raw+"?create=true")
	if err != nil {
		t.Fatalf("Open(%q): %v", raw+"?create=true", err)
	}
	roundTrip(t, s)
	// The store lives in the directory the URL names: a second store
	// opened on it, without create, sees the entry.
	s2, err := storeurl.Open(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Get(context.Background(), "k"); err != nil {
		t.Errorf("second store: Get: %v", err)
	}

	// A program may ask for creation itself (a flag of its own), but only
	// of a scheme that can create.
	other := filepath.Join(t.TempDir(), "by-field")
	loc, err := storeurl.Parse((&url.URL{Scheme: "file", Path: other}).String())
	if err != nil {
		t.Fatal(err)
	}
	loc.Create = true
	if s, err := loc.Open(context.Background()); err != nil {
		t.Errorf("Open with Location.Create of %s: %v", other, err)
	} else {
		s.Close()
	}
	loc, err = storeurl.Parse("etcd://127.0.0.1:1/p")
	if err != nil {
		t.Fatal(err)
	}
	loc.Create = true
	if s, err := loc.Open(context.Background()); !errors.Is(err, backends.ErrInvalid) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of etcd with Location.Create = %v, want ErrInvalid", err)
	}
}

// TestOpenEtcdUnreachable checks that opening an etcd store nobody serves
// ends by the caller's deadline, with an error naming the endpoint and the
// refusal, not only "context deadline exceeded".
func TestOpenEtcdUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	raw := "etcd://" + addr + "/p"

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := storeurl.Open(ctx, raw)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	var got error
	select {
	case got = <-done:
	case <-time.After(time.Minute): // far past the 1 s deadline: a hang
		t.Fatalf("Open(%q) with a 1 s deadline has not returned after a minute", raw)
	}
	if got == nil {
		t.Fatalf("Open(%q) succeeded", raw)
	}
	for _, want := range []string{addr, "connection refused"} {
		if !strings.Contains(got.Error(), want) {
			t.Errorf("Open(%q) = %v; want it to say %q", raw, got, want)
		}
	}
	if !errors.Is(got, context.DeadlineExceeded) || backends.Classify(got) != backends.ClassTransient {
		t.Errorf("Open(%q) = %v; want a transient error wrapping context.DeadlineExceeded", raw, got)
	}
	if errors.Is(got, backends.ErrInvalid) {
		t.Errorf("Open(%q) = %v: an unreachable store is not a bad URL", raw, got)
	}
}

func TestOpenEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	host := strings.TrimPrefix(srv.Endpoints()[0], "http://")
	raw := "etcd://" + host + ",127.0.0.1:1/storeurl-test"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	roundTrip(t, s) // Close closes the client Open made: goleak checks it
	// The prefix is honoured: the entry is stored under it.
	resp, err := srv.Client(t).Get(ctx, "storeurl-test/k")
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("etcd key storeurl-test/k: %v, %v", resp, err)
	}
}

// kubeServer starts a kube-apiserver (the test skips when none is
// configured) and returns it with a kube:// URL for its default namespace.
func kubeServer(t *testing.T) (*kubetest.Server, string) {
	t.Helper()
	srv := kubetest.Start(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	return srv, "kube://default?kubeconfig=" + url.QueryEscape(kc)
}

func TestOpenKube(t *testing.T) {
	_, base := kubeServer(t)
	s, err := storeurl.Open(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, s)

	missing := "kube://default?kubeconfig=" + url.QueryEscape(filepath.Join(t.TempDir(), "none"))
	if s, err := storeurl.Open(context.Background(), missing); err == nil {
		s.Close()
		t.Errorf("Open(%q) succeeded", missing)
	}
}

// TestOpenKubeHasNoClientRateLimit checks that a kube store from a URL sends
// its requests as fast as the API server answers them. With client-go's
// default limiter (5 a second, bursts of 10) the 61st request of a burst
// would have to wait past the 10 s deadline, and the limiter refuses it at
// once.
func TestOpenKubeHasNoClientRateLimit(t *testing.T) {
	_, base := kubeServer(t)
	s, err := storeurl.Open(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 61 {
		if _, err := s.Get(ctx, "absent"); !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("request %d: %v, want not found", i+1, err)
		}
	}
}

// TestOpenEtcdLeaseModes opens etcd stores with lease=per-claim and
// lease=shared and checks, on the server, what only the shared lease does:
// two entries written with one TTL are on the same etcd lease.
func TestOpenEtcdLeaseModes(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	host := strings.TrimPrefix(srv.Endpoints()[0], "http://")
	for _, tc := range []struct {
		query string
		same  bool
	}{
		{"", false},
		{"?lease=per-claim", false},
		{"?lease=shared", true},
	} {
		prefix := "modes" + strconv.Itoa(len(tc.query))
		raw := "etcd://" + host + "/" + prefix + tc.query
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := storeurl.Open(ctx, raw)
		if err != nil {
			cancel()
			t.Fatalf("Open(%q): %v", raw, err)
		}
		var leases []int64
		for _, k := range []string{"a", "b"} {
			if _, err := s.CreateIfAbsent(ctx, k, []byte("v"), time.Minute); err != nil {
				t.Fatalf("%s: CreateIfAbsent(%q): %v", raw, k, err)
			}
			resp, err := cli.Get(ctx, prefix+"/"+k)
			if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
				t.Fatalf("%s: etcd key %s/%s: %v, %v; want one key on a lease", raw, prefix, k, resp, err)
			}
			leases = append(leases, resp.Kvs[0].Lease)
		}
		if same := leases[0] == leases[1]; same != tc.same {
			t.Errorf("%s: leases of two entries %x and %x: same = %v, want %v", raw, leases[0], leases[1], same, tc.same)
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: Close: %v", raw, err)
		}
		cancel()
	}
}

// TestOpenKubeSession opens a kube store with session=DURATION and one
// without, and checks on the API server what only session mode does: the
// store makes a session Lease, and its claim names that session.
func TestOpenKubeSession(t *testing.T) {
	srv, base := kubeServer(t)
	client, err := kubernetes.NewForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sessions := func() []string {
		t.Helper()
		l, err := client.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{LabelSelector: kube.LabelSession + "=self"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range l.Items {
			names = append(names, o.Name)
		}
		return names
	}
	claimSession := func(key string) string {
		t.Helper()
		l, err := client.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			if o.Annotations[kube.AnnotationKey] == key {
				return o.Labels[kube.LabelSession]
			}
		}
		t.Fatalf("no Lease for key %q", key)
		return ""
	}

	s, err := storeurl.Open(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIfAbsent(ctx, "per-claim", []byte("per-claim"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := sessions(); len(got) != 0 {
		t.Errorf("without session=: session Leases %v, want none", got)
	}
	if got := claimSession("per-claim"); got != "" {
		t.Errorf("without session=: the claim names session %q", got)
	}
	s.Close()

	s, err = storeurl.Open(ctx, base+"&session=200ms")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateIfAbsent(ctx, "in-session", []byte("in-session"), time.Minute); err != nil {
		t.Fatal(err)
	}
	got := sessions()
	if len(got) != 1 {
		t.Fatalf("with session=200ms: session Leases %v, want one", got)
	}
	if name := claimSession("in-session"); name != got[0] {
		t.Errorf("with session=200ms: the claim names session %q, want %q", name, got[0])
	}
}

// roundTrip writes and reads an entry through s, then closes it.
func roundTrip(t *testing.T, s backends.Store) {
	t.Helper()
	ctx := context.Background()
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Minute)
	if err != nil {
		t.Fatalf("CreateIfAbsent: %v", err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || string(got.Value) != "v" || got.CreateRevision != e.CreateRevision {
		t.Errorf("Get = %+v, %v; want value v, create revision %d", got, err, e.CreateRevision)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestImportBoundary checks that only the backends import the etcd,
// Kubernetes and PostgreSQL clients (and only the metrics package
// client_golang). A program built on elector, filestore and the health
// handler that opens its store by URL pulls in none of them: storeurl imports
// no backend.
func TestImportBoundary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	pkgs := []string{
		"github.com/tenure-go/tenure/elector",
		"github.com/tenure-go/tenure/storeurl",
		"github.com/tenure-go/tenure/backends/filestore",
		"github.com/tenure-go/tenure/backends/memstore",
		"github.com/tenure-go/tenure/health",
	}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"go.etcd.io/", "k8s.io/", "google.golang.org/grpc", "github.com/prometheus/", "github.com/tenure-go/tenure/backends/etcd", "github.com/tenure-go/tenure/backends/kube", "github.com/nats-io/", "github.com/tenure-go/tenure/backends/nats", "github.com/jackc/", "github.com/tenure-go/tenure/backends/postgres", "github.com/aws/", "github.com/tenure-go/tenure/backends/dynamodb"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("%v depend on %s", pkgs, d)
			}
		}
	}
}

// TestRegister checks that a scheme a package registers opens through Parse
// and Open with its parameters checked; one registered twice, or
// incompletely, is refused rather than opened by either registration.
func TestRegister(t *testing.T) {
	var got *url.URL
	storeurl.Register(storeurl.Scheme{
		Name:   "Regtest",
		Form:   "regtest://HOST/NAME",
		Params: []string{"mode"},
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			if u.Path == "/bad" {
				return nil, errors.New("bad name")
			}
			got = u
			return func(context.Context, storeurl.Request) (backends.Store, error) {
				return nil, errors.New("no store here")
			}, nil
		},
	})
	loc, err := storeurl.Parse("REGTEST://h1,h2:1/n?mode=a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Host != "h1,h2:1" || got.Path != "/n" || got.Query().Get("mode") != "a" {
		t.Errorf("the scheme's Parse got %+v", got)
	}
	if hosts, err := storeurl.Hosts(got, "7"); err != nil || strings.Join(hosts, " ") != "h1:7 h2:1" {
		t.Errorf("Hosts(%q) = %v, %v", got.Host, hosts, err)
	}
	if _, err := loc.Open(context.Background()); err == nil || !strings.Contains(err.Error(), `storeurl: open "regtest://h1,h2:1/n?mode=a": no store here`) {
		t.Errorf("Open = %v", err)
	}
	if !strings.Contains(storeurl.Forms(), "regtest://HOST/NAME") {
		t.Errorf("Forms() = %q, want it to list regtest", storeurl.Forms())
	}
	for raw, says := range map[string]string{
		"regtest://h/bad":        `storeurl: "regtest://h/bad": bad name`,
		"regtest://h/n?other=1":  `unknown parameter "other" (regtest:// takes only mode)`,
		"regtest://u:p@h/n":      "regtest:// takes no user or password",
		"regtest://h/n?create=1": `unknown parameter "create"`,
	} {
		if _, err := storeurl.Parse(raw); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v, want it to say %q", raw, err, says)
		}
	}

	ok := func(*url.URL) (storeurl.Opener, error) { return nil, nil }
	storeurl.Register(storeurl.Scheme{Name: "regdup", Form: "regdup://", Parse: ok})
	storeurl.Register(storeurl.Scheme{Name: "regdup", Form: "regdup://", Parse: ok})
	storeurl.Register(storeurl.Scheme{Name: "regnoparse", Form: "regnoparse://"})
	for raw, says := range map[string]string{
		"regdup://":     "scheme regdup registered twice",
		"regnoparse://": "registered without",
	} {
		if _, err := storeurl.Parse(raw); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v, want it to say %q", raw, err, says)
		}
	}
}

// TestReadOnly checks that Location.ReadOnly reaches the scheme's Opener, and
// a Location that asks both to create the store and to only read it is
// refused before the Opener runs.
func TestReadOnly(t *testing.T) {
	var got []storeurl.Request
	storeurl.Register(storeurl.Scheme{
		Name:   "rotest",
		Form:   "rotest://NAME",
		Create: true,
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			return func(_ context.Context, req storeurl.Request) (backends.Store, error) {
				got = append(got, req)
				return nil, errors.New("no store here")
			}, nil
		},
	})
	loc, err := storeurl.Parse("rotest://n")
	if err != nil {
		t.Fatal(err)
	}
	loc.ReadOnly = true
	loc.Open(context.Background())
	loc.Create = true
	_, err = loc.Open(context.Background())
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Open with Create and ReadOnly = %v, want a usage error about read-only", err)
	}
	if want := []storeurl.Request{{ReadOnly: true}}; !slices.Equal(got, want) {
		t.Errorf("the Opener got %+v, want %+v", got, want)
	}
}

// TestWithPassword checks that a password given apart from the URL reaches
// the scheme's Parse with the URL's user, is never shown, and is refused for
// a URL without a user, with a password of its own, or of a scheme that takes
// no credentials.
func TestWithPassword(t *testing.T) {
	var got *url.URL
	storeurl.Register(storeurl.Scheme{
		Name:        "pwtest",
		Form:        "pwtest://USER@HOST/NAME",
		Credentials: true,
		Parse: func(u *url.URL) (storeurl.Opener, error) {
			got = u
			return func(context.Context, storeurl.Request) (backends.Store, error) {
				return nil, errors.New("no store here")
			}, nil
		},
	})
	loc, err := storeurl.Parse("pwtest://alice@h/n")
	if err != nil {
		t.Fatal(err)
	}
	if user, has := loc.User(); user != "alice" || has {
		t.Errorf("User() = %q, %v; want alice, false", user, has)
	}
	withPW, err := loc.WithPassword("s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if pw, _ := got.User.Password(); got.User.Username() != "alice" || pw != "s3cret" {
		t.Errorf("the scheme's Parse got user %v", got.User)
	}
	if s := withPW.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "alice:xxxxx@") {
		t.Errorf("String() = %q, want the password redacted", s)
	}
	if _, err := withPW.Open(context.Background()); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open = %v, want an error without the password", err)
	}
	if s := loc.String(); s != "pwtest://alice@h/n" {
		t.Errorf("the original Location changed: %q", s)
	}
	for raw, says := range map[string]string{
		"pwtest://h/n":         "needs a user",
		"pwtest://bob:pw@h/n":  "has a password already",
		"file:///var/lib/tenu": "takes no user or password",
	} {
		l, err := storeurl.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.WithPassword("x"); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q).WithPassword = %v, want it to say %q", raw, err, says)
		}
	}
}
