package filestore

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/benbjohnson/clock"
	"golang.org/x/sys/unix"
)

// judge decides expiry: an entry written with a TTL expires when the boot it
// was written in has ended, or when the monotonic clock of that boot reaches
// its expiry. Neither input is the wall clock, so setting the time of day
// changes nothing.
type judge struct {
	bootID string
	now    func() int64 // nanoseconds; never goes back within one boot
}

const bootIDPath = "/proc/sys/kernel/random/boot_id"

// hostJudge reads the host's boot id and uses CLOCK_MONOTONIC: the clock of
// Go's monotonic readings, so of every holder's local deadline on the host.
// It stops while the host is suspended, for the judge and the holders alike:
// a suspend moves no expiry closer to any holder's deadline. (CLOCK_BOOTTIME
// would run on through a suspend while the holders' clocks stand still,
// letting a new holder in while the old one still leads.) CLOCK_MONOTONIC
// starts again at each boot, which the boot id tells apart.
func hostJudge() (judge, error) {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return judge{}, fmt.Errorf("filestore: read boot id: %w", err)
	}
	id := string(bytes.TrimSpace(b))
	if !validBootID(id) {
		return judge{}, fmt.Errorf("filestore: boot id %q from %s is unusable", id, bootIDPath)
	}
	if _, err := monoTime(); err != nil {
		return judge{}, err
	}
	return judge{bootID: id, now: func() int64 {
		t, _ := monoTime() // checked once above; CLOCK_MONOTONIC does not start failing
		return t
	}}, nil
}

func monoTime() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("filestore: clock_gettime(CLOCK_MONOTONIC): %w", err)
	}
	return ts.Nano(), nil
}

// clockJudge makes c stand in for CLOCK_MONOTONIC and bootID for the host's
// boot id. Time is read as c.Now().UnixNano().
func clockJudge(bootID string, c clock.Clock) judge {
	return judge{bootID: bootID, now: func() int64 { return c.Now().UnixNano() }}
}

// live reports whether r is a live entry now, and its remaining time.
func (j judge) live(r record, now int64) (bool, time.Duration) {
	if r.Deleted {
		return false, 0
	}
	if r.TTL == 0 {
		return true, 0
	}
	if r.BootID != j.bootID || now >= r.Expiry {
		return false, 0
	}
	return true, time.Duration(r.Expiry - now)
}
