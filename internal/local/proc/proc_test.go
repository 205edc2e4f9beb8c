package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	b := NewTail(4)
	_, _ = b.Write([]byte("abc"))
	_, _ = b.Write([]byte("defg"))
	if got := b.String(); got != "defg" {
		t.Errorf("tail %q, want %q", got, "defg")
	}
	var none *Tail
	if none.String() != "" {
		t.Error("a nil Tail is not empty")
	}
}

func TestFreePortIsBindable(t *testing.T) {
	port, err := FreePort()
	if err != nil || port <= 0 {
		t.Fatalf("FreePort: %d, %v", port, err)
	}
}

func TestStartWaitsForTheReadyLine(t *testing.T) {
	out := NewTail(100)
	p, err := Start(context.Background(), exec.Command("sh", "-c", "echo starting; echo ready; exec sleep 60"),
		func(l string) bool { return l == "ready" }, out)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop(time.Second)
	select {
	case <-p.Exited():
	default:
		t.Error("Stop returned before the process was reaped")
	}
	if got := out.String(); got != "starting\nready" {
		t.Errorf("lines %q", got)
	}
	p.Stop(time.Second) // a second Stop does nothing
}

func TestStartFailsWhenTheProcessExitsFirst(t *testing.T) {
	_, err := Start(context.Background(), exec.Command("sh", "-c", "echo not yet"), func(l string) bool { return l == "ready" }, nil)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("err %v, want ErrExited", err)
	}
}

func TestStartGivesUpWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Start(ctx, exec.Command("sleep", "60"), func(string) bool { return true }, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline", err)
	}
}

func TestRepoRootIsTheProductModules(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "template.yaml")); err != nil {
		t.Errorf("root %s has no template.yaml: %v", root, err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if declares(filepath.Join(dir, "go.mod")) || !strings.HasSuffix(filepath.Join(root, "go.mod"), "go.mod") || !declares(filepath.Join(root, "go.mod")) {
		t.Error("declares does not tell the product's go.mod from another")
	}
}
