"""What the pickle protocol changes for one pandas result, at the serializer: distributed's
pickle_dumps with the comm context the scheduler pins (protocol 4) and without it."""

import tracemalloc

import numpy as np
import pandas as pd
from distributed.protocol.serialize import pickle_dumps

n = 116_508  # 2.67 MiB, three Arrow-backed columns
frame = pd.DataFrame({"a": np.arange(n), "b": np.arange(n) * 0.5, "c": np.arange(n)})
frame = frame.convert_dtypes(dtype_backend="pyarrow")
size = frame.memory_usage().sum()

for protocol in (4, 5):
    tracemalloc.start()
    header, frames = pickle_dumps(frame, context={"pickle-protocol": protocol})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"protocol {protocol}: {len(frames)} frames, pickle stream {len(frames[0]) / size:.2f}x "
        f"the result, peak {peak / size:.1f}x the result"
    )
