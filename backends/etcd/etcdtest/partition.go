package etcdtest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The partitions of a cluster. A member process has no hook to cut it off
// its peers, so the peer bridges do it: every peer connection to member j
// goes through j's peer bridge, which finds the member that dialed it by
// the process that owns the dialing socket (/proc), and refuses, or
// closes, the connections between a partitioned member and the others.

// partition cuts member i off from the others (on) or heals it.
func (c *Cluster) partition(i int, on bool) {
	c.mu.Lock()
	if c.cut == nil {
		c.cut = make(map[int]bool)
	}
	c.cut[i] = on
	c.mu.Unlock()
	if !on {
		return
	}
	for j, m := range c.members {
		if j == i {
			m.peerBridge.dropFrom(-1) // every peer connection to i
		} else {
			m.peerBridge.dropFrom(i)
		}
	}
}

// admitPeer is the admit of member j's peer bridge.
// A connection whose dialer cannot be found is refused while any member
// is partitioned: a partition must not leak.
func (c *Cluster) admitPeer(j int) func(in net.Conn) (int, bool) {
	return func(in net.Conn) (int, bool) {
		src := c.dialer(in)
		c.mu.Lock()
		defer c.mu.Unlock()
		if src < 0 {
			for _, cut := range c.cut {
				if cut {
					return src, false
				}
			}
			return src, true
		}
		return src, !c.cut[j] && !c.cut[src]
	}
}

// dialer returns the index of the member whose process owns the other end
// of in, or -1.
func (c *Cluster) dialer(in net.Conn) int {
	remote, ok := in.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return -1
	}
	local, ok := in.LocalAddr().(*net.TCPAddr)
	if !ok {
		return -1
	}
	inode := socketInode(remote, local)
	if inode == "" {
		return -1
	}
	want := "socket:[" + inode + "]"
	for i, m := range c.members {
		pid := m.pid()
		if pid == 0 {
			continue
		}
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
				return i
			}
		}
	}
	return -1
}

// socketInode returns the inode of the TCP socket whose local address is
// local and whose peer is remote, from /proc/net/tcp (and tcp6), or "".
// Both ends are matched: Linux gives connections to different peers the
// same local port, so a port alone may name another process's socket.
func socketInode(local, remote *net.TCPAddr) string {
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !procAddrIs(f[1], local) || !procAddrIs(f[2], remote) {
				continue
			}
			if _, err := strconv.ParseUint(f[9], 10, 64); err == nil && f[9] != "0" {
				return f[9]
			}
		}
	}
	return ""
}

// procAddrIs reports whether field, an address as /proc/net/tcp writes it
// (the IP in hexadecimal, in the kernel's byte order, a colon, the port),
// is a. An IPv4 address in tcp6 is written mapped into IPv6.
func procAddrIs(field string, a *net.TCPAddr) bool {
	ipHex, portHex, ok := strings.Cut(field, ":")
	if !ok {
		return false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil || int(port) != a.Port {
		return false
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || len(raw)%4 != 0 {
		return false
	}
	// The kernel prints each 32-bit word of the address as the number
	// its bytes make in the machine's own order.
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		binary.NativeEndian.PutUint32(ip[w:], binary.BigEndian.Uint32(raw[w:]))
	}
	return ip.Equal(a.IP)
}
