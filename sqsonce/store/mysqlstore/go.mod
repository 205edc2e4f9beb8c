module github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore

go 1.26.0

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/sqs-once/sqs-once v0.7.0
)

require filippo.io/edwards25519 v1.2.0 // indirect
