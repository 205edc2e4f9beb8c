# Forces moto 5's SQS delete race in-process and prints "present" when the
# message sent between two overlapping deletes is still in the queue, "lost"
# when it vanished. Run by sqsrace_test.go with and without the patches (python/).
import threading, time
from moto.sqs import models
backend = models.sqs_backends["123456789012"]["us-east-1"]
q = backend.create_queue("race")
for i in range(40):
    backend.send_message("race", "ballast-%d" % i)
msgs = backend.receive_message("race", 10, 0, 3600)
handles = [m.receipt_handle for m in msgs]
slow = models.Message.had_receipt_handle
def had(self, h):
    time.sleep(0.001)
    return slow(self, h)
models.Message.had_receipt_handle = had
# The first delete rebuilds the list and replaces it while the second still
# walks the old one; a message sent in between is only in the first's list.
ts = [threading.Thread(target=backend.delete_message, args=("race", h)) for h in handles[:2]]
ts[0].start()
time.sleep(0.03)
ts[1].start()
ts[0].join()
sent = backend.send_message("race", "sent-during-deletes")
for t in ts: t.join()
present = any(m.id == sent.id for m in q._messages)
print("present" if present else "lost")
