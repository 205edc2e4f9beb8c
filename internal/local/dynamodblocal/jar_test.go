package dynamodblocal

import (
	"strings"
	"testing"
)

// A machine without java is told the command that installs it, with the
// jar's own state beside it: a test fails with both, never skips.
func TestJarWithoutJavaNamesItsInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Jar()
	if err == nil || !strings.Contains(err.Error(), "`"+JavaInstallCommand+"`") {
		t.Errorf("Jar without java on PATH: %v, want the command %q", err, JavaInstallCommand)
	}
}
