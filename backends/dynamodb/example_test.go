package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
	"github.com/tenure-go/tenure/internal/childproc"
)

// A claim kept in a DynamoDB table: two processes' stores on one table, a
// create that loses to the holder, a release, and the next holder's higher
// fencing token. The example runs a dynalite server of its own, as the
// package's tests do (installed with npm on first use); a program gives
// Open a client of its region, with the SDK's default credentials.
func Example() {
	endpoint, stop, err := startDynalite()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := awsdynamodb.New(awsdynamodb.Options{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("example", "example-secret", ""),
		HTTPClient:   &http.Client{Transport: tr},
	})
	// WithCreateTable makes the table (on-demand billing) if it is missing.
	a, err := dynamodb.Open(ctx, client, "claims", dynamodb.WithCreateTable())
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := dynamodb.Open(ctx, client, "claims")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	first, err := a.CreateIfAbsent(ctx, "indexer", []byte("node-a"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-a holds the claim")

	var ce *backends.ConflictError
	if _, err := b.CreateIfAbsent(ctx, "indexer", []byte("node-b"), 10*time.Second); errors.As(err, &ce) {
		fmt.Printf("node-b: %v, held by %s\n", errors.Is(err, backends.ErrExists), ce.Current.Value)
	}

	if err := a.CompareAndDelete(ctx, "indexer", first.Revision); err != nil {
		log.Fatal(err)
	}
	next, err := b.CreateIfAbsent(ctx, "indexer", []byte("node-b"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after node-a released it, node-b's token is higher:", next.CreateRevision > first.CreateRevision)

	// Output:
	// node-a holds the claim
	// node-b: true, held by node-a
	// after node-a released it, node-b's token is higher: true
}

// startDynalite starts dynalite as a process of its own on a free port of
// 127.0.0.1 (dynamotest.Start needs a testing.TB an Example does not
// have). It returns the server's endpoint and a function that stops it and
// removes its files.
func startDynalite() (endpoint string, stop func(), err error) {
	cli, err := dynamotest.CLI()
	if err != nil {
		return "", nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", nil, err
	}
	// A port picked free may be taken by another process before the
	// server binds it: try again on a fresh one.
	for range 3 {
		if endpoint, stop, err = launchDynalite(node, cli); err == nil {
			return endpoint, stop, nil
		}
	}
	return "", nil, err
}

func launchDynalite(node, cli string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "tenure-dynamodb-example-")
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	p, err := childproc.Start(childproc.Spec{Argv: dynamotest.Argv(node, cli, addr, filepath.Join(dir, "data")), Log: filepath.Join(dir, "dynalite.log")})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		p.Terminate(10 * time.Second)
		os.RemoveAll(dir)
	}
	// Generous: the machine may be busy with other tests under -race.
	if err := dynamotest.WaitReady(addr, p, 60*time.Second); err != nil {
		stop()
		return "", nil, err
	}
	return "http://" + addr, stop, nil
}
