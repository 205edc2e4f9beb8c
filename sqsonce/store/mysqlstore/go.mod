module github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore

go 1.26.0
