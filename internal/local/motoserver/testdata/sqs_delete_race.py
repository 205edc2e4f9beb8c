# Forces moto 5's SQS delete race in-process and prints "present" when the
# message sent between two overlapping deletes is still in the queue, "lost"
# when it vanished. Run by sqsrace_test.go with and without the patches (python/).
#
# The threads are ordered by events, not by sleeps, so a loaded machine
# cannot change the interleaving: the second delete is paused inside its
# walk of the message list while the first delete replaces the list and a
# message is sent into the new one; then the second delete replaces the list
# with its rebuild of the old one. Patched, the second delete holds the
# queue's lock while paused, so the first waits for it (the pause then ends
# by its timeout) and nothing is lost.
import threading
from moto.sqs import models
backend = models.sqs_backends["123456789012"]["us-east-1"]
q = backend.create_queue("race")
for i in range(40):
    backend.send_message("race", "ballast-%d" % i)
msgs = backend.receive_message("race", 10, 0, 3600)
handles = [m.receipt_handle for m in msgs]
walking, sent_done = threading.Event(), threading.Event()
had_handle = models.Message.had_receipt_handle
first, seen = None, []
def had(self, h):
    # moto's delete walks the list twice: any() to check the handle, then
    # the rebuild; the pause is at the rebuild's first message.
    if threading.current_thread().name == "second" and self is first and not walking.is_set():
        seen.append(self)
        if len(seen) < 2:
            return had_handle(self, h)
        walking.set()
        sent_done.wait(2)
    return had_handle(self, h)
models.Message.had_receipt_handle = had
first = q._messages[0]
second = threading.Thread(target=backend.delete_message, args=("race", handles[1]), name="second")
second.start()
walking.wait(10)
backend.delete_message("race", handles[0])
sent = backend.send_message("race", "sent-during-deletes")
sent_done.set()
second.join()
present = any(m.id == sent.id for m in q._messages)
print("present" if present else "lost")
