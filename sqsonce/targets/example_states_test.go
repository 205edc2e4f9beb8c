package targets_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// A states target starts one execution per key, named after it: the key
// itself where Step Functions allows it, else a readable prefix and a hash.
func ExampleSpec_ExecutionName() {
	spec, err := targets.ParseSpec("states:arn:aws:states:eu-west-1:123456789012:stateMachine:orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, key := range []string{"order-42", "tenant/42"} {
		name, _ := spec.ExecutionName(key)
		fmt.Println(name)
	}
	// Output:
	// order-42
	// tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5
}

func ExampleToStateMachine() {
	var awsCfg aws.Config // config.LoadDefaultConfig in a program
	tg, err := targets.ToStateMachine(awsCfg, "arn:aws:states:eu-west-1:123456789012:stateMachine:orders")
	fmt.Println(tg.StateMachineARN, err)
	_, err = targets.ToStateMachine(awsCfg, "orders")
	fmt.Println(err)
	// Output:
	// arn:aws:states:eu-west-1:123456789012:stateMachine:orders <nil>
	// targets: invalid target: ToStateMachine: stateMachineARN "orders": want arn:aws:states:<region>:<account>:stateMachine:<name>
}
