// Command handleronly is the smallest program a library user writes: a
// Handler behind sqsonce.FromEnv, started by lambda.Start. The layout test
// lists what it links.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sqs-once/sqs-once/sqsonce"
)

func main() {
	p, err := sqsonce.FromEnv(context.Background(), func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(p.Handle)
}
