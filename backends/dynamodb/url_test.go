package dynamodb

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
	"github.com/tenure-go/tenure/storeurl"
)

// TestParseURL checks what a DynamoDB URL asks for, as the registered
// scheme reads it.
func TestParseURL(t *testing.T) {
	tests := []struct {
		url  string
		want urlConfig
	}{
		{"dynamodb://claims", urlConfig{table: "claims"}},
		{"dynamodb://My_Table-1.x?region=eu-west-1", urlConfig{table: "My_Table-1.x", region: "eu-west-1"}},
		{"DYNAMODB://claims/?region=us-east-1&endpoint=http://127.0.0.1:8000", urlConfig{table: "claims", region: "us-east-1", endpoint: "http://127.0.0.1:8000"}},
		{"dynamodb://claims?endpoint=https%3A%2F%2Fdynamo.internal%2F", urlConfig{table: "claims", endpoint: "https://dynamo.internal"}},
		{"dynamodb://claims?endpoint=http://[::1]:4567&create=true", urlConfig{table: "claims", endpoint: "http://[::1]:4567"}},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = strings.SplitN(strings.SplitN(tt.url[len("dynamodb://"):], "?", 2)[0], "/", 2)[0]
		u.RawQuery = strings.ReplaceAll(u.RawQuery, "&create=true", "")
		got, err := parseURL(u)
		if err != nil || got != tt.want {
			t.Errorf("parseURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
		if _, err := storeurl.Parse(tt.url); err != nil {
			t.Errorf("storeurl.Parse(%q): %v", tt.url, err)
		}
	}
}

// TestParseURLRefused checks that hostile or mistaken URLs are refused at
// parse, before anything is asked of a server, and never echo a secret.
func TestParseURLRefused(t *testing.T) {
	for _, raw := range []string{
		"dynamodb://",
		"dynamodb:///claims",
		"dynamodb://ab",
		"dynamodb://" + strings.Repeat("t", 256),
		"dynamodb://a*b",
		"dynamodb://a%20b",
		"dynamodb://a%00b",
		"dynamodb://claims,other",
		"dynamodb://claims:8000",
		"dynamodb://claims/sub",
		"dynamodb://key:hunter2@claims",
		"dynamodb://claims#frag",
		"dynamodb://claims?table=x",
		"dynamodb://claims?region=",
		"dynamodb://claims?region=EU-WEST-1",
		"dynamodb://claims?region=eu_west_1",
		"dynamodb://claims?region=1eu",
		"dynamodb://claims?region=a&region=b",
		"dynamodb://claims?endpoint=",
		"dynamodb://claims?endpoint=127.0.0.1:8000",
		"dynamodb://claims?endpoint=file:///etc/passwd",
		"dynamodb://claims?endpoint=ftp://host",
		"dynamodb://claims?endpoint=http://",
		"dynamodb://claims?endpoint=http://key:hunter2@host",
		"dynamodb://claims?endpoint=http://host/path",
		"dynamodb://claims?endpoint=http://host?x=1",
		"dynamodb://claims?endpoint=http://host%23frag",
		"dynamodb://claims?endpoint=http://host:0",
		"dynamodb://claims?endpoint=http://host:65536",
		"dynamodb://claims?endpoint=http://host:x",
		"dynamodb://claims?endpoint=http://host:",
		"dynamodb://claims?endpoint=http://ho%0Ast",
		"dynamodb://claims?create=maybe",
	} {
		_, err := storeurl.Parse(raw)
		if err == nil {
			t.Errorf("storeurl.Parse(%q) succeeded, want refused", raw)
			continue
		}
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("storeurl.Parse(%q) = %v, want an error wrapping ErrInvalid", raw, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("storeurl.Parse(%q) = %v shows the secret", raw, err)
		}
	}
}

// urlEnv gives the SDK's default chain static credentials and nothing
// else to find (no shared files, no instance metadata).
func urlEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "tenure")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "hunter2-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// TestOpenURL checks that a URL opens a store on a real server: a missing
// table without create=true is a missing resource naming create=true,
// create=true makes it and the store works, a table of another key schema
// is refused, no region anywhere is refused, and an unreachable server
// fails the open naming it; no error shows the secret key.
func TestOpenURL(t *testing.T) {
	urlEnv(t)
	srv := dynamotest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := "dynamodb://urltable?region=us-east-1&endpoint=" + srv.Endpoint()
	noSecret := func(what string, err error) {
		t.Helper()
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s = %v shows the secret key", what, err)
		}
	}

	s, err := storeurl.Open(ctx, base)
	noSecret("Open of a missing table", err)
	if !errors.Is(err, backends.ErrMissingResource) || !strings.Contains(err.Error(), "create=true") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(%q) of a missing table = %v, want ErrMissingResource naming create=true", base, err)
	}
	s, err = storeurl.Open(ctx, base+"&create=true")
	if err != nil {
		t.Fatalf("Open(create=true): %v", err)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
	if err != nil || e.CreateRevision != 1 {
		t.Fatalf("CreateIfAbsent over the URL's store = %+v, %v", e, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = storeurl.Open(ctx, base) // the table exists now
	if err != nil {
		t.Fatalf("Open of the created table: %v", err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || string(got.Value) != "v" {
		t.Errorf("Get over a second open = %+v, %v; want the value written", got, err)
	}
	s.Close()

	// A table with another key schema.
	c := dynamotest.ClientAt(t, srv.Endpoint())
	if _, err := c.CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:            aws.String("othertable"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	other := "dynamodb://othertable?region=us-east-1&endpoint=" + srv.Endpoint()
	if s, err := storeurl.Open(ctx, other); !errors.Is(err, ErrSchema) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(%q) of a table with another key = %v, want ErrSchema", other, err)
	}

	if s, err := storeurl.Open(ctx, "dynamodb://urltable?endpoint="+srv.Endpoint()); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "region") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open without a region anywhere = %v, want ErrInvalid naming the region", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close() // a port nothing listens on
	s, err = storeurl.Open(ctx, "dynamodb://urltable?region=us-east-1&endpoint="+dead)
	noSecret("Open of an unreachable server", err)
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), dead) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open of an unreachable server = %v, want ErrUnavailable naming %s", err, dead)
	}
}
