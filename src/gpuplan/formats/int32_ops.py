"""32-bit integer arithmetic for the numba kernels, as LLVM intrinsics.

Numba types every integer operation on narrower operands as 64-bit (`int32 + int32 -> int64`,
`uint32 >> uint32 -> uint64`), so a loop over float32 bit patterns vectorises in 64-bit lanes:
half the elements per SIMD register, plus sign/zero extensions and truncations. These functions
compute in 32 bits and return int32 (two's complement wrap-around, as the hardware does); the
kernels only use them where no intermediate leaves 32 bits, so results equal the 64-bit ones.
Arguments of other integer types are converted to int32 first (truncated, as `np.int32(x)`).

    i32_add(a, b), i32_sub(a, b), i32_and(a, b), i32_or(a, b)
    i32_shl(a, s)              a << s                     (0 <= s < 32)
    i32_shr(a, s)              a >> s, arithmetic (sign-filling)
    u32_shr(a, s)              a >> s, logical (zero-filling: the bits as unsigned)
    i32_max(a, b), i32_min(a, b)   signed
    u32_max(a, b)              unsigned (float32 magnitudes compare as their bit patterns)
    i32_select(cond, a, b)     a if cond else b, as one LLVM select (a numba conditional expression
                               becomes branches, which random codes mispredict and which block SIMD)
"""

from __future__ import annotations

from numba.core import types
from numba.extending import intrinsic


def _binary(emit):
    """An intrinsic (a, b) -> int32 that converts both arguments to int32 and applies `emit(builder, a, b)`."""

    @intrinsic
    def op(typingctx, a, b):
        if not isinstance(a, (types.Integer, types.IntegerLiteral, types.Boolean)) or not isinstance(
                b, (types.Integer, types.IntegerLiteral, types.Boolean)):
            return None
        sig = types.int32(a, b)

        def codegen(context, builder, signature, args):
            x, y = (context.cast(builder, v, t, types.int32) for v, t in zip(args, signature.args))
            return emit(builder, x, y)

        return sig, codegen

    return op


def _select(pred):
    return lambda b, x, y: b.select(b.icmp_signed(pred, x, y) if pred[0] != "u" else b.icmp_unsigned(pred[1:], x, y), x, y)


i32_add = _binary(lambda b, x, y: b.add(x, y))
i32_sub = _binary(lambda b, x, y: b.sub(x, y))
i32_and = _binary(lambda b, x, y: b.and_(x, y))
i32_or = _binary(lambda b, x, y: b.or_(x, y))
i32_shl = _binary(lambda b, x, y: b.shl(x, y))
i32_shr = _binary(lambda b, x, y: b.ashr(x, y))
u32_shr = _binary(lambda b, x, y: b.lshr(x, y))
i32_max = _binary(_select(">"))
i32_min = _binary(_select("<"))
u32_max = _binary(_select("u>"))





@intrinsic
def i32_select(typingctx, cond, a, b):
    """a if cond else b (both converted to int32), as one LLVM select instruction."""
    ints = (types.Integer, types.IntegerLiteral, types.Boolean)
    if not isinstance(cond, types.Boolean) or not isinstance(a, ints) or not isinstance(b, ints):
        return None
    sig = types.int32(cond, a, b)

    def codegen(context, builder, signature, args):
        pred = context.cast(builder, args[0], signature.args[0], types.boolean)
        x, y = (context.cast(builder, v, t, types.int32) for v, t in zip(args[1:], signature.args[1:]))
        return builder.select(pred, x, y)

    return sig, codegen

@intrinsic
def max_magnitude_bits(typingctx, arr, start, count):
    """max over i < count of (arr[start + i] & 0x7FFFFFFF) as int32, for a uint32 array of float32 bit
    patterns: the largest |x| as its bits (> 0x7F800000 when a NaN is there). `count` must be a
    compile-time constant (a global or closure int) and `arr` 1-D C-contiguous; the `count` elements
    are read as one LLVM vector and reduced with llvm.vector.reduce.umax (a shuffle tree), which the
    vectorisers do not produce from a scalar max loop once it is fully unrolled. No bounds check:
    start + count <= arr.size."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint32 and arr.ndim == 1 and arr.layout == "C"
            and isinstance(count, types.IntegerLiteral)):
        return None
    n = count.literal_value
    sig = types.int32(arr, start, count)

    def codegen(context, builder, signature, args):
        from llvmlite import ir
        from numba.core import cgutils

        ary = context.make_array(signature.args[0])(context, builder, args[0])
        idx = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = builder.gep(ary.data, [idx])
        i32 = ir.IntType(32)
        vec_t = ir.VectorType(i32, n)
        vec = builder.load(builder.bitcast(ptr, vec_t.as_pointer()), align=4)
        mag = builder.and_(vec, ir.Constant(vec_t, [0x7FFFFFFF] * n))
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [vec_t]), f"llvm.vector.reduce.umax.v{n}i32")
        return builder.call(fn, [mag])

    return sig, codegen

__all__ = ["i32_add", "i32_and", "i32_max", "i32_min", "i32_or", "i32_select", "i32_shl", "i32_shr", "i32_sub", "max_magnitude_bits",
           "u32_max", "u32_shr"]
