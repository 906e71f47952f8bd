package filestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// keyLock is a held operation lock: a write lock on one byte of the lock
// file, taken through its own open file description. Locks on open file
// descriptions (F_OFD_SETLK) belong to the description, not the process, so
//
//   - two goroutines of one process, each with its own descriptor, exclude
//     each other like two processes do;
//   - the kernel drops the lock when the description's last descriptor is
//     closed, which includes the holder's death: a lock is never left stuck.
type keyLock struct {
	fd int
}

const (
	lockPollMin = 20 * time.Microsecond
	lockPollMax = 2 * time.Millisecond
)

// lock takes the operation lock at off, waiting while another description
// holds it. The wait polls (F_OFD_SETLKW would not return on ctx being done)
// with a short backoff on the real clock: holders keep the lock only to
// read a key's file and rename another over it.
func (s *Store) lock(ctx context.Context, off int64) (*keyLock, error) {
	fd, err := unix.Open(s.lockPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", s.lockPath, err)
	}
	wait := lockPollMin
	for {
		ok, err := tryLock(fd, unix.F_WRLCK, off)
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("lock %s at %d: %w", s.lockPath, off, err)
		}
		if ok {
			return &keyLock{fd: fd}, nil
		}
		t := s.wall.Timer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			unix.Close(fd)
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, lockPollMax)
	}
}

// tryLockAt takes the lock at off if it is free, without waiting. It returns
// nil and no error when another description holds it.
func (s *Store) tryLockAt(off int64) (*keyLock, error) {
	fd, err := unix.Open(s.lockPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	ok, err := tryLock(fd, unix.F_WRLCK, off)
	if err != nil || !ok {
		unix.Close(fd)
		return nil, err
	}
	return &keyLock{fd: fd}, nil
}

// tryLock takes an OFD lock of type typ (F_WRLCK or F_RDLCK) on the byte at
// off of the file open at fd, if no other description holds a conflicting
// one. It reports whether it took it.
func tryLock(fd int, typ int16, off int64) (bool, error) {
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: off, Len: 1}
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EACCES):
			return false, nil
		}
		return false, err
	}
}

// unlock releases the lock by closing its description. A second call does
// nothing (it must not close a descriptor number reused since).
func (l *keyLock) unlock() {
	if l.fd >= 0 {
		unix.Close(l.fd)
		l.fd = -1
	}
}
