package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// TestFromEnv: a good URL gives a store without connecting; every bad
// variable is named at once, the error matches ErrMisconfigured, and the
// URL's password never appears in it.
func TestFromEnv(t *testing.T) {
	for _, env := range []map[string]string{
		{"REDIS_URL": "redis://127.0.0.1:1"},
		{"REDIS_URL": "rediss://orders:s3cret@master.orders.abc123.use1.cache.amazonaws.com:6379/0"},
		{"REDIS_URL": "rediss://orders:s3cret@clustercfg.orders.abc123.use1.cache.amazonaws.com:6379", "REDIS_CLUSTER": "true"},
		{"REDIS_URL": "redis://127.0.0.1:1", "REDIS_WAIT_REPLICAS": "1"},
	} {
		s, err := redisstore.FromEnv(envconfig.Map(env))
		if err != nil {
			t.Errorf("FromEnv(%v): %v", env, err)
			continue
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	for _, c := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{}, []string{"REDIS_URL: required"}},
		{map[string]string{"REDIS_URL": "http://user:s3cret@host:6379"}, []string{"REDIS_URL", `scheme is "http"`}},
		{map[string]string{"REDIS_URL": "redis://user:s3cret@host:6379/notadb"}, []string{"REDIS_URL", "user:xxxxx@host"}},
		{map[string]string{"REDIS_URL": "redis://user:s3cret@host:6379", "REDIS_CLUSTER": "yes", "REDIS_WAIT_REPLICAS": "9"}, []string{"REDIS_CLUSTER", "REDIS_WAIT_REPLICAS"}},
		{map[string]string{"REDIS_URL": "rediss://user:s3cret@host:6379", "REDIS_CLUSTER": "true", "REDIS_WAIT_REPLICAS": "1"}, []string{"WaitReplicas", "Cluster"}},
		{map[string]string{"REDIS_URL": "redis://user:s3cret@ho st:6379"}, []string{"REDIS_URL: not a URL"}},
	} {
		_, err := redisstore.FromEnv(envconfig.Map(c.env))
		if !errors.Is(err, store.ErrMisconfigured) {
			t.Errorf("FromEnv(%v) returned %v; want an error matching ErrMisconfigured", c.env, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("FromEnv(%v): %q does not say %q", c.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("FromEnv(%v): the error shows the password: %v", c.env, err)
		}
	}
}
