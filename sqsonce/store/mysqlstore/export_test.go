package mysqlstore

// Mutate breaks s as the package's mutant tests ask, so that they show a
// rule of theirs fails without what it breaks:
//   - "naive-rows-affected": the UPDATEs do not move the row's version on,
//     and the store trusts MySQL's rows-affected as it comes (right only
//     on a connection with clientFoundRows=true);
//   - "trust-statements": Commit does not check that a statement of the
//     work's failed (Handler_rollback), and commits what is left.
//
// It returns false for a name it does not know.
func Mutate(s *Store, name string) bool {
	switch name {
	case "naive-rows-affected":
		s.q = newQueries(s.t, false)
	case "trust-statements":
		s.trustStatements = true
	default:
		return false
	}
	return true
}
