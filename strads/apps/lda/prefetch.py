"""A cache-line prefetch hint for the sampler's kernels (numba has none): an LLVM
intrinsic, or a no-op where this LLVM names it otherwise."""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, i, j):
    """Ask for the cache line of arr[i, j] (a hint; no effect on results)."""
    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, v, t, types.intp)
               for v, t in zip(args[1:], signature.args[1:])]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(arr, i, j), codegen


@njit(cache=True)
def _probe(a):
    prefetch(a, 0, 0)


try:  # the intrinsic's name depends on the LLVM version: without it, no hint
    _probe(np.zeros((1, 1), np.int32))
except Exception:  # pragma: no cover
    @njit(cache=True, nogil=True)
    def _none(arr, i, j):
        pass
    prefetch = _none
