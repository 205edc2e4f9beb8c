//go:build !linux

package proc

import "os/exec"

// dieWithParent does nothing where the kernel has no parent-death signal:
// there a server outlives a test binary that was killed before its
// cleanup, and Stop is the only way it ends.
func dieWithParent(*exec.Cmd) {}
