package demo

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// newObservedTarget builds the target cmd/processor would build from the
// deployed processor's environment (targets.FromEnv, under the deployed
// function's name, so a target naming it is refused as in Lambda), with
// every message's outcome and every SendMessageBatch attempt recorded in
// log.
func newObservedTarget(awsCfg aws.Config, info *stackInfo, log *ForwardLog, logger *slog.Logger) (sqsonce.Target, error) {
	spec, err := targets.ParseSpec(info.deployedTarget())
	if err != nil {
		return nil, fmt.Errorf("%s's TARGET: %w", processorFunction, err)
	}
	tg, err := targets.FromEnv(lambdaEnv(info.processor), observeTargetAttempts(awsCfg, spec.Dest, log.attempt), logger)
	if err != nil {
		return nil, fmt.Errorf("%s's environment: %w", processorFunction, err)
	}
	return observedTarget{Target: tg, log: log}, nil
}

// evaluateTarget sweeps the target queue once more after the pipeline has
// stopped (its consumer has read it all along) and checks the run from what
// arrived there. The sweep gets what is left of -wait, and at least
// drainMinWait: a run that gave up still reports what did arrive. Whatever
// it could not drain is reported as left in the queue.
func (r *localRun) evaluateTarget(ctx context.Context) (Summary, error) {
	left, err := r.info.leftInQueues(ctx, r.api)
	if err != nil {
		return Summary{}, err
	}
	deadline := r.sendStart.Add(r.opts.wait())
	if least := time.Now().Add(drainMinWait); deadline.Before(least) {
		deadline = least
	}
	drainErr := r.consumer.drain(ctx, deadline)
	landings := r.consumer.Landings()
	if left["target"], err = queueDepth(ctx, r.api, r.target.url); err != nil {
		return Summary{}, err
	}
	obs := r.observed()
	obs.Left = left
	obs.Elapsed = time.Since(r.start)
	sum := SummarizeTarget(r.w, landings, obs, r.forwards.Snapshot(), TargetEvaluation{
		Evaluation: Evaluation{
			Mode:     "local",
			Seed:     r.opts.Seed,
			Timings:  r.info.timings(),
			LockHold: r.info.lockHold(),
			Ceiling:  r.info.ceiling,
			Logs:     r.logPath,
		},
		Target:  r.info.deployedTarget(),
		Queue:   r.target.url,
		Message: r.producer.message,
	})
	sum.Adaptations = r.info.adaptations
	if drainErr != nil {
		sum.Violations = append(sum.Violations, drainErr.Error())
		sum.OK = false
	}
	return sum, nil
}
