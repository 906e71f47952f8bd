package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSocketInodeTellsSharedPortsApart dials two listeners from one local
// port, as Linux lets connections to different peers share a port, and
// checks that each accepted connection is traced to its own dialing
// socket. Matching the local port alone named the same socket for both.
func TestSocketInodeTellsSharedPortsApart(t *testing.T) {
	var lns []net.Listener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns = append(lns, ln)
	}
	reuse := func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}
	// The first dial binds a port of its own choosing explicitly, so that
	// the second may bind it again (SO_REUSEPORT on both).
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	for i, ln := range lns {
		d := net.Dialer{Control: reuse, LocalAddr: local}
		out, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial listener %d from %v: %v", i, local, err)
		}
		t.Cleanup(func() { out.Close() })
		local = out.LocalAddr().(*net.TCPAddr)
		in, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close() })
		want := inodeOf(t, out.(*net.TCPConn))
		got := socketInode(in.RemoteAddr().(*net.TCPAddr), in.LocalAddr().(*net.TCPAddr))
		if "socket:["+got+"]" != want {
			t.Errorf("connection %d from %v to %v: socketInode = %q, want the dialer's %s", i, in.RemoteAddr(), in.LocalAddr(), got, want)
		}
	}
}

// inodeOf is what /proc/self/fd says of c's socket: socket:[inode].
func inodeOf(t *testing.T, c *net.TCPConn) string {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		link, lerr = os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	}); err != nil {
		t.Fatal(err)
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	return link
}
