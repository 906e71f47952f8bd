module github.com/tenure-go/tenure/backends/nats

go 1.26.0

require (
	github.com/benbjohnson/clock v1.3.5
	github.com/nats-io/nats.go v1.55.0
	github.com/tenure-go/tenure v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/looplab/fsm v1.0.3 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/tenure-go/tenure => ../..
