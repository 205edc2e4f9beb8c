// Command memonly uses sqsonce with the in-memory store alone (a test
// binary's shape, or a single process that needs no durable lock): it
// names no store SDK. The layout test lists what it links.
package main

import (
	"context"
	"log"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

func main() {
	p, err := sqsonce.New(sqsonce.Config{Store: memstore.New(), KeyPrefix: "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Do(context.Background(), "nightly-report", func(context.Context) error { return nil }); err != nil {
		log.Fatal(err)
	}
}
