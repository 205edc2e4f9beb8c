package proc

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when the thread that
// starts it exits, which for a Go program is when the program exits: a
// test binary killed at its -timeout, or interrupted with Ctrl-C, runs no
// cleanup, and its servers would otherwise run on, holding their ports and
// memory. Go's runtime does not end its threads unless a goroutine locked
// to one returns, which none that starts a server does. Credentials set in
// SysProcAttr (pgserver runs postgres as its own user) are applied before
// the signal is armed, so they do not clear it.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
