// Helpers both test tiers use: the hermetic resolver tests and the
// integration tests, which translate with python3 and deploy to moto_server.

package samstack_test

import "encoding/json"

// jsonEqual compares two values by their JSON form.
func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
