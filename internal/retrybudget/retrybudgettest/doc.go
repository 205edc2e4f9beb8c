// Package retrybudgettest is test support for package retrybudget, as
// net/http/httptest is for net/http: BodyCheck, an HTTP client that shows
// whether the SDK clients a package builds carry
// retrybudget.SafeRequestBody. No shipping package imports it.
package retrybudgettest
