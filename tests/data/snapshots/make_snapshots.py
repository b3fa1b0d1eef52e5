#!/usr/bin/env python3
"""Writes the memory snapshots of tests/snapshot_reader_test.cpp with CPython's own pickle.

torch.cuda.memory._dump_snapshot (torch/cuda/memory.py) is `pickle.dump(_snapshot(), f)`: Python's
pickler at its default protocol (pickle.DEFAULT_PROTOCOL: 4 on Python 3.8-3.13, 5 from 3.14). The
dict below has the shape _snapshot() returns (torch/cuda/memory.py _snapshot docstring;
torch/csrc/cuda/Module.cpp THCPModule_memorySnapshot builds it): segments with their blocks,
device_traces per device, allocator_settings. As torch does, blocks without a stack share one empty
`frames` list and blocks allocated at one call site share one frames list, so the pickler memoizes
them (BINGET / LONG_BINGET of a list), and repeated strings are memoized too.

Run from this directory: python3 make_snapshots.py  (writes python_p2.pickle, python_p4.pickle and the fuzz seeds)
"""
import pickle

MiB = 1 << 20
A = 0x7F0000000000          # segment A (device 0, large pool)
B = 0x7F0001400000          # segment B (device 0, small pool)
C = 0x7F1000000000          # segment C (device 1)
D = 0x7F0002000000          # segment D (device 0), made and given back inside the trace

empty = []                  # torch: one empty_frames list for every block without context
unwind = {"filename": "??", "line": 0, "name": "unwind::unwind()"}  # dropped by _memory_viz._frame_filter
adamw = [unwind, {"filename": "/opt/conda/lib/python3.11/site-packages/torch/optim/adamw.py", "line": 150,
                  "name": "_init_group"},
         {"filename": "train.py", "line": 41, "name": "main"}]
linear = [{"filename": "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py", "line": 125,
           "name": "forward"}]

def block(addr, size, requested, state, frames):
    return {"address": addr, "size": size, "requested_size": requested, "state": state, "frames": frames}

segments = [
    {"device": 0, "address": A, "total_size": 20 * MiB, "allocated_size": 8 * MiB, "active_size": 12 * MiB,
     "requested_size": 8388000, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
     "is_expandable": False, "frames": empty,
     "blocks": [block(A, 8 * MiB, 8388000, "active_allocated", adamw),
                block(A + 8 * MiB, 4 * MiB, 4194000, "active_pending_free", adamw),
                block(A + 12 * MiB, 8 * MiB, 8 * MiB, "inactive", empty)]},
    {"device": 0, "address": B, "total_size": 2 * MiB, "allocated_size": 1536, "active_size": 1536,
     "requested_size": 1424, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
     "is_expandable": False, "frames": empty,
     "blocks": [block(B, 512, 400, "active_allocated", linear),
                block(B + 512, 1024, 1024, "active_allocated", empty),   # frames only in the trace
                block(B + 1536, 2 * MiB - 1536, 2 * MiB - 1536, "inactive", empty)]},
    {"device": 1, "address": C, "total_size": 40 * MiB, "allocated_size": 40 * MiB, "active_size": 40 * MiB,
     "requested_size": 40 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
     "is_expandable": False, "frames": linear,
     "blocks": [block(C, 40 * MiB, 40 * MiB, "active_allocated", linear)]},
]

t = 1_722_000_000_000_000    # time_us: microseconds since the epoch (LONG1)
def entry(action, addr, size, frames=empty):
    global t
    t += 7
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": frames}

trace0 = [entry("segment_alloc", A, 20 * MiB), entry("alloc", A, 8388000, adamw),
          entry("segment_alloc", B, 2 * MiB), entry("alloc", B, 400, linear),
          entry("alloc", B + 512, 1024, [{"filename": "model.py", "line": 7, "name": "embed"}]),
          entry("segment_alloc", D, 64 * MiB), entry("alloc", D, 64 * MiB - 4096)]
# 700 short-lived tensors in D: the trace passes 64 KiB, so protocol 4 writes several FRAMEs
for k in range(700):
    trace0 += [entry("alloc", D + 4096 * (k % 8), 4000), entry("free_requested", D + 4096 * (k % 8), 4000),
               entry("free_completed", D + 4096 * (k % 8), 4000)]
trace0 += [entry("free_requested", D, 64 * MiB - 4096), entry("free_completed", D, 64 * MiB - 4096),
           entry("segment_free", D, 64 * MiB),
           entry("alloc", A + 8 * MiB, 4194000, adamw), entry("free_requested", A + 8 * MiB, 4194000, adamw)]
late = {"filename": "late_file_name_memoized_after_256_entries.py", "line": 1, "name": "late"}
trace0 += [entry("snapshot", 0, 0, [late]), entry("snapshot", 0, 0, [late])]
trace1 = [entry("alloc", C, 40 * MiB, linear)]   # recording began after segment C was made

snapshot = {"segments": segments, "device_traces": [trace0, trace1],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False,
                                   "release_lock_on_cudamalloc": False, "pinned_num_register_threads": 1,
                                   "pinned_use_cuda_host_register": False, "roundup_power2_divisions": {"1": 0}}}

for proto in (2, 4):
    with open(f"python_p{proto}.pickle", "wb") as f:
        pickle.dump(snapshot, f, protocol=proto)

# The fuzz target's seeds (tests/fuzz/seeds/snapshot): one segment, an expandable-segment map and unmap, an OOM.
small_frames = [unwind, {"filename": "/x/torch/nn/functional.py", "line": 2143, "name": "linear"}]
S = 0x7F0000000000
small = {"segments": [{"device": 0, "address": S, "total_size": 2 * MiB, "allocated_size": MiB + 512,
                       "active_size": MiB + 512, "requested_size": MiB + 400, "stream": 0, "segment_type": "large",
                       "segment_pool_id": (0, 0), "is_expandable": False, "frames": empty,
                       "blocks": [block(S, MiB, MiB, "active_allocated", small_frames),
                                  block(S + MiB, 512, 400, "active_allocated", empty),
                                  block(S + MiB + 512, MiB - 512, MiB - 512, "inactive", empty)]}],
         "device_traces": [[
             {"action": "segment_alloc", "addr": S, "size": 2 * MiB, "stream": 0, "time_us": 1722000000000000, "frames": empty},
             {"action": "alloc", "addr": S, "size": MiB, "stream": 0, "time_us": 1722000000000007, "frames": small_frames},
             {"action": "alloc", "addr": S + MiB, "size": 400, "stream": 0, "time_us": 1722000000000014,
              "frames": [{"filename": "m", "line": 0, "name": "forward:logits"}]},
             {"action": "segment_map", "addr": S + 2 * MiB, "size": MiB, "stream": 0, "time_us": 1, "frames": empty},
             {"action": "segment_unmap", "addr": S + 2 * MiB, "size": MiB, "stream": 0, "time_us": 2, "frames": empty},
             {"action": "oom", "device_free": 0, "size": MiB, "stream": 0, "time_us": 3, "frames": empty}]],
         "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                "garbage_collection_threshold": 0.5, "max_split_size": -1}}
for proto in (2, 4):
    with open(f"../../fuzz/seeds/snapshot/small_p{proto}.pickle", "wb") as f:
        pickle.dump(small, f, protocol=proto)
