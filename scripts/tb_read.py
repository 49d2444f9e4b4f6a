"""Reads TensorBoard event files back with TensorBoard's own reader, as `tensorboard --logdir`
would, and prints what it found as JSON. Run with the venv of scripts/tb_venv.sh:

    target/tb-venv/bin/python scripts/tb_read.py LOGDIR

Output: {"runs": {RUN: {TAG: [[step, value, wall_time], ...]}}, "records": N, "files": N}
RUN is the run's folder relative to LOGDIR (TensorBoard's run name). Every record of every
event file is first read with TensorBoard's record reader, which checks both masked CRC-32C
checksums of each record; a bad checksum or a truncated record is an error here, where the
accumulator alone would skip it silently. Exit status 1 on any error.
"""

import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator, event_multiplexer
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.tensorflow_stub import errors, pywrap_tensorflow


def strict_records(path):
    """Every record of one file, each checked against its checksums; the Events parsed."""
    reader = pywrap_tensorflow.PyRecordReader_New(path)
    events = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return events
        event = event_pb2.Event()
        event.ParseFromString(reader.record())
        events.append(event)


def main(logdir):
    files, records = 0, 0
    for folder, _, names in os.walk(logdir):
        for name in sorted(n for n in names if "tfevents" in n):
            events = strict_records(os.path.join(folder, name))
            if not events or events[0].file_version != "brain.Event:2":
                raise ValueError(f"{name}: the first event is not file_version brain.Event:2")
            files += 1
            records += len(events)
    mux = event_multiplexer.EventMultiplexer(size_guidance={event_accumulator.SCALARS: 0})
    mux.AddRunsFromDirectory(logdir)
    mux.Reload()
    runs = {}
    for run, tags in mux.Runs().items():
        runs[run] = {
            tag: [[e.step, e.value, e.wall_time] for e in mux.Scalars(run, tag)]
            for tag in tags[event_accumulator.SCALARS]
        }
    json.dump({"runs": runs, "records": records, "files": files}, sys.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tb_read.py LOGDIR")
    try:
        main(sys.argv[1])
    except Exception as e:  # noqa: BLE001 - the test prints whatever went wrong
        sys.exit(f"tb_read: {type(e).__name__}: {e}")
