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

// TestShared: the variable is read as a loopback URL, or refused; unset or
// empty, there is no shared server.
func TestShared(t *testing.T) {
	for _, tc := range []struct {
		value, want string
		ok, fails   bool
	}{
		{"", "", false, false},
		{"http://127.0.0.1:4566", "http://127.0.0.1:4566", true, false},
		{"http://127.0.0.1:4566/", "http://127.0.0.1:4566", true, false},
		{"http://localhost:4566", "", false, true},
		{"http://10.0.0.1:4566", "", false, true},
		{"https://127.0.0.1:4566", "", false, true},
		{"http://127.0.0.1", "", false, true},
		{"http://127.0.0.1:0", "", false, true},
		{"http://127.0.0.1:4566/x", "", false, true},
		{"127.0.0.1:4566", "", false, true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(SharedEnv, tc.value)
			got, ok, err := Shared()
			if got != tc.want || ok != tc.ok || (err != nil) != tc.fails {
				t.Errorf("Shared() = %q, %t, %v; want %q, %t, error %t", got, ok, err, tc.want, tc.ok, tc.fails)
			}
		})
	}
}
