package metrics

// The dimensions of every sqs-once metric: the function that wrote it, and
// for some, why (the processor's Failed and ForwardedToOperator, the
// replayer's ForwardedToOperator).
const (
	DimensionFunction = "FunctionName"
	DimensionReason   = "Reason"
)

// The processor's metrics that count records again for what happened on
// the way, beside the one each record counts under (its sqsonce.Kind). A
// user reads them from sqsonce.Outcome's flags of the same names.
const (
	// LockLost: the lock was taken over or could not be renewed while the
	// handler ran (Outcome.LockLost).
	LockLost = "LockLost"
	// BackoffApplied: SQS confirmed the failure backoff of a failed record
	// (FAILURE_BACKOFF_BASE; Outcome.BackoffApplied).
	BackoffApplied = "BackoffApplied"
	// InProgressHidden: SQS confirmed the hiding of a record refused as in
	// progress until the lock that refused it can be taken over
	// (Outcome.InProgressHidden). Written only when not zero.
	InProgressHidden = "InProgressHidden"
)
