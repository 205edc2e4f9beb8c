package layout

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The repository holds three modules of its own: the product (this one:
// the library, the Lambda functions), the operator CLI (cmd/sqs-once) and
// the local harness (local/). Each of the other two requires the product
// through a replace, which a library user's build never sees; so the
// product must need neither of them, and its go.mod must carry none of
// what only they import.

// otherModules are the repository's modules beside the product's.
var otherModules = []string{module + "/cmd/sqs-once", module + "/local"}

// TestProductImportsNeitherTheCLINorTheHarness: no package of the product
// module, nor any of its tests in either tier, imports a package of the
// CLI's module or of the harness's.
func TestProductImportsNeitherTheCLINorTheHarness(t *testing.T) {
	t.Parallel()
	for _, tags := range []string{"", "integration", "integration redis"} {
		g := listDeps(t, []string{"GOFLAGS=-test"}, tags, "./...")
		var roots []string
		for p := range g {
			if under(p, module) && !slices.ContainsFunc(otherModules, func(m string) bool { return under(p, m) }) {
				roots = append(roots, p)
			}
		}
		// go list -test lists each test binary as <package>.test: with none,
		// the tests' imports went unchecked.
		if len(roots) == 0 || !slices.ContainsFunc(roots, func(p string) bool { return strings.HasSuffix(p, ".test") }) {
			t.Fatal("go list listed no package or no test of the product")
		}
		slices.Sort(roots)
		checkNone(t, g, roots, func(pkg string) bool {
			return slices.ContainsFunc(otherModules, func(m string) bool { return under(pkg, m) })
		}, "the product imports the CLI's or the harness's module (tags "+tags+")")
	}
}

// cliAndHarnessOnly are the modules only the CLI or the harness import:
// a library user's module graph gets none of them from the product.
var cliAndHarnessOnly = []string{
	"github.com/spf13/cobra",
	"github.com/vbauerster/mpb",
	"golang.org/x/term",
	"github.com/aws/aws-sdk-go-v2/service/cloudformation",
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch",
	"github.com/aws/aws-sdk-go-v2/service/iam",
	"github.com/aws/aws-sdk-go-v2/service/s3",
}

// TestProductRequiresNoCLIOrHarnessModule: the product's go.mod requires
// neither of the repository's other modules nor anything only they need
// (cobra, mpb, x/term, CloudFormation, CloudWatch, IAM, S3), directly or
// indirectly.
func TestProductRequiresNoCLIOrHarnessModule(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v\n%s", err, stderr.Bytes())
	}
	var mod struct {
		Module  struct{ Path string }
		Require []struct{ Path string }
		Replace []struct{ Old struct{ Path string } }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Module.Path != module {
		t.Fatalf("go.mod at the root declares %s, want %s", mod.Module.Path, module)
	}
	if len(mod.Require) == 0 {
		t.Fatal("go.mod requires nothing: not the file this test means to read")
	}
	banned := append(slices.Clone(otherModules), cliAndHarnessOnly...)
	for _, r := range mod.Require {
		for _, b := range banned {
			if r.Path == b || strings.HasPrefix(r.Path, b+"/") {
				t.Errorf("the product's go.mod requires %s, which only the CLI or the harness needs", r.Path)
			}
		}
	}
	for _, r := range mod.Replace {
		t.Errorf("the product's go.mod replaces %s: a library user's build never sees a replace", r.Old.Path)
	}
}
