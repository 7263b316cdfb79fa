"""local-task's worker loop, emitted into every kernel library so that threads hand a dispatch's
workgroups to each other without the GIL (drivers/local_task in the runtime calls it).

A Python thread that polls for work takes the GIL on every poll, and one that sleeps takes
longer to wake than a small dispatch runs, so a split dispatch cost more than one thread's
(BENCHMARKS.md, issue 11). In this loop a worker thread waits for work outside the GIL, polling
with ``pause`` and then ``sched_yield`` (a pure spin stalled calls whenever another process took
a core), and
returns to its Python caller, which sleeps on a lock, after ``IDLE_ROUNDS`` rounds without work.
The posting thread and the workers claim chunks of workgroups from one counter, so a worker that
another process keeps off its core leaves its share to the others instead of stalling a dispatch.
A job holds a kernel's function pointer, so any library's kernel runs through any library's loop.

The job is ``uint64_t job[JOB_FIELDS]``, one poster at a time (functions exported as below):

``POST(job, fn, state, count, chunk)``  posts workgroups [0, count) of ``fn`` (a
    pyree_cpu_kernel_fn_t; NULL tells the workers to return ``STOPPED``), to be claimed
    ``chunk`` at a time. The poster calls it only once the previous job has finished.
``RUN(job, rounds) -> 1 | 0``  the poster's part: runs chunks, then waits for the workers' for
    up to ``rounds`` polling rounds; 1 once every workgroup has run (STATUS is then final).
``WORKER(job, seen) -> seen``  a worker thread's loop: helps with each job posted after
    generation ``seen``; returns the last generation seen once idle for IDLE_ROUNDS rounds
    while BUSY is 0, or ``STOPPED``.
``EXECUTE(job, dispatches, n) -> i``  runs n dispatches one after another, each finished before
    the next starts (a command buffer's barriers): ``dispatches`` is ``uint64_t[4 * n]`` of
    (fn, state, count, chunk); a dispatch of one chunk runs on this thread, a larger one is
    posted and run as above. Returns n, or the index of the first dispatch whose kernel failed
    (STATUS holds its status). One native call per command buffer instead of a return to Python
    per dispatch. The caller sets BUSY
    while it runs, so that workers stay in the loop through a long one-chunk dispatch.

NEXT holds the job's generation in its high 32 bits and the next unclaimed workgroup in its low
32, so a worker still holding a finished job's fields claims nothing: POST rewrites NEXT before
those fields (a release fence between), and a worker reads the fields before its claim (an
acquire fence between), so a worker that read any new field fails its claim. ``count`` must
stay below 2^31 so a claim cannot carry into the generation.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.loops import I64, entry_alloca, i64, umin

# v2: BUSY and EXECUTE (a v1 worker would sleep through an EXECUTE's dispatches)
POST, RUN, WORKER, EXECUTE = (f"pyree_local_task_{name}_v2" for name in (
    "post", "run", "worker", "execute"))
GENERATION, FN, STATE, COUNT, CHUNK, NEXT, FINISHED, STATUS, IDLE_ROUNDS, BUSY = range(10)
JOB_FIELDS = 10
DISPATCH_FIELDS = 4   # EXECUTE's records: fn, state, count, chunk
STOPPED = (1 << 64) - 1
SPINS = 64   # pauses per polling round, then one sched_yield

_JOB_PTR = I64.as_pointer()
_PTR = ir.PointerType()
_I32 = ir.IntType(32)
_LOW = i64(0xFFFFFFFF)


def emit_worker_loop(module: ir.Module) -> None:
    """Defines POST, RUN, WORKER and EXECUTE in ``module`` (an x86-64 one: the polling uses
    ``pause``)."""
    pause = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
    sched_yield = ir.Function(module, ir.FunctionType(_I32, []), "sched_yield")  # libc
    help_ = _emit_help(module)
    post = _emit_post(module)
    run = _emit_run(module, help_, pause, sched_yield)
    _emit_worker(module, help_, pause, sched_yield)
    _emit_execute(module, post, run)


def _field(b: ir.IRBuilder, job: ir.Value, index: int) -> ir.Value:
    """A typed ``i64*`` (LLVM reads it as ``ptr``): llvmlite's store_atomic wants a pointee type."""
    return b.gep(job, [i64(index)], source_etype=I64)


def _load(b: ir.IRBuilder, job: ir.Value, index: int, ordering: str = "monotonic") -> ir.Value:
    return b.load_atomic(_field(b, job, index), ordering, 8, typ=I64)


def _store(b: ir.IRBuilder, value: ir.Value, job: ir.Value, index: int,
           ordering: str = "monotonic") -> None:
    b.store_atomic(value, _field(b, job, index), ordering, 8)


def _function(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type],
              exported: bool = True) -> tuple[ir.Function, ir.IRBuilder]:
    fn = ir.Function(module, ir.FunctionType(ret, args), name)
    if not exported:
        fn.linkage = "internal"
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _emit_help(module: ir.Module) -> ir.Function:
    """help(job, generation): claims and runs chunks of that generation's job until none is left."""
    fn, b = _function(module, "pyree_local_task_help", ir.VoidType(), [_JOB_PTR, I64], exported=False)
    job, generation = fn.args
    kernel_type = ir.FunctionType(_I32, [_PTR, I64, I64])
    kernel = b.inttoptr(_load(b, job, FN), kernel_type.as_pointer())
    state = b.inttoptr(_load(b, job, STATE), _PTR)
    count, chunk = _load(b, job, COUNT), _load(b, job, CHUNK)
    b.fence("acquire")   # the fields above are read before the claims below (see the docstring)
    tag = b.and_(generation, _LOW)

    claim, run, failed, account, done = (fn.append_basic_block(n) for n in (
        "claim", "run", "failed", "account", "done"))
    poll = fn.append_basic_block("poll")
    b.branch(poll)
    b.position_at_end(poll)
    next_ = _load(b, job, NEXT)
    begin = b.and_(next_, _LOW)
    ours = b.and_(b.icmp_unsigned("==", b.lshr(next_, i64(32)), tag),
                  b.icmp_unsigned("<", begin, count))
    b.cbranch(ours, claim, done)

    b.position_at_end(claim)
    swapped = b.cmpxchg(_field(b, job, NEXT), next_, b.add(next_, chunk), "acq_rel", "monotonic")
    b.cbranch(b.extract_value(swapped, 1), run, poll)

    b.position_at_end(run)
    end = umin(b, b.add(begin, chunk), count)
    status = b.call(kernel, [state, begin, end])
    b.cbranch(b.icmp_signed("!=", status, ir.Constant(_I32, 0)), failed, account)

    b.position_at_end(failed)   # the first nonzero status stays
    b.cmpxchg(_field(b, job, STATUS), i64(0), b.sext(status, I64), "acq_rel", "monotonic")
    b.branch(account)

    b.position_at_end(account)   # after the status: the poster reads it once all are counted
    b.atomic_rmw("add", _field(b, job, FINISHED), b.sub(end, begin), "release")
    b.branch(poll)

    b.position_at_end(done)
    b.ret_void()
    return fn


def _emit_post(module: ir.Module) -> ir.Function:
    fn, b = _function(module, POST, ir.VoidType(), [_JOB_PTR, _PTR, _PTR, I64, I64])
    job, kernel, state, count, chunk = fn.args
    generation = b.add(_load(b, job, GENERATION), i64(1))
    _store(b, b.shl(generation, i64(32)), job, NEXT)   # first: a late worker claims nothing
    b.fence("release")
    _store(b, b.ptrtoint(kernel, I64), job, FN)
    _store(b, b.ptrtoint(state, I64), job, STATE)
    _store(b, count, job, COUNT)
    _store(b, chunk, job, CHUNK)
    _store(b, i64(0), job, FINISHED)
    _store(b, i64(0), job, STATUS)
    _store(b, generation, job, GENERATION, "release")
    b.ret_void()
    return fn


def _poll_round(b: ir.IRBuilder, fn: ir.Function, pause: ir.Function, changed, name: str,
                on_change: ir.Block) -> None:
    """Up to SPINS pauses, leaving for ``on_change`` as soon as ``changed()`` holds."""
    spin, check, after = (fn.append_basic_block(f"{name}.{n}") for n in ("spin", "check", "after"))
    count = entry_alloca(b, I64)
    b.store(i64(0), count)
    b.branch(spin)
    b.position_at_end(spin)
    b.cbranch(changed(), on_change, check)
    b.position_at_end(check)
    b.call(pause, [])
    spins = b.add(b.load(count, typ=I64), i64(1))
    b.store(spins, count)
    b.cbranch(b.icmp_unsigned("<", spins, i64(SPINS)), spin, after)
    b.position_at_end(after)


def _emit_run(module: ir.Module, help_: ir.Function, pause: ir.Function,
              sched_yield: ir.Function) -> ir.Function:
    fn, b = _function(module, RUN, I64, [_JOB_PTR, I64])
    job, rounds = fn.args
    b.call(help_, [job, _load(b, job, GENERATION)])   # the poster's own store: no ordering needed
    count = _load(b, job, COUNT)
    round_ = entry_alloca(b, I64)
    b.store(i64(0), round_)
    top, finished, timed_out = (fn.append_basic_block(n) for n in ("round", "finished", "timed_out"))
    b.branch(top)
    b.position_at_end(top)
    _poll_round(b, fn, pause, lambda: b.icmp_unsigned(
        "==", _load(b, job, FINISHED, "acquire"), count), "wait", finished)
    b.call(sched_yield, [])
    done = b.add(b.load(round_, typ=I64), i64(1))
    b.store(done, round_)
    b.cbranch(b.icmp_unsigned(">", done, rounds), timed_out, top)
    b.position_at_end(finished)
    b.ret(i64(1))
    b.position_at_end(timed_out)
    b.ret(i64(0))
    return fn


def _emit_worker(module: ir.Module, help_: ir.Function, pause: ir.Function,
                 sched_yield: ir.Function) -> None:
    fn, b = _function(module, WORKER, I64, [_JOB_PTR, I64])
    job, first_seen = fn.args
    seen, idle = entry_alloca(b, I64), entry_alloca(b, I64)
    b.store(first_seen, seen)
    b.store(i64(0), idle)
    top, new, stop, work, poll, yield_, wait = (fn.append_basic_block(n) for n in (
        "top", "new", "stop", "work", "poll", "yield", "idle"))
    b.branch(top)

    b.position_at_end(top)
    generation = _load(b, job, GENERATION, "acquire")
    b.cbranch(b.icmp_unsigned("!=", generation, b.load(seen, typ=I64)), new, poll)

    b.position_at_end(new)
    b.cbranch(b.icmp_unsigned("==", _load(b, job, FN), i64(0)), stop, work)
    b.position_at_end(stop)
    b.ret(i64(STOPPED))
    b.position_at_end(work)
    b.call(help_, [job, generation])
    b.store(generation, seen)
    b.store(i64(0), idle)
    b.branch(top)

    b.position_at_end(poll)
    _poll_round(b, fn, pause, lambda: b.icmp_unsigned(
        "!=", _load(b, job, GENERATION), b.load(seen, typ=I64)), "poll", top)
    rounds = b.add(b.load(idle, typ=I64), i64(1))
    b.store(rounds, idle)
    idle_long = b.icmp_unsigned(">", rounds, _load(b, job, IDLE_ROUNDS))
    b.cbranch(b.and_(idle_long, b.icmp_unsigned("==", _load(b, job, BUSY), i64(0))), wait, yield_)
    b.position_at_end(yield_)
    b.call(sched_yield, [])
    b.branch(top)
    b.position_at_end(wait)
    b.ret(b.load(seen, typ=I64))


def _emit_execute(module: ir.Module, post: ir.Function, run: ir.Function) -> None:
    fn, b = _function(module, EXECUTE, I64, [_JOB_PTR, _JOB_PTR, I64])
    job, records, n = fn.args
    kernel_type = ir.FunctionType(_I32, [_PTR, I64, I64])
    top, body, direct, posted, wait, check, failed, next_, done = (fn.append_basic_block(name) for name in (
        "top", "body", "direct", "posted", "wait", "check", "failed", "next", "done"))
    index = entry_alloca(b, I64)
    b.store(i64(0), index)
    b.branch(top)

    b.position_at_end(top)
    i = b.load(index, typ=I64)
    b.cbranch(b.icmp_unsigned("<", i, n), body, done)

    b.position_at_end(body)
    record = [b.load(b.gep(records, [b.add(b.mul(i, i64(DISPATCH_FIELDS)), i64(f))], source_etype=I64),
                     typ=I64) for f in range(DISPATCH_FIELDS)]
    kernel, state, count, chunk = record
    b.cbranch(b.icmp_unsigned("<=", count, chunk), direct, posted)

    b.position_at_end(direct)   # one chunk (or none): on this thread, nothing posted
    status = b.call(b.inttoptr(kernel, kernel_type.as_pointer()), [b.inttoptr(state, _PTR), i64(0), count])
    _store(b, b.sext(status, I64), job, STATUS)   # no job is live: the workers leave STATUS alone
    b.branch(check)

    b.position_at_end(posted)
    b.call(post, [job, b.inttoptr(kernel, _PTR), b.inttoptr(state, _PTR), count, chunk])
    b.branch(wait)
    b.position_at_end(wait)
    b.cbranch(b.icmp_unsigned("==", b.call(run, [job, _load(b, job, IDLE_ROUNDS)]), i64(0)), wait, check)

    b.position_at_end(check)
    b.cbranch(b.icmp_unsigned("!=", _load(b, job, STATUS), i64(0)), failed, next_)
    b.position_at_end(failed)
    b.ret(i)
    b.position_at_end(next_)
    b.store(b.add(i, i64(1)), index)
    b.branch(top)

    b.position_at_end(done)
    b.ret(n)
