//go:build integration

package mysqlstore_test

import (
	"context"
	"errors"
	"os"

	_ "github.com/go-sql-driver/mysql"
)

// startServer: a stand-in until internal/local/mariaserver lands: the DSN
// of a MariaDB started by hand.
func startServer(context.Context) (string, func(), error) {
	dsn := os.Getenv("H2_DSN")
	if dsn == "" {
		return "", nil, errors.New("H2_DSN unset")
	}
	return dsn, func() {}, nil
}
