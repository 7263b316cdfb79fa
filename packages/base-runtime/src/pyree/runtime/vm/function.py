"""Function: one exported function of a loaded module, callable with numpy arrays (or HostArrays,
which the tools pass so that they need no numpy).

A call checks its arguments, uploads host arguments (a large host array, or a DLPack tensor in
the device's memory, is read in place instead, and the call then finishes before it returns, as
the caller may change it next), takes results from the module's buffer pool (from the
function's own earlier, collected results first: see _recycle), uses the function's own
transient arena, and submits the recorded command buffers with that call's binding table,
each step waiting on the last one on the function's own timeline semaphore. What a call at one
size needs (the recorded command buffers, its buffers' keys) is a CallPlan: a static function
has one; a function with run-time sizes (schema 1.5) binds its symbols from the arguments'
shapes and keeps the plans of its last MAX_SIZES sizes (vm/sizes.py checks and evaluates them),
so a call of a size seen recently costs what a static call costs. Results come back
as DeviceArrays that become ready when the timeline reaches the call's last value; checks and
branches (the host program's control flow: loops and conditionals on values computed on the
device, as IREE's VM runs them) run on the host between command buffers, after a wait. In
steady state a call with numpy arguments crosses the driver ABI once to submit and once to
wait, plus once per upload and per result read of a buffer too large to be mapped
(vm/buffer_pool.py); calls queued back to back, each result dropped unwaited, cross it once.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict

from pyree.runtime.errors import CheckError, DriverError, InvocationError, PyreeError
from pyree.runtime.hal.device import CommandBuffer
from pyree.runtime.vm.buffer_pool import CallResources, take_unread
from pyree.runtime.vm.call_plan import CallPlan
from pyree.runtime.vm.checks import CheckFailure, CheckStep, Operand, evaluate
from pyree.runtime.vm.device_array import DeviceArray, Donated
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.program import BranchStep
from pyree.runtime.vm.reflection import SizeSymbol, declared_dims, reflection
from pyree.runtime.vm.tensor_type import TensorType, describe

MAX_RECYCLED = 4  # collected results' buffers a function keeps per size for its next calls
# Sizes whose recordings a function with run-time sizes keeps (least recently called out
# first): enough for a server's few batch sizes or a bucketed sequence length, few enough that
# the recordings (and, on CUDA, their graphs) stay small.
MAX_SIZES = 8


class Function:
    # The active trace (vm/trace.py), or None: while one is active every call takes its traced
    # path, which times each stage and each command; one test per call, none per command.
    _trace = None

    def __init__(self, loaded, tree):
        self.name: str = tree.name
        self.location: str = tree.location
        self.argument_types = [TensorType.from_fb(t) for t in tree.arguments]
        self.result_types = [TensorType.from_fb(t) for t in tree.results]
        # What ``?`` leaves out: the run-time sizes (none for a static function) and each dim's
        # size or formula over them, so a caller can tell two ``?`` dims that are one size.
        self.symbols = [SizeSymbol.from_fb(s) for s in tree.symbols or []]
        names = [s.name for s in self.symbols]
        self.argument_dims = [declared_dims(t, names) for t in tree.arguments]
        self.result_dims = [declared_dims(t, names) for t in tree.results]
        # per result, the argument it is tied to (schema 1.10: updated in place), or None
        ties = [int(a) for a in tree.tiedResults or ()]
        self.tied_results = [None if a == -1 else a for a in ties] or [None] * len(tree.results)
        self._loaded = loaded
        # results dropped unwaited, by pool key, for the next calls (see _recycle)
        self._recycled: dict[tuple[int, bool], list] = {}
        if tree.symbols:
            from pyree.runtime.vm.sizes import Sizes

            self._sizes = Sizes(tree)
            self._plan = None
            self._plans: OrderedDict[tuple, CallPlan] = OrderedDict()  # by symbol values
            self._plans_lock = threading.Lock()
            self._binders = self._sizes.binders
        else:
            self._sizes = None
            self._plan = self._add_plan(CallPlan(tree, loaded))
        # binding-table items: [*arguments, *results, transient, readback, *constants]
        results = len(tree.results)
        first = {"argument": 0, "result": len(tree.arguments),
                 "transient": len(tree.arguments) + results}
        first["readback"] = first["transient"] + 1
        first["constant"] = first["transient"] + 2
        self._item_base = first
        # The transient arena and the readback buffer are the function's own, taken on its first
        # call: each call's work waits for the previous call's (the function's timeline), and
        # only the device, and this call's host code after a wait, touch them, so the next call
        # may reuse them at once. Taken from the pool per call, they rotated through ever more
        # buffers once calls were queued faster than the device finished them: new binding
        # tables, new CUDA graphs (a softmax's queued calls took twice as long once the host
        # path got faster than the GPU). With run-time sizes they are as large as the largest
        # size seen needs (replaced, under the lock, by a larger one when a call needs it).
        self._own: list | None = None  # [transient arena or None, readback area or None]
        self._timeline = loaded.device.create_semaphore(0)
        self._value = 0
        # Reentrant: a wait inside _run_steps that fails replaces the timeline under it.
        self._lock = threading.RLock()

    def _add_plan(self, plan: CallPlan) -> CallPlan:
        """Registers a new plan's result keys for recycling (see _recycle)."""
        plan.recycled = [self._recycled.setdefault(key, []) for key in plan.result_keys]
        return plan

    @property
    def _program(self):
        """A static function's recorded host program (tests look at it)."""
        return self._plan.program

    @property
    def _submits_only(self) -> bool:
        """Whether a static function's calls need no host step between submits."""
        return self._plan.submits_only

    def __repr__(self) -> str:
        args = ", ".join(map(str, self.argument_types))
        results = ", ".join(map(str, self.result_types))
        return f"<Function {self.name}({args}) -> ({results})>"

    @property
    def reflection(self) -> dict[str, str]:
        """IREE's function reflection (``vm_function.reflection``), from the declared types."""
        return reflection(self.name, self.argument_types, self.result_types)

    @property
    def vm_function(self) -> Function:
        """IREE's ``FunctionInvoker.vm_function``: here the function itself (name, reflection)."""
        return self

    def __call__(self, *args, donate=()):
        """Runs the function; a failing check raises CheckError. ``donate``: the index or
        indices of arguments the caller gives up (True: all). A DeviceArray given for an argument that a
        result is tied to (``tied_results``) then becomes that result's buffer, updated in
        place, and is no longer usable; where it cannot (another call still reads it, it is
        not a result of this module's functions, or it is passed twice) it is copied, as
        without ``donate``, and stays usable (as JAX's ``donate_argnums``)."""
        results = self._run(args, None, None, donate) if self._trace is None else \
            self._trace.call(self, args, None, donate)
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def run_checks(self, *args) -> list[CheckFailure]:
        """Runs the function and returns every failed check (empty when all hold)."""
        failures: list[CheckFailure] = []
        results = self._run(args, failures) if self._trace is None else \
            self._trace.call(self, args, failures)
        for result in results:
            result.wait()
        return failures

    # -- one call ------------------------------------------------------------------------------

    def _argument(self, index: int, arg, spec, same_types: list, waits: list, inputs: list,
                  uploads: list, imported: list):
        """The device buffer this call reads for ``arg`` as it is (another library's memory read
        in place goes to ``imported`` too), or the host array to upload (its index then goes to
        ``uploads``)."""
        t, shape, _, in_place = spec
        if isinstance(arg, HostArray):
            if arg.type is not t and arg.type != t:
                raise InvocationError(f"function '{self.name}' argument {index}: expected {t}, "
                                      f"got {arg.type}")
            uploads.append(index)
            return arg
        if isinstance(arg, DeviceArray):
            if arg.type is not t and arg.type != t:
                raise InvocationError(f"function '{self.name}' argument {index}: expected {t}, "
                                      f"got {arg.type}")
            same_types[index] = arg.type
            if arg.buffer.device is self._loaded.device:
                if not arg._done:
                    waits.append(arg.ready)
                inputs.append(arg)
                return arg.buffer
            arg = arg.to_host()
        import numpy as np

        dtype = t.dtype
        if not isinstance(arg, np.ndarray) and hasattr(arg, "__dlpack__"):
            from pyree.runtime.vm.dlpack import import_argument

            arg = import_argument(arg, self._loaded.device,
                                  f"function '{self.name}' argument {index}", shape, dtype)
            if not isinstance(arg, np.ndarray):  # a buffer on this device
                imported.append(arg)
                return arg
        if isinstance(arg, np.ndarray):
            array = arg
        else:  # a Python value: converted where no value changes (vm/conversion.py)
            from pyree.runtime.vm.conversion import convert

            try:
                array = convert(arg, t)
            except ValueError as e:
                raise InvocationError(f"function '{self.name}' argument {index}: {e}") from None
        if array.dtype != dtype:  # an integer array of the argument's width is read as it
            from pyree.runtime.vm.conversion import same_width

            array = same_width(array, t)
        if array.shape != shape or array.dtype != dtype:
            raise InvocationError(f"function '{self.name}' argument {index}: expected {t}, "
                                  f"got {describe(array)}")
        if in_place and array.flags.c_contiguous and array.ctypes.data % dtype.itemsize == 0:
            buffer = self._loaded.device.import_device(array.ctypes.data, array.nbytes, array)
            imported.append(buffer)
            return buffer
        uploads.append(index)
        return array

    def _run(self, args: tuple, failures: list | None, hooks: tuple | None = None,
             donate=()) -> list[DeviceArray]:
        """One call. ``hooks``: a traced call's (submit, wait, read, check), see _run_steps;
        ``donate``: see __call__."""
        if len(args) != len(self.argument_types):
            expected = ", ".join(map(str, self.argument_types)) or "none"
            raise InvocationError(f"function '{self.name}' takes {len(self.argument_types)} "
                                  f"arguments ({expected}), got {len(args)}")
        plan = self._plan
        if plan is None:
            args, plan = self._plan_for(args)
        specs = plan.specs
        loaded = self._loaded
        pool = loaded.pool
        device = loaded.device
        waits: list = []
        inputs: list = []
        uploads: list = []
        imported: list = []
        items = []
        same_types = plan.same_types
        numpy = sys.modules.get("numpy")  # not imported: no argument is a numpy array
        ndarray = numpy.ndarray if numpy is not None else None
        try:
            for i, arg in enumerate(args):  # the common cases inline, the rest in _argument
                kind = type(arg)
                if kind is DeviceArray and arg.type is same_types[i] and arg.buffer.device is device:
                    if not arg._done:
                        waits.append(arg.ready)
                    inputs.append(arg)
                    items.append(arg.buffer)
                    continue
                spec = specs[i]
                if kind is ndarray and arg.shape == spec[1] and arg.dtype == spec[0].dtype \
                        and not spec[3]:
                    uploads.append(i)
                    items.append(arg)
                else:
                    items.append(self._argument(i, arg, spec, same_types, waits, inputs, uploads,
                                                imported))
        except InvocationError:
            if plan.values is not None:  # name the dim that disagrees, where one does
                for i, arg in enumerate(args):
                    shape = getattr(arg, "shape", None)
                    if shape is not None:
                        self._sizes.explain(i, tuple(shape), plan.values)
            raise
        # A tied result starts as its argument: the argument's own buffer where it is donated,
        # the host array uploaded into the result (which the argument then names too: the
        # host program is right with the two one buffer, and the caller's array is untouched),
        # else a copy of it, submitted first.
        donated: dict[int, object] = {}
        into_results: list[tuple[int, int]] = []
        copies = []
        if plan.ties and donate is not True and isinstance(donate, int):
            donate = (donate,)
        for r, a, copy in plan.ties:
            if a in uploads:
                uploads.remove(a)
                into_results.append((r, a))
                continue
            if donate and (donate is True or a in donate):
                buffer = self._donated(args, a, inputs, plan.result_keys[r])
                if buffer is not None:
                    donated[r] = buffer
                    continue
            copies.append(copy)
        # Every buffer the call takes from the pool, in one go: results and uploads.
        # CallResources gives the call's own buffers back in reverse, and results come back
        # after them, so the next call gets the same buffer in each role: the driver then sees
        # the binding table it recorded for (buffers rotating between roles would look new).
        keys = plan.result_keys
        if uploads:
            keys = keys + [specs[i][2] for i in uploads]
        taken = self._take(plan, keys, donated) if donated or any(plan.recycled) \
            else pool.take_all(keys)
        count = len(plan.result_keys)
        results = taken[:count]
        scratch = taken[count:]  # the uploads
        if uploads:
            for i, buffer in zip(uploads, scratch):
                _upload(buffer, items[i], specs[i][0])
                items[i] = buffer
        for r, a in into_results:
            _upload(results[r], items[a], specs[a][0])
            items[a] = results[r]
        items += results
        with self._lock:
            # the own buffers and the table under the lock: a larger size replaces them (its
            # old ones then go back once the calls submitted so far are done)
            own = self._own
            if own is None or plan.values is not None and not plan.fits(own):
                own = self._own_for(plan)
            items += own
            items += loaded.constants
            table = plan.table_of(items)
            semaphore, value = self._timeline, self._value
            try:
                if plan.submits_only and hooks is None:  # the common case
                    for step in copies + plan.program.steps if copies else plan.program.steps:
                        waits.append((semaphore, value))
                        device.queue_submit(step, table, waits, [(semaphore, value + 1)])
                        value, waits = value + 1, []
                        self._value = value
                else:
                    if copies:  # (command buffers only: no host step among them)
                        value = self._run_steps(copies, semaphore, value, table, waits, items,
                                                failures, hooks)
                        waits = []
                    value = self._run_steps(plan.program.steps, semaphore, value, table, waits,
                                            items, failures, hooks)
            except DriverError:  # a failed submission failed the timeline's later values
                self._timeline_failed(semaphore)
                raise
        ready = (semaphore, value)
        call = CallResources(pool, scratch, inputs, self, ready)
        arrays = [DeviceArray(buffer, t, ready, call)
                  for buffer, t in zip(results, plan.result_types)]
        # Nothing to read later: surface failures now. Memory read in place is the caller's,
        # who may write it once the call returns (as after a copy): finish reading it first.
        if not arrays or imported:
            (self._wait if hooks is None else hooks[1])(semaphore, value)
            for array in arrays:
                array._done = True
            call.finished()
        return arrays

    def _donated(self, args: tuple, a: int, inputs: list, key: tuple):
        """Argument ``a``'s buffer, taken from its DeviceArray for the result tied to it, or
        None where it cannot be (see __call__). The array is then spent; the call still waits
        for the work that computes it."""
        arg = args[a]
        call = getattr(arg, "_call", None)
        buffer = getattr(arg, "buffer", None)
        if not isinstance(arg, DeviceArray) or call is None or call.function._loaded \
                is not self._loaded or getattr(buffer, "pool_key", None) is None \
                or buffer.size < key[0] or sum(x is arg for x in args) != 1:
            return None
        if not take_unread(arg, buffer, Donated(self.name)):
            return None
        inputs[:] = [x for x in inputs if x is not arg]
        return buffer

    def _own_for(self, plan: CallPlan) -> list:
        """The function's own transient arena and readback area, taken for ``plan`` where it
        has none or they are too small (holding ``_lock``). Replaced ones go back to the pool
        once the work submitted so far is done: only it can still use them."""
        own = list(self._own or (None, None))
        missing = [(i, key) for i, (key, buffer) in enumerate(zip(plan.own_keys, own))
                   if key is not None and (buffer is None or buffer.size < key[0])]
        replaced = [own[i] for i, _ in missing if own[i] is not None]
        for (i, _), buffer in zip(missing, self._loaded.pool.take_all([k for _, k in missing])):
            own[i] = buffer
        if replaced:
            self._loaded.pool.give_when_reached(replaced, self._timeline, self._value)
        self._own = own
        return own

    def _plan_for(self, args: tuple) -> tuple[tuple, CallPlan]:
        """(the arguments, Python values among them made arrays; the plan for their sizes),
        recorded on a size's first call; InvocationError when the sizes are out of bounds or
        disagree."""
        try:
            values = tuple([args[a].shape[d] for a, d in self._binders])
        except (AttributeError, IndexError, TypeError):
            args = tuple(self._as_array(i, arg) for i, arg in enumerate(args))
            for i, arg in enumerate(args):  # raises for a rank the binding cannot read
                self._sizes.explain_shape(i, tuple(arg.shape))
            values = tuple([int(args[a].shape[d]) for a, d in self._binders])
        with self._plans_lock:
            plan = self._plans.get(values)
            if plan is not None:
                self._plans.move_to_end(values)
                return args, plan
        args = tuple(self._as_array(i, arg) for i, arg in enumerate(args))
        self._sizes.check(values, [tuple(arg.shape) for arg in args])
        with self._plans_lock:  # one recording per size, also when threads race to it
            plan = self._plans.get(values)
            if plan is None:
                plan = self._add_plan(CallPlan(self._sizes.instance(values), self._loaded,
                                               values))
                self._plans[values] = plan
                if len(self._plans) > MAX_SIZES:
                    self._evict(self._plans.popitem(last=False)[1])
        return args, plan

    def _as_array(self, index: int, arg):
        """An argument without a shape (a Python value) as a numpy array of its element type."""
        if hasattr(arg, "shape"):
            return arg
        from pyree.runtime.vm.conversion import convert

        try:
            return convert(arg, self.argument_types[index])
        except ValueError as e:
            raise InvocationError(f"function '{self.name}' argument {index}: {e}") from None

    def _evict(self, plan: CallPlan) -> None:
        """A plan out of the cache (holding ``_plans_lock``): its results' recycled buffers go
        back to the pool where no kept plan shares their key. Its command buffers are
        released once the last call that holds it is done with them."""
        kept = {key for other in self._plans.values() for key in other.result_keys}
        for key in plan.result_keys:
            if key not in kept and key in self._recycled:
                free, buffers = self._recycled.pop(key), []
                while True:  # (a call of the evicted plan may still pop from it)
                    try:
                        buffers.append(free.pop())
                    except IndexError:
                        break
                if buffers:
                    self._loaded.pool.give_when_reached(buffers, self._timeline, self._value)

    @property
    def recorded_sizes(self) -> list[dict[str, int]]:
        """The sizes whose recordings a function with run-time sizes keeps, least recently
        called first (its symbols' values); empty for a static function."""
        if self._sizes is None:
            return []
        with self._plans_lock:
            return [dict(zip(self._sizes.names, values)) for values in self._plans]

    def _take(self, plan: CallPlan, keys: list, donated: dict | None = None) -> list:
        """The call's buffers for ``keys``: donated ones for their results, results' from
        ``_recycled`` where there are some, the rest from the pool."""
        count = len(plan.result_keys)
        taken = []
        for r, free in enumerate(plan.recycled):
            if donated and r in donated:
                taken.append(donated[r])
                continue
            try:
                taken.append(free.pop() if free else None)
            except IndexError:  # another thread took the last one
                taken.append(None)
        if None in taken or len(keys) > count:
            missing = [i for i, buffer in enumerate(taken) if buffer is None]
            taken += [None] * (len(keys) - count)
            missing += range(count, len(keys))
            for i, buffer in zip(missing, self._loaded.pool.take_all([keys[i] for i in missing])):
                taken[i] = buffer
        return taken

    def _recycle(self, buffer, ready: tuple, done: bool) -> None:
        """A collected result's buffer, kept for this function's next calls (MAX_RECYCLED per
        size; the rest go to the pool). One dropped unwaited (calls queued back to back drop
        each result as the next is made) is the next call's to write without asking the
        driver whether its work is done: that call's work waits for this timeline to pass
        ``ready`` anyway (or the timeline failed, and its work stopped); another function's
        call would need the driver's word, which the pool asks for. With run-time sizes only
        those are kept: a buffer seen done goes back to the pool, where calls of every size
        can use it (buffer_pool._larger), rather than wait here for its own size class."""
        free = self._recycled.get(buffer.pool_key)
        if free is not None and len(free) < MAX_RECYCLED and not (done and self._sizes):
            free.append(buffer)
        elif done:
            self._loaded.pool.give(buffer)
        else:
            self._loaded.pool.give_when_reached([buffer], *ready)

    def _run_steps(self, steps: list, semaphore, value: int, table: list, waits: list,
                   items: list, failures: list | None, hooks: tuple | None = None) -> int:
        """Runs ``steps`` from the first, following branches (holding ``_lock``); returns the
        timeline's last value. ``hooks``, a traced call's (submit, wait, read, check) used in
        place of the device's ``queue_submit``, ``_wait``, ``_read`` and ``_check``, time each."""
        submit, wait, read, check = hooks or (self._loaded.device.queue_submit, self._wait,
                                              self._read, self._check)
        pc = 0
        while pc < len(steps):
            step = steps[pc]
            pc += 1
            if isinstance(step, BranchStep) and step.condition is None:
                pc = step.target
                continue
            if not isinstance(step, CommandBuffer):  # the host reads values: wait for them
                for other, at in waits:  # arguments still being computed by other calls
                    other.wait(at)
                waits = []
                wait(semaphore, value)
            if isinstance(step, BranchStep):
                if bool(read(step.condition, items).values(1)[0]) != step.if_zero:
                    pc = step.target
            elif isinstance(step, CheckStep):
                failure = check(step, items)
                if failure is not None and failures is None:
                    raise CheckError([failure])
                if failure is not None:
                    failures.append(failure)
            else:
                waits.append((semaphore, value))
                submit(step, table, waits, [(semaphore, value + 1)])
                value, waits = value + 1, []
                self._value = value
        return value

    def _wait(self, semaphore, value: int) -> None:
        try:
            semaphore.wait(value)
        except PyreeError:
            self._timeline_failed(semaphore)
            raise

    def _timeline_failed(self, semaphore) -> None:
        """A failure fails every later value of a timeline: later calls start a fresh one."""
        with self._lock:
            if semaphore is self._timeline:
                self._timeline, self._value = self._loaded.device.create_semaphore(0), 0
                self._loaded._hold(self._timeline)

    def _read(self, operand: Operand, items: list) -> HostArray:
        t = operand.type
        out = bytearray(t.nbytes)
        if out:
            index = self._item_base[operand.kind] + (
                0 if operand.kind in ("transient", "readback") else operand.index)
            items[index].read_into(operand.offset, out)
        return HostArray(out, t)

    def _check(self, step: CheckStep, items: list) -> CheckFailure | None:
        rhs = self._read(step.rhs, items) if step.rhs is not None else None
        return evaluate(step, self._read(step.lhs, items), rhs)


def _upload(buffer, array, t: TensorType) -> None:
    """Copies an argument (a numpy array or a HostArray) into its buffer: in place where
    mapped, else through the driver."""
    if isinstance(array, HostArray):
        if buffer.size:
            buffer.write(0, array.data)
    elif buffer.host is not None:
        buffer.typed(t.dtype, t.shape)[...] = array
    elif buffer.size:
        import numpy as np

        buffer.write(0, np.ascontiguousarray(array).reshape(-1).view(np.uint8))
