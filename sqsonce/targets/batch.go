package targets

import "sync"

// pack cuts the entries not yet failed (errs[i] nil) into batches of at
// most maxEntries entries and maxBytes in all, keeping their order; size(i)
// is entry i's size.
func pack(errs []error, size func(i int) int, maxEntries, maxBytes int) [][]int {
	var batches [][]int
	var cur []int
	total := 0
	for i := range errs {
		if errs[i] != nil {
			continue
		}
		n := size(i)
		if len(cur) == maxEntries || (len(cur) > 0 && total+n > maxBytes) {
			batches = append(batches, cur)
			cur, total = nil, 0
		}
		cur = append(cur, i)
		total += n
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// callsInFlight is how many batch calls a target makes at once: ten batches
// of ten is a full Lambda batch of a standard queue in one round.
const callsInFlight = 10

// sendAll runs send for every batch, callsInFlight at once. With group set
// (a FIFO destination), a batch first waits for the earlier batches that
// hold one of its groups, so each group reaches the destination in order.
func sendAll(batches [][]int, group func(i int) string, send func(batch []int)) {
	done := make([]chan struct{}, len(batches))
	after := make([][]chan struct{}, len(batches))
	last := map[string]int{}
	for b, batch := range batches {
		done[b] = make(chan struct{})
		if group == nil {
			continue
		}
		waits := map[int]bool{}
		for _, i := range batch {
			g := group(i)
			if prev, ok := last[g]; ok && prev != b && !waits[prev] {
				waits[prev] = true
				after[b] = append(after[b], done[prev])
			}
			last[g] = b
		}
	}
	// A batch takes its slot before waiting; it only waits for earlier
	// batches, which hold slots or have finished, so there is no deadlock.
	slots := make(chan struct{}, callsInFlight)
	var wg sync.WaitGroup
	for b, batch := range batches {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			defer close(done[b])
			for _, d := range after[b] {
				<-d
			}
			send(batch)
		})
	}
	wg.Wait()
}
