package samstack

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// CodeBucket is the bucket Deploy uploads the placeholder code to, creating
// it when missing.
const CodeBucket = "samstack-code"

// DefaultTimeout bounds Deploy when ctx has no deadline.
const DefaultTimeout = 2 * time.Minute

// ErrNotLocal is returned by Deploy for a configuration without an endpoint
// override, i.e. one that would reach AWS itself.
var ErrNotLocal = errors.New("samstack: Deploy is for a local endpoint (set AWS_ENDPOINT_URL, e.g. to a moto_server); deploy to AWS with `sam deploy`")

// AdaptationKind says what Deploy did where the endpoint is not CloudFormation.
type AdaptationKind string

const (
	// Rewritten: the template sent to the endpoint was changed so the endpoint
	// yields what CloudFormation yields from the original.
	Rewritten AdaptationKind = "rewritten"
	// Applied: the endpoint's CloudFormation dropped the property; Deploy set
	// it through the service's own API after the stack was created.
	Applied AdaptationKind = "applied"
	// Missing: the endpoint does not have it at all; only the translated
	// template (Stack.Template) can be checked for it.
	Missing AdaptationKind = "missing"
	// Disabled: Deploy turned it off on purpose; see the Detail.
	Disabled AdaptationKind = "disabled"
)

// Adaptation is one difference between the deployed stack and what
// CloudFormation would have built, with the reason.
type Adaptation struct {
	Kind      AdaptationKind
	LogicalID string
	Property  string
	Detail    string
}

func (a Adaptation) String() string {
	where := a.LogicalID
	if a.Property != "" {
		where += "." + a.Property
	}
	return fmt.Sprintf("%s %s: %s", a.Kind, where, a.Detail)
}

// Deploy translates the SAM template at templatePath, checks params against
// the template's constraints and rules, and creates the stack on the
// CloudFormation endpoint of awsCfg (a moto_server: see the package doc),
// waiting until it is CREATE_COMPLETE. The functions' code is a placeholder
// that fails if run: run the handlers in-process instead.
//
// The stack's event source mappings are disabled once created, because
// moto_server would otherwise try to run the function in Docker on every
// SendMessage and, failing, count a receive against the message; read their
// configuration from Stack.Functions and poll the queues yourself.
func Deploy(ctx context.Context, awsCfg aws.Config, stackName, templatePath string, params map[string]string) (*Stack, error) {
	if aws.ToString(awsCfg.BaseEndpoint) == "" {
		return nil, ErrNotLocal
	}
	p, err := Prepare(ctx, awsCfg.Region, stackName, templatePath, params)
	if err != nil {
		return nil, err
	}
	return p.Deploy(ctx, awsCfg)
}

// Prepared is a template translated and checked for one stack, ready to
// deploy: Deploy split in two, so that the translation (a Python process,
// seconds of CPU) can run while moto_server starts.
type Prepared struct {
	stackName, templatePath, codeKey string
	tmpl                             Template
	values                           map[string]string
}

// Prepare translates the template for stackName in region and checks params
// against its constraints and rules. It makes no AWS call.
func Prepare(ctx context.Context, region, stackName, templatePath string, params map[string]string) (*Prepared, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	// One code key for every stack: the placeholder is the same, and a
	// translation that does not name the stack is one the cache can answer
	// for the next stack with the same parameters.
	key := "code.zip"
	tmpl, err := translate(ctx, templatePath, params, region, "s3://"+CodeBucket+"/"+key)
	if err != nil {
		return nil, err
	}
	values, err := tmpl.ParameterValues(params)
	if err != nil {
		return nil, fmt.Errorf("samstack: parameters of %s:\n%w", templatePath, err)
	}
	if _, err := tmpl.Conditions(values); err != nil {
		return nil, fmt.Errorf("samstack: conditions of %s: %w", templatePath, err)
	}
	return &Prepared{stackName: stackName, templatePath: templatePath, codeKey: key, tmpl: tmpl, values: values}, nil
}

// Deploy creates the prepared stack on the CloudFormation endpoint of awsCfg
// (a moto_server), as the package's Deploy does.
func (p *Prepared) Deploy(ctx context.Context, awsCfg aws.Config) (*Stack, error) {
	// Deploy rewrites the template and disables event source mappings for
	// moto_server's sake: never do that to a real account.
	if aws.ToString(awsCfg.BaseEndpoint) == "" {
		return nil, ErrNotLocal
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	if err := uploadPlaceholder(ctx, awsCfg, p.codeKey); err != nil {
		return nil, err
	}
	stackName, templatePath, tmpl, values := p.stackName, p.templatePath, p.tmpl, p.values
	body, adaptations := forMoto(tmpl)
	body, dropped, err := withoutNoValue(body, NewResolver(tmpl, values))
	if err != nil {
		return nil, fmt.Errorf("samstack: %s: %w", templatePath, err)
	}
	adaptations = append(adaptations, dropped...)
	body, named := nameFIFOQueues(body, NewResolver(tmpl, values), stackName)
	adaptations = append(adaptations, named...)
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	cf := cloudformation.NewFromConfig(awsCfg)
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	var cfParams []cftypes.Parameter
	for _, name := range names {
		cfParams = append(cfParams, cftypes.Parameter{ParameterKey: aws.String(name), ParameterValue: aws.String(values[name])})
	}
	token, err := deployToken()
	if err != nil {
		return nil, err
	}
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:          aws.String(stackName),
		TemplateBody:       aws.String(string(raw)),
		Parameters:         cfParams,
		Capabilities:       []cftypes.Capability{cftypes.CapabilityCapabilityIam},
		ClientRequestToken: aws.String(token),
		Tags:               []cftypes.Tag{{Key: aws.String(deployTag), Value: aws.String(token)}},
	}); err != nil && !createdByThisCall(ctx, cf, stackName, token, err) {
		return nil, fmt.Errorf("samstack: create stack %s: %w", stackName, err)
	}
	if err := waitCreated(ctx, cf, stackName); err != nil {
		return nil, fmt.Errorf("samstack: %w", err)
	}

	st, err := Describe(ctx, awsCfg, stackName)
	if err != nil {
		return nil, fmt.Errorf("samstack: %w", err)
	}
	st.Template = tmpl
	st.Parameters = values
	after, err := reconcile(ctx, awsCfg, st, NewResolver(tmpl, values))
	if err != nil {
		return nil, fmt.Errorf("samstack: stack %s: %w", stackName, err)
	}
	st.Adaptations = append(adaptations, after...)
	return st, nil
}

// uploadPlaceholder puts a code archive where the translated template says
// the functions' code is; moto_server checks that it exists.
func uploadPlaceholder(ctx context.Context, awsCfg aws.Config, key string) error {
	// Path-style addressing: a local endpoint has no per-bucket host names.
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	in := &s3.CreateBucketInput{Bucket: aws.String(CodeBucket)}
	if awsCfg.Region != "" && awsCfg.Region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(awsCfg.Region)}
	}
	_, err := client.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("samstack: create code bucket %s: %w", CodeBucket, err)
	}
	zipped, err := placeholderZip()
	if err != nil {
		return err
	}
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(CodeBucket),
		Key:    aws.String(key),
		Body:   bytes.NewReader(zipped),
	}); err != nil {
		return fmt.Errorf("samstack: upload placeholder code: %w", err)
	}
	return nil
}

func placeholderZip() ([]byte, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write([]byte("#!/bin/sh\necho 'samstack placeholder: this stack was deployed without code; run the handlers in-process' >&2\nexit 1\n")); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// deployTag is the tag Deploy puts on the stack it creates, its value a
// token of that one Deploy: it tells Deploy's own stack from another one of
// the same name.
const deployTag = "samstack:deploy"

// deployToken is a new random token for one CreateStack.
func deployToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("samstack: deploy token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// createdByThisCall reports whether err, CreateStack's error, only says the
// stack exists because this very call created it: the SDK retries a
// CreateStack whose answer was lost or slow (an endpoint that applied it and
// then failed, timed out or reset the connection), and the retry finds the
// stack the first attempt made. moto_server ignores ClientRequestToken, which
// would make CloudFormation itself answer the retry as the first attempt, so
// the stack's tag is what tells Deploy's own stack from someone else's: a
// stack of that name without this call's token stays an error.
func createdByThisCall(ctx context.Context, cf *cloudformation.Client, stackName, token string, err error) bool {
	var exists *cftypes.AlreadyExistsException
	if !errors.As(err, &exists) {
		return false
	}
	out, derr := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stackName)})
	if derr != nil || len(out.Stacks) != 1 {
		return false
	}
	for _, tag := range out.Stacks[0].Tags {
		if aws.ToString(tag.Key) == deployTag {
			return aws.ToString(tag.Value) == token
		}
	}
	return false
}

// bounded is ctx with DefaultTimeout when it has no deadline of its own.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}
