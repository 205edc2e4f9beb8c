//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The two stages of exactly-once emits, run as a user runs the program, on
// moto_server. Stage 1 records an order and emits OrderAccepted to a
// queue of its own per case (-emit: committed with the order, sent after
// the commit); stage 2 (-ship) receives that queue's messages and records
// one shipment per message, keyed on its emit id. Under each fault the
// order must end with one shipment:
//
//   - killed after its commit and before its send (the SendMessageBatch
//     held at the proxy, the program killed there): the order is completed
//     with its message pending, and the next run for the order sends it,
//     without running the handler, before it answers "already recorded";
//   - the send's answer lost (the proxy forwards the SendMessageBatch, and
//     resets the connection instead of answering): the SDK sends again, so
//     stage 2 receives two copies with one emit id, and ships once;
//   - paused past its lock (SIGSTOP) while a second run takes the order
//     over: the paused run's commit is refused, and its message, staged,
//     is never sent.
//
// The control, in the same test, sends OrderAccepted inside the handler
// (-emit-inline), as a handler must without Emit: killed after its send
// and before its commit, or paused past its lock, the order is recorded
// once (the transaction sees to that) and shipped twice.

// emitFault is what happens to stage 1's first run for an order.
type emitFault int

const (
	killedBeforeSend emitFault = iota // killed at its send (-emit) or its commit (-emit-inline)
	sendAnswerLost
	pausedPastItsLock
)

// stageTwo is stage 2's run over a case's queue: its summary line.
type stageTwo struct {
	received, shipped, dropped, failed int
}

func TestOneShipmentPerOrder(t *testing.T) {
	t.Parallel()
	tg := dynamoTarget(t)
	if code, out := runToEnd(t, tg, tg.addr, "-setup"); code != exitOK {
		t.Fatalf("-setup: exit %d\n%s", code, out)
	}
	api := sqsClient(tg.addr)
	var queues atomic.Int64
	var summary []string
	for _, c := range []struct {
		name string
		// flag sends the message: -emit, or the control's -emit-inline.
		flag                        string
		fault                       emitFault
		wantMessages, wantShipments int
	}{
		{"emit, killed after its commit and before its send", "-emit", killedBeforeSend, 1, 1},
		{"emit, the send's answer lost", "-emit", sendAnswerLost, 2, 1},
		{"emit, paused past its lock", "-emit", pausedPastItsLock, 1, 1},
		{"control, sent in the handler, killed after its send and before its commit", "-emit-inline", killedBeforeSend, 2, 2},
		{"control, sent in the handler, paused past its lock", "-emit-inline", pausedPastItsLock, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			order := orderID(t)
			queue := createQueue(t, api, fmt.Sprintf("txorders-shipments-%d-%d", time.Now().UnixNano(), queues.Add(1)))
			args := []string{c.flag, queue}
			switch {
			case c.fault == killedBeforeSend && c.flag == "-emit":
				proxy := startDynamoProxy(t, tg.addr, sqsSendBatch, holdRequest)
				args := killAt(t, tg, proxy, order, args...)
				if st := status(t, tg, order); !strings.Contains(st, "txorders: COMPLETED, 1 message(s) pending") {
					t.Fatalf("after the kill: want the order completed with its message pending (the commit applied, the send not)\n%s", st)
				}
				out := retry(t, tg, args)
				if !strings.Contains(out, "already recorded") {
					t.Errorf("the next run: want the order found recorded (its pending message sent, the handler not run again)\n%s", out)
				}
			case c.fault == killedBeforeSend:
				killedAtCommit(t, tg, order, false, false, args...)
			case c.fault == sendAnswerLost:
				proxy := startDynamoProxy(t, tg.addr, sqsSendBatch, resetAnswer)
				code, out := runToEnd(t, tg, proxy.addr, "-order", order, "-amount", "1250", "-lock-timeout", lockTimeout, c.flag, queue)
				if code != exitOK || !strings.Contains(out, "recorded by run") {
					t.Fatalf("exit %d, want %d and the order recorded\n%s", code, exitOK, out)
				}
				select {
				case <-proxy.hit:
				default:
					t.Fatalf("the proxy never reset a send's answer\n%s", out)
				}
			case c.fault == pausedPastItsLock:
				pausedPastLock(t, tg, order, false, args...)
			}
			if st := status(t, tg, order); !strings.Contains(st, "txorders: COMPLETED\n") {
				t.Errorf("stage 1 done: want the order completed with nothing pending\n%s", st)
			}
			s2 := runStageTwo(t, tg, queue)
			orders, shipments := rows(t, tg, order), shipmentRows(t, tg, order)
			line := fmt.Sprintf("%s: %d order row(s), %d message(s) at stage 2, %d shipment(s)", c.name, orders, s2.received, shipments)
			summary = append(summary, line)
			t.Log(line)
			if orders != 1 {
				t.Errorf("%d order rows, want 1", orders)
			}
			if s2.received != c.wantMessages || s2.failed != 0 {
				t.Errorf("stage 2 received %d messages (%d failed), want %d", s2.received, s2.failed, c.wantMessages)
			}
			if shipments != c.wantShipments || s2.shipped != shipments {
				t.Errorf("%d shipment rows (stage 2 says %d shipped), want %d", shipments, s2.shipped, c.wantShipments)
			}
		})
	}
	t.Logf("one order each:\n\t%s", strings.Join(summary, "\n\t"))
}

// runStageTwo runs stage 2 over queue to its end and reads its summary.
func runStageTwo(t *testing.T, tg target, queue string) stageTwo {
	t.Helper()
	code, out := runToEnd(t, tg, tg.addr, "-ship", queue, "-lock-timeout", lockTimeout)
	var s stageTwo
	for _, line := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(line, "received %d messages: %d shipped, %d duplicates dropped, %d failed", &s.received, &s.shipped, &s.dropped, &s.failed); err == nil {
			t.Logf("stage 2:\n%s", out)
			if code != exitOK {
				t.Errorf("stage 2: exit %d, want %d", code, exitOK)
			}
			return s
		}
	}
	t.Fatalf("stage 2: exit %d, no summary\n%s", code, out)
	return s
}

// status is the program's -status of order.
func status(t *testing.T, tg target, order string) string {
	t.Helper()
	code, out := runToEnd(t, tg, tg.addr, "-order", order, "-status")
	if code != exitOK {
		t.Fatalf("-status: exit %d\n%s", code, out)
	}
	return out
}

// shipmentRows is the number of order's shipments, as the program counts
// them.
func shipmentRows(t *testing.T, tg target, order string) int {
	t.Helper()
	code, out := runToEnd(t, tg, tg.addr, "-order", order, "-count-shipments")
	var n int
	if _, err := fmt.Sscanf(firstLine(out), "%d", &n); code != exitOK || err != nil {
		t.Fatalf("-count-shipments: exit %d, %v\n%s", code, err, out)
	}
	return n
}

// sqsClient is an SQS client on moto_server at endpoint, for the test's
// own set-up.
func sqsClient(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "testing", SecretAccessKey: "testing"}, nil
		}),
	})
}

// createQueue creates a standard queue and returns its URL.
func createQueue(t *testing.T, api *sqs.Client, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}
