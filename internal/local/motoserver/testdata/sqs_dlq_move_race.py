# Forces moto 5's second SQS race in-process: a receive that moves messages
# to the dead-letter queue (removing them from the list in place) while a
# delete iterates that list. Prints "present" when the 19 messages that
# belong are exactly where they should be, "corrupt: ..." otherwise.
import threading, time, json
from moto.sqs import models
backend = models.sqs_backends["123456789012"]["us-east-1"]
dlq = backend.create_queue("dlq2")
q = backend.create_queue("race2", RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq.queue_arn, "maxReceiveCount": 1}))
for i in range(20):
    backend.send_message("race2", "m-%d" % i)
# receive all once with visibility 0 so they are visible again and due for the DLQ, except keep handles of two
got = backend.receive_message("race2", 10, 0, 3600)   # 10 in flight, count 1
h = got[-1].receipt_handle
slow = models.Message.had_receipt_handle
def had(self, rh):
    time.sleep(0.002)
    return slow(self, rh)
models.Message.had_receipt_handle = had
t = threading.Thread(target=backend.delete_message, args=("race2", h))
t.start()
time.sleep(0.05)
# the other 10 were never received: receive them now with count>=1? they have count 0; make them due:
for m in q._messages:
    if m.approximate_receive_count == 0:
        m.approximate_receive_count = 1
backend.receive_message("race2", 10, 0, 30)  # moves due messages to the DLQ, removing them in place
t.join()
total = len(q._messages) + len(dlq._messages)
# Unpatched, the delete's rebuild both restores messages the receive moved
# to the DLQ and skips the ones after them: the count is off either way.
print("present" if total == 19 else "corrupt: %d messages where 19 belong" % total)
