package pgproc

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStartBesideRemoveTemplate: a campaign removes the template when it
// ends while another, beside it, may be starting a server from it. A
// start must still get a whole copy (before, the copy failed or started
// from a directory being removed).
func TestStartBesideRemoveTemplate(t *testing.T) {
	defer RemoveTemplate()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				RemoveTemplate()
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for range 2 {
		s, err := Start()
		if err != nil {
			t.Fatalf("Start beside RemoveTemplate: %v", err)
		}
		s.Remove()
	}
}
