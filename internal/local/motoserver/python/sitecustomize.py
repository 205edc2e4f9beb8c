# Loaded by moto_server's Python at start-up: internal/local/motoserver puts
# this folder on PYTHONPATH. It applies sqs_once_races (two races in moto's
# SQS that lose messages) and sqs_once_speed (costs that make moto slow
# under load, without changing an answer), then writes the marker file
# named by SQS_ONCE_MOTO_PATCHED: Start refuses a server without it.
import os
import sys

try:
    import sqs_once_races
    import sqs_once_speed

    sqs_once_races.apply()
    sqs_once_speed.apply()
except Exception as exc:  # the Go side refuses to run without the marker
    sys.stderr.write("sqs-once: moto_server not patched: %r\n" % (exc,))
else:
    _mark = os.environ.get("SQS_ONCE_MOTO_PATCHED")
    if _mark:
        with open(_mark, "w") as f:
            f.write("patched\n")
