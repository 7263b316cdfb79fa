"""CallPlan: what a function's calls at one size need, worked out once.

The recorded host program (vm/program.py), each argument's type and upload buffer, the results'
types and buffers, the transient arena and readback area the program uses, and how a call's
buffers become its binding table. A static function has one plan, made at load. A function
with run-time sizes has one per distinct set of symbol values it is called with (Function keeps
the most recent few): its buffers then come in size classes (buffer_pool.size_class), so that
calls of nearby sizes share them.
"""

from __future__ import annotations

from operator import itemgetter

from pyree.runtime.module.verifier import BINDING_ACCESS, BUFFER_KINDS, COMMAND_KINDS
from pyree.runtime.vm.buffer_pool import size_class
from pyree.runtime.vm.program import record
from pyree.runtime.vm.tensor_type import TensorType

KDL_CPU = 1  # DLPack's host device type
# Host arrays at least this large are read in place on devices whose memory is host memory
# (the CPU drivers): below it, copying into a pooled buffer costs less than importing one
# (measured on a*b+a over two arguments on local-task: the two cross between 64 and 256 KiB).
IMPORT_MIN_BYTES = 128 << 10


class CallPlan:
    __slots__ = ("values", "program", "specs", "same_types", "result_types", "result_keys",
                 "own_keys", "table_of", "submits_only", "recycled", "ties")

    def __init__(self, tree, loaded, values: tuple | None = None):
        """``tree``: a verified static FunctionT (a dynamic function's at ``values``)."""
        pool = loaded.pool
        varies = values is not None
        self.values = values  # the symbol values it is for; None: a static function's
        self.program = program = record(tree, loaded.device, loaded.executable, loaded.exports)
        # per-argument (type, shape, upload's pool key, whether a numpy array of it is read in
        # place), looked up once, not on every call
        host_memory = loaded.device.dlpack is not None and loaded.device.dlpack[0] == KDL_CPU
        arguments = [TensorType.from_fb(t) for t in tree.arguments]
        self.specs = [(t, t.shape, pool.key(t.nbytes, varies),
                       host_memory and t.nbytes >= IMPORT_MIN_BYTES) for t in arguments]
        # per argument, a TensorType object known to equal its type: comparing a DeviceArray's
        # type by identity spares a Record comparison on every call
        self.same_types = arguments
        self.result_types = [TensorType.from_fb(t) for t in tree.results]
        updated = _results_kernels_update(tree, loaded.exports)
        self.result_keys = [pool.key(size, varies, mappable=r not in updated)
                            for r, size in enumerate(tree.resultSizes)]
        # The function's own transient arena and readback area (Function._own): the keys of
        # what this program needs of each, None where it needs none.
        # (The arena is the device's alone: never mapped memory, which kernels may reach more
        # slowly.)
        transient = size_class(tree.transientSize) if varies else tree.transientSize
        self.own_keys = ((transient, False) if ("transient", 0) in program.sources else None,
                         pool.key(tree.readbackSize, varies) if tree.readbackSize else None)
        # binding-table slot -> index into [*arguments, *results, transient, readback, *constants]
        first = {"argument": 0, "result": len(arguments),
                 "transient": len(arguments) + len(self.result_keys)}
        first["readback"] = first["transient"] + 1
        first["constant"] = first["transient"] + 2
        slot_items = [first[kind] + index for kind, index in program.sources]
        # items -> binding table, in C (itemgetter of one index returns the item itself)
        self.table_of = itemgetter(*slot_items) if len(slot_items) > 1 else \
            (lambda items, i=slot_items[0]: (items[i],)) if slot_items else (lambda items: ())
        self.submits_only = program.submits_only
        self.ties = program.ties  # (result, argument, its copy) per tied result
        self.recycled: list[list] = []  # Function's recycled results' lists of result_keys

    def fits(self, own: list) -> bool:
        """Whether the function's own arena and readback area (``own``) hold what this needs."""
        for key, buffer in zip(self.own_keys, own):
            if key is not None and (buffer is None or buffer.size < key[0]):
                return False
        return True


def _results_kernels_update(tree, exports) -> set[int]:
    """The results a dispatch binds read_write (a scatter's atomics: read-modify-writes into
    the result). Those stay in device memory at any size: a small result is otherwise mapped
    host memory (buffer_pool.mapped), and atomics on it crossed the bus, an i8 index_add of
    20000 x 7 updates going from 35 ms to past ten seconds on the H200 (BENCHMARKS.md,
    twenty-eighth session). A result a later kernel only reads stays mapped: one pass over at
    most 16 KiB, as before."""
    updated = set()
    for command in tree.commands or ():
        if COMMAND_KINDS[command.kind] != "dispatch" or not exports:
            continue
        layouts = exports[command.dispatch.kernel].bindings or ()
        for ref, layout in zip(command.dispatch.bindings or (), layouts):
            if BUFFER_KINDS[ref.kind] == "result" and BINDING_ACCESS[layout.access] == "read_write":
                updated.add(ref.index)
    return updated
