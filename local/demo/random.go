package demo

import (
	"math/rand/v2"
	"sync"
)

// Streams of -seed: each consumer of randomness draws from its own, so that
// one drawing more (a longer workload, another fault) does not shift the
// others' sequences.
const (
	replaySeedStream  = 0x5e9a1
	backoffSeedStream = 0xbac0f
)

// seededRand is a source of uniform values in [0, 1), safe for concurrent
// use, whose sequence -seed fixes. Which call gets which value still depends
// on the order in which concurrent invocations ask.
func seededRand(seed, stream uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, stream))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
