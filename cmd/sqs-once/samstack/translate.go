package samstack

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

//go:embed translate.py
var translateScript string

// PythonEnv names the variable that overrides the interpreter, e.g. the
// Python of a virtualenv or of a pipx-installed SAM CLI.
const PythonEnv = "SAMSTACK_PYTHON"

// InstallHint says how to get what Translate needs.
const InstallHint = "Translate needs Python 3 with the SAM translator and PyYAML: " +
	"`pip install aws-sam-translator pyyaml` (cfn-lint installs both), " +
	"or point " + PythonEnv + " at a python3 that has them"

// PlaceholderCodeURI is where Translate says the functions' code is when the
// caller does not upload it: the translator accepts only S3 locations.
const PlaceholderCodeURI = "s3://samstack-code/code.zip"

// ErrToolMissing is wrapped when python3 or one of its packages is missing.
var ErrToolMissing = errors.New("samstack: " + InstallHint)

// TranslateError is a template the SAM translator rejected; Causes are its
// messages, one per problem.
type TranslateError struct {
	Template string
	Causes   []string
}

func (e *TranslateError) Error() string {
	return fmt.Sprintf("SAM translator rejected %s:\n  %s", e.Template, strings.Join(e.Causes, "\n  "))
}

// Translate returns the CloudFormation template the SAM translator makes of
// the SAM template at templatePath, with params as parameter values (the
// translator resolves a few of them, e.g. in CodeUri; the rest stay Refs).
// Functions' local code points at PlaceholderCodeURI. The region used for
// pseudo parameters and ARNs is AWS_REGION's, else us-east-1.
func Translate(ctx context.Context, templatePath string, params map[string]string) (Template, error) {
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = os.Getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = "us-east-1"
	}
	return translate(ctx, templatePath, params, region, PlaceholderCodeURI)
}

func translate(ctx context.Context, templatePath string, params map[string]string, region, codeURI string) (Template, error) {
	if _, err := os.Stat(templatePath); err != nil {
		return nil, fmt.Errorf("samstack: template: %w", err)
	}
	python := os.Getenv(PythonEnv)
	if python == "" {
		python = "python3"
	}
	bin, err := exec.LookPath(python)
	if err != nil {
		return nil, fmt.Errorf("%w (%s not found)", ErrToolMissing, python)
	}
	if params == nil {
		params = map[string]string{}
	}
	req, err := json.Marshal(map[string]any{"template": templatePath, "parameters": params, "code_uri": codeURI})
	if err != nil {
		return nil, err
	}

	cache := translationCache(ctx, bin, templatePath, params, codeURI, region)
	if out, ok := cache.read(); ok {
		var t Template
		if err := json.Unmarshal(out, &t); err == nil {
			return t, nil
		}
		// A damaged entry: translate again, and write it anew.
	}

	cmd := exec.CommandContext(ctx, bin, "-c", translateScript)
	cmd.Stdin = bytes.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The translator reads the region through boto3 for AWS::Region and
	// partition-aware ARNs; it makes no AWS call.
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION="+region, "AWS_REGION="+region)
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return nil, fmt.Errorf("%w (%s: %s)", ErrToolMissing, bin, msg)
	case errors.As(err, &exit) && exit.ExitCode() == 1 && msg != "" && !strings.Contains(msg, "Traceback"):
		return nil, &TranslateError{Template: templatePath, Causes: strings.Split(msg, "\n")}
	default:
		return nil, fmt.Errorf("samstack: run SAM translator (%s): %v\n%s", bin, err, msg)
	}

	var t Template
	if err := json.Unmarshal(stdout.Bytes(), &t); err != nil {
		return nil, fmt.Errorf("samstack: SAM translator output is not JSON: %w", err)
	}
	// A cache that cannot be written costs the next translation its
	// seconds, nothing else.
	_ = cache.write(stdout.Bytes())
	return t, nil
}
