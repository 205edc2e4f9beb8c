// Package templatetest holds the checks of the SAM application as shipped:
// template.yaml translated and deployed to moto_server with its wiring read
// back from the deployed resources, the handlers run against that stack with
// the environment the template gives them, samconfig.toml, the docs'
// parameter table and the Lambda build. It has tests only, and every one
// needs python3 with the SAM translator, moto_server, cfn-lint or make:
// they build under the integration tag (make test).
package templatetest
