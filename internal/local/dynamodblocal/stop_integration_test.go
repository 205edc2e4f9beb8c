//go:build integration

package dynamodblocal

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestServersOfTheirOwn checks what a server of a test's own does, on two
// such servers that its subtests share (a JVM takes seconds of CPU to
// start; these checks once had a server or two each):
//
//   - AreApart: each Start is a server of its own, on its own port, bound
//     to 127.0.0.1 alone: the machine's other addresses refuse its port.
//   - WritesNoFile: a server that ran a table's calls left nothing in its
//     working directory but the launcher: no dynamodb-local-metadata.json,
//     which DynamoDB Local writes when its telemetry is set up (and it then
//     makes a client of Amazon Pinpoint to send it).
//   - EndsWhenItsInputCloses: the launcher exits when its standard input
//     closes, as the system closes it when the test binary exits, however
//     it exits: the shared server, which no cleanup stops, never outlives
//     the binary, on any system (Linux's parent-death signal is proc's, and
//     Linux only). Last: it ends one of the two.
func TestServersOfTheirOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	a, err := launchIn(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b := Start(t)

	t.Run("AreApart", func(t *testing.T) {
		if a.URL == b.URL {
			t.Fatalf("two servers on %s", a.URL)
		}
		table := NewIdempotencyTable(t, a.Config())
		_, err := b.Client().DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if !errors.As(err, new(*types.ResourceNotFoundException)) {
			t.Errorf("a table of one server on the other: %v, want ResourceNotFoundException", err)
		}

		u, err := url.Parse(a.URL)
		if err != nil {
			t.Fatal(err)
		}
		if u.Hostname() != "127.0.0.1" {
			t.Fatalf("URL %s is not on 127.0.0.1", a.URL)
		}
		addrs, err := net.InterfaceAddrs()
		if err != nil {
			t.Fatal(err)
		}
		// ::1 too: a server bound to every address of a dual-stack socket
		// answers there.
		others := []string{"::1"}
		for _, addr := range addrs {
			if ip, ok := addr.(*net.IPNet); ok && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() {
				others = append(others, ip.IP.String())
			}
		}
		for _, ip := range others {
			conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, u.Port()), 5*time.Second)
			if err == nil {
				conn.Close()
				t.Errorf("the server answers on %s, not only on 127.0.0.1", net.JoinHostPort(ip, u.Port()))
			}
		}
		t.Logf("port %s refused on %v", u.Port(), others)
	})

	t.Run("WritesNoFile", func(t *testing.T) {
		table := NewIdempotencyTable(t, a.Config())
		if _, err := a.Client().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != "Loopback.java" {
				t.Errorf("the server wrote %s into its working directory", e.Name())
			}
		}
	})

	t.Run("EndsWhenItsInputCloses", func(t *testing.T) {
		if err := b.stdin.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-b.Exited():
		case <-time.After(30 * time.Second):
			t.Fatal("the server still runs 30 s after its input closed")
		}
	})
}
