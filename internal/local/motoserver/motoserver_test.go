package motoserver

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

func TestStartWithoutMotoServerSaysHowToInstallIt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background())
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "make setup") || !strings.Contains(err.Error(), "requirements-dev.txt") {
		t.Errorf("Start() error = %v, want ErrNotInstalled with the make target and the requirements file", err)
	}
	if _, err := Find(); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("Find() error = %v, want ErrNotInstalled", err)
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
