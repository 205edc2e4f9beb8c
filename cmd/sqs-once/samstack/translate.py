"""Transform a SAM template into CloudFormation JSON, as the SAM CLI does.

Reads {"template": <path>, "parameters": {name: value}, "code_uri": "s3://..."}
on stdin and writes
the CloudFormation template as JSON on stdout. Errors go to stderr, one per
line, and make the exit status non-zero: 2 for a missing Python package, 1 for
a template the translator rejects.
"""

import json
import sys

try:
    import yaml
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.transform import transform
except ImportError as exc:  # reported by the Go side with an install hint
    print(f"missing Python package: {exc.name}", file=sys.stderr)
    sys.exit(2)


class CfnLoader(yaml.SafeLoader):
    """YAML loader that understands CloudFormation's short-form intrinsics."""


def _intrinsic(loader, tag_suffix, node):
    name = tag_suffix
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if name == "Ref" or name == "Condition":
        return {name: value}
    if name == "GetAtt" and isinstance(value, str):
        # !GetAtt Resource.Attribute.With.Dots -> [Resource, "Attribute.With.Dots"]
        value = value.split(".", 1)
    return {"Fn::" + name: value}


CfnLoader.add_multi_constructor("!", _intrinsic)
# An unquoted 2010-09-09 is a version string to CloudFormation, not a date.
CfnLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


class NoManagedPolicyLookup:
    """Managed policy loader that never calls IAM.

    The translator consults it only for a policy given by bare name that its
    bundled map does not know; name such a policy by ARN instead.
    """

    def load(self):
        raise ValueError(
            "the template names an AWS managed policy the SAM translator does not know: "
            "give it as an ARN (arn:${AWS::Partition}:iam::aws:policy/...)"
        )


def package(template, code_uri):
    """Point every function's local code at code_uri, as `sam package` does
    after uploading it: the translator accepts only S3 locations."""
    functions = [
        r.get("Properties")
        for r in (template.get("Resources") or {}).values()
        if isinstance(r, dict) and r.get("Type") == "AWS::Serverless::Function"
    ]
    glob = (template.get("Globals") or {}).get("Function")
    for props in functions + [glob]:
        if not isinstance(props, dict):
            continue
        uri = props.get("CodeUri")
        if isinstance(uri, str) and not uri.startswith("s3://"):
            props["CodeUri"] = code_uri


def main():
    request = json.load(sys.stdin)
    try:
        with open(request["template"], encoding="utf-8") as f:
            template = yaml.load(f, Loader=CfnLoader)
    except yaml.YAMLError as exc:
        print(f"not valid YAML: {exc}".replace("\n", " "), file=sys.stderr)
        sys.exit(1)
    if not isinstance(template, dict):
        print("not a template: the document is not a mapping", file=sys.stderr)
        sys.exit(1)
    package(template, request["code_uri"])
    try:
        # The same entry point the SAM CLI and CloudFormation's own transform use.
        out = transform(template, request.get("parameters") or {}, NoManagedPolicyLookup())
    except InvalidDocumentException as exc:
        for cause in exc.causes:
            print(cause.message, file=sys.stderr)
        sys.exit(1)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
