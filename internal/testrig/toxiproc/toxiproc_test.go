package toxiproc_test

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echo serves a line-echo upstream for the test.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line on c and reads it back within d.
func roundTrip(c net.Conn, r *bufio.Reader, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo answered " + line)
	}
	return nil
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestFaults goes through every fault the tests and the campaign use on
// a proxy of a real toxiproxy server: a blackhole that keeps the
// connection open, its removal, latency, and a cut that closes the
// connection and refuses new ones until the proxy is enabled again on
// the same address.
func TestFaults(t *testing.T) {
	srv := toxiproc.StartTest(t)
	px := srv.Proxy(t, "echo", echo(t))
	c, r := dial(t, px.Listen)
	if err := roundTrip(c, r, 10*time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}

	if err := px.Blackhole("cut"); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if err := roundTrip(c, r, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("through a blackhole: got %v, want a timeout with the connection open", err)
	}
	if err := px.RemoveBoth("cut"); err != nil {
		t.Fatal(err)
	}
	// The blackholed connection lost what it sent; a new one passes.
	c2, r2 := dial(t, px.Listen)
	if err := roundTrip(c2, r2, 10*time.Second); err != nil {
		t.Fatalf("after the blackhole's removal: %v", err)
	}

	if err := px.AddBoth("lat", "latency", map[string]int{"latency": 200}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := roundTrip(c2, r2, 30*time.Second); err != nil {
		t.Fatalf("with latency: %v", err)
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("round trip with 200 ms each way took %v, want at least 400 ms", took)
	}
	if err := px.RemoveBoth("lat"); err != nil {
		t.Fatal(err)
	}

	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c2, r2, 10*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("on a disabled proxy's open connection: got %v, want it closed", err)
	}
	if c3, err := net.DialTimeout("tcp", px.Listen, 10*time.Second); err == nil {
		c3.Close()
		t.Fatal("a disabled proxy accepted a connection")
	}
	if err := px.Enable(); err != nil {
		t.Fatal(err)
	}
	c4, r4 := dial(t, px.Listen)
	if err := roundTrip(c4, r4, 10*time.Second); err != nil {
		t.Fatalf("after Enable, on the same address: %v", err)
	}
}

// TestErrors checks that the API's refusals come back as errors.
func TestErrors(t *testing.T) {
	srv := toxiproc.StartTest(t)
	px := srv.Proxy(t, "dup", echo(t))
	if _, err := srv.CreateProxy("dup", px.Upstream); err == nil {
		t.Fatal("a second proxy of the same name was created")
	}
	if err := px.RemoveToxic("none"); err == nil {
		t.Fatal("removing a toxic that does not exist succeeded")
	}
}
