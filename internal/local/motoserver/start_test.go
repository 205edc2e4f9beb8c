//go:build integration

// Start's own test runs moto_server: the integration tier.

package motoserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestStartServesOnLoopbackAndStopEndsTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL %s is not on the loopback interface", s.URL)
	}
	env := s.Env()
	if env["AWS_ENDPOINT_URL"] != s.URL || env["AWS_EC2_METADATA_DISABLED"] != "true" || env["AWS_REGION"] == "" ||
		env["AWS_ACCESS_KEY_ID"] == "" {
		t.Errorf("Env() = %v: want the endpoint, a region, dummy credentials and no metadata lookup", env)
	}
	resp, err := http.Get(s.URL + "/moto-api/")
	if err != nil {
		t.Fatalf("server not answering: %v", err)
	}
	resp.Body.Close()

	s.Stop()
	select {
	case <-s.proc.Exited():
	default:
		t.Fatal("Stop returned with the process still running")
	}
	s.Stop() // a second Stop is harmless
}
