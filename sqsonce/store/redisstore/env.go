package redisstore

import (
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// The variables FromEnv reads.
const (
	// EnvURL is the server: redis://[user:password@]host:port[/db] or
	// rediss:// for TLS (ElastiCache with in-transit encryption), with
	// go-redis's query parameters (dial_timeout, read_timeout, ...). The
	// user and password are those of Redis AUTH or an ElastiCache RBAC
	// user. Required.
	EnvURL = "REDIS_URL"
	// EnvCluster, "true", reads EnvURL as a Redis Cluster's (ElastiCache
	// with cluster mode enabled): more nodes as addr= query parameters.
	EnvCluster = "REDIS_CLUSTER"
	// EnvWaitReplicas is Options.WaitReplicas, 0 to 5 (default 0), with
	// WaitTimeout one second.
	EnvWaitReplicas = "REDIS_WAIT_REPLICAS"
)

// FromEnv returns the Store on the server EnvURL names, with the options
// EnvCluster and EnvWaitReplicas set; lookup is os.LookupEnv, or a map's in
// a test. The error names every bad variable, never the URL's password,
// and matches store.ErrMisconfigured. FromEnv does not connect: the
// first call does, and Check tries it. Close closes the client it made.
func FromEnv(lookup func(string) (string, bool)) (*Store, error) {
	r := envconfig.NewReader(lookup)
	raw := r.Required(EnvURL)
	cluster := r.OneOf(EnvCluster, "false", "true", "false") == "true"
	wait := r.Int(EnvWaitReplicas, 0, 0, 5)
	var client redis.UniversalClient
	if raw != "" {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			// url.Parse's error repeats the URL, password and all.
			r.Fail(EnvURL, "not a URL")
		case u.Scheme != "redis" && u.Scheme != "rediss":
			r.Fail(EnvURL, "%q: the scheme is %q; want redis:// or rediss:// (TLS)", u.Redacted(), u.Scheme)
		case cluster:
			opts, err := redis.ParseClusterURL(raw)
			if err != nil {
				r.Fail(EnvURL, "%q: %v", u.Redacted(), err)
				break
			}
			client = redis.NewClusterClient(opts)
		default:
			opts, err := redis.ParseURL(raw)
			if err != nil {
				r.Fail(EnvURL, "%q: %v", u.Redacted(), err)
				break
			}
			client = redis.NewClient(opts)
		}
	}
	if err := r.Err(); err != nil {
		if client != nil {
			_ = client.Close()
		}
		return nil, fmt.Errorf("%w: %w", store.ErrMisconfigured, err)
	}
	s, err := New(client, Options{WaitReplicas: wait, WaitTimeout: time.Second})
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// Close closes the client, when the store made it (FromEnv); a client
// given to New is the caller's to close.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return s.c.Close()
}
