package etcdtest

import (
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
	addr, ok := in.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return -1
	}
	inode := socketInode(addr.Port)
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

// socketInode returns the inode of the loopback TCP socket whose local
// port is port, from /proc/net/tcp (and tcp6), or "".
func socketInode(port int) string {
	hexPort := fmt.Sprintf(":%04X", port)
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !strings.HasSuffix(f[1], hexPort) {
				continue
			}
			if _, err := strconv.ParseUint(f[9], 10, 64); err == nil && f[9] != "0" {
				return f[9]
			}
		}
	}
	return ""
}
