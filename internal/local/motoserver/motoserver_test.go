package motoserver

import (
	"context"
	"errors"
	"net/http"
	"os"
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
	case <-s.exited:
	default:
		t.Fatal("Stop returned with the process still running")
	}
	s.Stop() // a second Stop is harmless
}

func TestStartWithoutMotoServerSaysHowToInstallIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background())
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "pip install 'moto[server]'") {
		t.Errorf("Start() error = %v, want ErrNotInstalled with the install command", err)
	}
}

func TestScrubEndpointOverrides(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_SQS", "https://sqs.us-east-1.amazonaws.com")
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	if err := ScrubEndpointOverrides(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"AWS_ENDPOINT_URL_SQS", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"} {
		if v, ok := os.LookupEnv(name); ok {
			t.Errorf("%s=%s survived: it would send clients past the local endpoint", name, v)
		}
	}
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Error("AWS_ENDPOINT_URL was removed; only the overrides should be")
	}
}
