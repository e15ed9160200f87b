#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Writes the TensorBoard fixtures of tests/tools/logs_test.cpp with TensorBoard's own event
# writer (pip install tensorboard; no TensorFlow or PyTorch needed), and the values it wrote to
# a CSV beside them, which the test compares the C++ reader with.
#
#   scripts/make-tensorboard-fixture.py [OUT_DIR]      (default tests/tools/data/tensorboard)
#
# Two event files, read in name order as one run:
#   events.out.tfevents.1.simple  - TF1 / PyTorch style: Summary.Value.simple_value
#   events.out.tfevents.2.tensor  - TF2 style: Summary.Value.tensor, a scalar TensorProto, as
#                                   float_val, as double_val and as tensor_content
# plus values.csv: step,tag,value (the value as Python's repr of the float the file holds).
import math
import os
import shutil
import struct
import sys
import tempfile

from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "tools", "data", "tensorboard")
os.makedirs(out, exist_ok=True)
rows = []  # (step, tag, value as the reader must see it)


def f32(x):
    """The value a float32 field holds."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def write(name, events):
    tmp = tempfile.mkdtemp()
    w = EventFileWriter(tmp)
    for e in events:
        w.add_event(e)
    w.close()
    (written,) = os.listdir(tmp)
    shutil.move(os.path.join(tmp, written), os.path.join(out, name))
    shutil.rmtree(tmp)


def simple(step, tag, x):
    rows.append((step, tag, f32(x)))
    return event_pb2.Event(wall_time=1.7e9 + step, step=step,
                           summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=x)]))


def scalar_tensor(step, tag, x, style):
    meta = summary_pb2.SummaryMetadata(plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    shape = tensor_shape_pb2.TensorShapeProto()  # rank 0
    if style == "float_val":
        t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, float_val=[x])
        rows.append((step, tag, f32(x)))
    elif style == "double_val":
        t = tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, tensor_shape=shape, double_val=[x])
        rows.append((step, tag, x))
    else:  # tensor_content, as tf.make_tensor_proto writes numpy scalars
        t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape=shape, tensor_content=struct.pack("<f", x))
        rows.append((step, tag, f32(x)))
    return event_pb2.Event(wall_time=1.7e9 + step, step=step,
                           summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, metadata=meta, tensor=t)]))


# Steps 0-4: TF1 style. A zero, a NaN and an Inf are planted; step 3 logs no loss.
first = []
for step in range(5):
    if step != 3:
        loss = [2.5, 2.25, math.nan, None, math.inf][step]
        first.append(simple(step, "train/loss", loss))
    first.append(simple(step, "train/learning_rate", 1e-3 * (step + 1)))
    first.append(simple(step, "train/grad_norm", 0.5 + step / 8))
    first.append(simple(step, "Custom/Thing", step - 1.0))  # +0.0 at step 1
first.append(simple(4, "eval/loss", 2.75))
# A histogram value (not a scalar): the reader skips it.
first.append(event_pb2.Event(step=4, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(
    tag="weights", histo=summary_pb2.HistogramProto(min=0, max=1, num=2, sum=1, sum_squares=1))])))
write("events.out.tfevents.1.simple", first)

# Steps 5-7: TF2 style tensors (the same tags, as a run resumed under TF2 would write), three encodings.
second = []
for step in range(5, 8):
    second.append(scalar_tensor(step, "train/loss", 2.0 - step / 16, "float_val"))
    second.append(scalar_tensor(step, "train/learning_rate", 1e-4 / step, "double_val"))
    second.append(scalar_tensor(step, "train/grad_norm", 0.25 * step, "tensor_content"))
# A non-scalar tensor (shape [2]): skipped.
second.append(event_pb2.Event(step=7, summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(
    tag="vector", tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0, 2.0],
                                                tensor_shape=tensor_shape_pb2.TensorShapeProto(
                                                    dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=2)])))])))
write("events.out.tfevents.2.tensor", second)

with open(os.path.join(out, "values.csv"), "w") as f:
    f.write("step,tag,value\n")
    for step, tag, x in rows:
        f.write(f"{step},{tag},{x!r}\n")
print(f"wrote {len(rows)} scalars to {out}")
