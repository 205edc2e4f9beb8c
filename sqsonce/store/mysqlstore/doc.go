// Package mysqlstore is the store.Store on a MySQL or MariaDB table (Aurora
// MySQL, RDS for MySQL), through database/sql and
// github.com/go-sql-driver/mysql with a *sql.DB the caller opens.
package mysqlstore
