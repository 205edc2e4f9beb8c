module github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/sqs-once/sqs-once v0.7.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/aws/aws-lambda-go v1.55.1 // indirect
	github.com/aws/aws-sdk-go-v2 v1.47.8 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.11 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.11 // indirect
	github.com/aws/aws-sdk-go-v2/service/sqs v1.52.9 // indirect
	github.com/aws/smithy-go v1.28.8 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
