module github.com/tenure-go/tenure

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/benbjohnson/clock v1.3.5
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/fsnotify/fsnotify v1.10.1
	github.com/looplab/fsm v1.0.3
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require github.com/stretchr/testify v1.12.1 // indirect
