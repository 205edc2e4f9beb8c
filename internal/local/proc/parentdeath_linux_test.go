package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary, run again by
// TestServerDiesWithTheProgram, the program that starts a server and is
// killed.
const helperEnv = "SQS_ONCE_PROC_TEST_PARENT"

// TestServerDiesWithTheProgram kills (SIGKILL, no cleanup: what go test
// does at -timeout) a program that started a long-lived process with
// Start, and waits for that process to end: it holds the write end of a
// pipe, whose read end sees EOF once every holder has exited. Without the
// parent-death signal the process would run its full 300 s.
func TestServerDiesWithTheProgram(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		runHelperParent()
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	parent := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTheProgram$")
	parent.Env = append(os.Environ(), helperEnv+"=1")
	parent.ExtraFiles = []*os.File{w}
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, perr := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "started "))
	if !strings.HasPrefix(line, "started ") || perr != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("helper said %q (%v), want started and a pid", line, err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	if err := r.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // the process this test started, by its id
		t.Fatalf("the started process outlived the program that started it: read %v, want EOF", err)
	}
}

// runHelperParent starts a process holding fd 3 (the test's pipe), says so
// with its pid, and waits to be killed.
func runHelperParent() {
	w := os.NewFile(3, "pipe")
	cmd := exec.Command("sleep", "300")
	cmd.ExtraFiles = []*os.File{w}
	if _, err := Start(context.Background(), cmd, nil, nil); err != nil {
		os.Exit(2)
	}
	w.Close()
	_, _ = fmt.Printf("started %d\n", cmd.Process.Pid)
	select {}
}
