"""Fixes two races in moto 5's SQS, each of which loses a message that SQS
accepted:

- Queue.delete_message rebuilds the queue's message list without the lock
  that add_message takes, so two deletes that overlap, with a send between
  them, leave the list without the sent message;
- receive_message moves a message to the dead-letter queue by removing it
  from the list in place, which makes a delete iterating that list at the
  same moment skip the next message and drop it from the rebuilt list.

Both now hold the queue's lock. A long poll still lets sends in: it waits on
that lock's condition, which releases it.
"""


def apply():
    from moto.sqs import models

    delete = models.Queue.delete_message

    def delete_message(self, receipt_handle):
        with self._messages_lock:
            return delete(self, receipt_handle)

    models.Queue.delete_message = delete_message

    receive = models.SQSBackend.receive_message

    def receive_message(self, queue_name, *args, **kwargs):
        queue = self.get_queue(queue_name)
        with queue._messages_lock:
            return receive(self, queue_name, *args, **kwargs)

    models.SQSBackend.receive_message = receive_message
