# Forces moto 5's second SQS race in-process: a receive that moves messages
# to the dead-letter queue (removing them from the list in place) while a
# delete iterates that list. Prints "present" when the 19 messages that
# belong are exactly where they should be, "corrupt: ..." otherwise.
#
# The threads are ordered by events, not by sleeps, so a loaded machine
# cannot change the interleaving: the delete is paused inside its walk of
# the list while the receive moves messages out of it. Patched, the delete
# holds the queue's lock while paused, so the receive waits for it (the
# pause then ends by its timeout) and the list stays whole.
import threading, json
from moto.sqs import models
backend = models.sqs_backends["123456789012"]["us-east-1"]
dlq = backend.create_queue("dlq2")
q = backend.create_queue("race2", RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq.queue_arn, "maxReceiveCount": 1}))
for i in range(20):
    backend.send_message("race2", "m-%d" % i)
got = backend.receive_message("race2", 10, 0, 3600)   # 10 in flight, count 1
h = got[-1].receipt_handle
walking, received = threading.Event(), threading.Event()
had_handle = models.Message.had_receipt_handle
first = None
def had(self, rh):
    # moto's delete walks the list twice: any() stops at the handle's
    # message (the 10th), then the rebuild walks it all; the pause is where
    # the rebuild reaches the 13th, among the 10 the receive then removes in
    # place, so the rebuild's walk skips past the end of the shrunk list.
    if threading.current_thread().name == "delete" and self is first and not walking.is_set():
        walking.set()
        received.wait(2)
    return had_handle(self, rh)
models.Message.had_receipt_handle = had
first = q._messages[12]
t = threading.Thread(target=backend.delete_message, args=("race2", h), name="delete")
t.start()
walking.wait(10)
# The 10 never received are made due for the DLQ, and a receive moves them.
for m in q._messages:
    if m.approximate_receive_count == 0:
        m.approximate_receive_count = 1
backend.receive_message("race2", 10, 0, 30)
received.set()
t.join()
total = len(q._messages) + len(dlq._messages)
# Unpatched, the delete's rebuild both restores messages the receive moved
# to the DLQ and skips the ones after them: the count is off either way.
print("present" if total == 19 else "corrupt: %d messages where 19 belong" % total)
