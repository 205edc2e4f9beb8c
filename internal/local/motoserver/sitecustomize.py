# Loaded by moto_server's Python at start-up (internal/local/motoserver puts
# this file's directory on PYTHONPATH). It fixes one race in moto 5's SQS:
# Queue.delete_message rebuilds the queue's message list without the lock
# that add_message takes, so two deletes that overlap, with a send between
# them, leave the list without the sent message: SQS accepted it and nobody
# ever receives it. Holding the same lock makes each rebuild atomic.
import os
import sys


def _patch():
    from moto.sqs import models

    delete = models.Queue.delete_message

    def delete_message(self, receipt_handle):
        with self._messages_lock:
            return delete(self, receipt_handle)

    models.Queue.delete_message = delete_message


try:
    _patch()
except Exception as exc:  # the Go side refuses to run without the marker
    sys.stderr.write("sqs-once: moto SQS delete race not patched: %r\n" % (exc,))
else:
    _mark = os.environ.get("SQS_ONCE_MOTO_PATCHED")
    if _mark:
        with open(_mark, "w") as f:
            f.write("patched\n")
