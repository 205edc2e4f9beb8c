package targets_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// A durable target starts one execution of a qualified durable function
// per key; its name is the key where DurableExecutionName allows it
// ([A-Za-z0-9_-], 64 at most), else a readable prefix and a hash.
func ExampleToDurableFunction() {
	var awsCfg aws.Config // config.LoadDefaultConfig in a program
	tg, err := targets.ToDurableFunction(awsCfg, "orders", "live")
	fmt.Println(tg.Function, tg.Qualifier, tg.Synchronous, err)
	spec, _ := targets.ParseSpec("durable:orders:live")
	for _, key := range []string{"order-42", "tenant/42"} {
		name, _ := spec.ExecutionName(key)
		fmt.Println(name)
	}
	_, err = targets.ParseSpec("durable:orders")
	fmt.Println(err)
	// Output:
	// orders live false <nil>
	// order-42
	// tenant_42-cfeec1e83cc4c080fe9f8aeedc33e8b5
	// targets: invalid target "durable:orders": durable:orders names no version or alias: Lambda invokes a durable function by a qualified ARN; publish a version (or an alias to one) and write durable:orders:<version or alias>
}
