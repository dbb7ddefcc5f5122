/*
 * kernels.cu - reduction kernels on the GPU (see kernels.h for the contract).
 *
 * One template per kernel shape, instantiated once per dtype; the reduction op is a
 * run-time switch that every thread of a launch takes the same way, so it costs nothing
 * in a memory-bound loop and keeps nvcc's work (and CI's build time) small.  Each thread
 * handles whole elements in a grid-stride loop and reads every source of an element
 * before it writes any destination, which is what makes dst == src safe.
 *
 * The element operations are ports of daemon/adapter/half.h and daemon/adapter/reduce.c,
 * expression for expression, so that a GPU result equals the CPU result bit for bit (the
 * gpu tests compare both against tests/lib's reference).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>

#include "kernels.h"

namespace {

enum { SUM = 0, PROD = 1, MIN = 2, MAX = 3 };
enum { F32, F64, F16, BF16, I8, U8, I32, U32, I64, U64, NDTYPES };

/* ---- half.h, on the device ------------------------------------------------------- */

__device__ __forceinline__ float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = h & 0x7fff;
    uint32_t normal = (em << 13) + (112u << 23);
    uint32_t special = (em << 13) | 0x7f800000 | (em > 0x7c00 ? 0x00400000 : 0);
    uint32_t sub = __float_as_uint((float)(int32_t)em * 0x1p-24f);
    uint32_t r = em >= 0x7c00 ? special : em >= 0x0400 ? normal : sub;
    return __uint_as_float(r | sign);
}

__device__ __forceinline__ uint16_t f32_to_f16(float f)
{
    uint32_t x = __float_as_uint(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t a = x & 0x7fffffff;
    uint32_t nan = 0x7e00 | ((a >> 13) & 0x3ff);
    uint32_t normal = (a - (112u << 23) + 0x0fff + ((a >> 13) & 1)) >> 13;
    /* __fadd_rn: round to nearest even and never contracted or flushed. */
    uint32_t sub = __float_as_uint(__fadd_rn(__uint_as_float(a), 0.5f)) - 0x3f000000;
    uint32_t r = a > 0x7f800000 ? nan : a >= 0x477ff000 ? 0x7c00 : a >= 0x38800000 ? normal : sub;
    return (uint16_t)(r | sign);
}

__device__ __forceinline__ float bf16_to_f32(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16(float f)
{
    uint32_t x = __float_as_uint(f);
    uint32_t nan = (int32_t)(x & 0x7fffffff) > 0x7f800000 ? ~0u : 0;
    uint32_t add = (0x7fff + ((x >> 16) & 1)) & ~nan;
    return (uint16_t)(((x | (nan & 0x00400000)) + add) >> 16);
}

/* ---- IEEE minimum/maximum with the canonical NaN (reduce.c's DEF_FMINMAX) ---------- */

template <typename T, typename U> struct fbits;
template <> struct fbits<float, uint32_t> {
    static __device__ __forceinline__ uint32_t to(float v) { return __float_as_uint(v); }
    static __device__ __forceinline__ float from(uint32_t u) { return __uint_as_float(u); }
    static constexpr uint32_t qnan = 0x7fc00000u;
};
template <> struct fbits<double, uint64_t> {
    static __device__ __forceinline__ uint64_t to(double v)
    {
        return (uint64_t)__double_as_longlong(v);
    }
    static __device__ __forceinline__ double from(uint64_t u)
    {
        return __longlong_as_double((long long)u);
    }
    static constexpr uint64_t qnan = 0x7ff8000000000000ull;
};

template <typename T, typename U> __device__ __forceinline__ T fmin_ieee(T a, T b)
{
    typedef fbits<T, U> B;
    U ua = B::to(a), ub = B::to(b);
    U lt = (U)0 - (U)(a < b), eq = (U)0 - (U)(a == b), nan = (U)0 - (U)((a != a) | (b != b));
    U r = (ua & lt) | (ub & ~lt) | (ua & eq);
    return B::from((r & ~nan) | (B::qnan & nan));
}

template <typename T, typename U> __device__ __forceinline__ T fmax_ieee(T a, T b)
{
    typedef fbits<T, U> B;
    U ua = B::to(a), ub = B::to(b);
    U gt = (U)0 - (U)(a > b), eq = (U)0 - (U)(a == b), nan = (U)0 - (U)((a != a) | (b != b));
    U r = ((ua & gt) | (ub & ~gt)) & (ua | ~eq);
    return B::from((r & ~nan) | (B::qnan & nan));
}

/* ---- element traits: storage S, accumulator A ------------------------------------- */

template <int DT> struct el;

#define FLOAT_EL(DT, S, U, ADD, MUL)                                                       \
    template <> struct el<DT> {                                                            \
        typedef S s_t;                                                                     \
        typedef S a_t;                                                                     \
        static __device__ __forceinline__ a_t widen(s_t v) { return v; }                   \
        static __device__ __forceinline__ s_t narrow(a_t v) { return v; }                  \
        static __device__ __forceinline__ a_t op(a_t a, a_t b, int o)                      \
        {                                                                                  \
            switch (o) {                                                                   \
            case SUM: return ADD(a, b);                                                    \
            case PROD: return MUL(a, b);                                                   \
            case MIN: return fmin_ieee<S, U>(a, b);                                        \
            default: return fmax_ieee<S, U>(a, b);                                         \
            }                                                                              \
        }                                                                                  \
    };
FLOAT_EL(F32, float, uint32_t, __fadd_rn, __fmul_rn)
FLOAT_EL(F64, double, uint64_t, __dadd_rn, __dmul_rn)

#define HALF_EL(DT, W, N)                                                                  \
    template <> struct el<DT> {                                                            \
        typedef uint16_t s_t;                                                              \
        typedef float a_t;                                                                 \
        static __device__ __forceinline__ a_t widen(s_t v) { return W(v); }                \
        static __device__ __forceinline__ s_t narrow(a_t v) { return N(v); }               \
        static __device__ __forceinline__ a_t op(a_t a, a_t b, int o)                      \
        {                                                                                  \
            return el<F32>::op(a, b, o);                                                   \
        }                                                                                  \
    };
HALF_EL(F16, f16_to_f32, f32_to_f16)
HALF_EL(BF16, bf16_to_f32, f32_to_bf16)

/* SUM and PROD on the unsigned type of the width, cast back each step: wrapping is
 * defined and u8 products never overflow; MIN/MAX compare in the dtype itself. */
#define INT_EL(DT, S, U)                                                                   \
    template <> struct el<DT> {                                                            \
        typedef S s_t;                                                                     \
        typedef S a_t;                                                                     \
        static __device__ __forceinline__ a_t widen(s_t v) { return v; }                   \
        static __device__ __forceinline__ s_t narrow(a_t v) { return v; }                  \
        static __device__ __forceinline__ a_t op(a_t a, a_t b, int o)                      \
        {                                                                                  \
            switch (o) {                                                                   \
            case SUM: return (S)(U)((U)a + (U)b);                                          \
            case PROD: return (S)(U)((U)a * (U)b);                                         \
            case MIN: return b < a ? b : a;                                                \
            default: return a < b ? b : a;                                                 \
            }                                                                              \
        }                                                                                  \
    };
INT_EL(I8, int8_t, uint32_t)
INT_EL(U8, uint8_t, uint32_t)
INT_EL(I32, int32_t, uint32_t)
INT_EL(U32, uint32_t, uint32_t)
INT_EL(I64, int64_t, uint64_t)
INT_EL(U64, uint64_t, uint64_t)

/* ---- kernels ------------------------------------------------------------------------ */

struct fan_args {
    const void *src[NX_CUK_MAX_PTRS];
    void *dst[NX_CUK_MAX_PTRS];
    int nsrc, ndst, op, exclusive;
    size_t n;
};

template <int DT> __global__ void fanout_k(fan_args p)
{
    typedef el<DT> E;
    typedef typename E::s_t S;
    typedef typename E::a_t A;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        A acc = E::widen(((const S *)p.src[0])[i]);
        for (int r = 1; r < p.nsrc; r++)
            acc = E::op(acc, E::widen(((const S *)p.src[r])[i]), p.op);
        S v = E::narrow(acc);
        for (int j = 0; j < p.ndst; j++)
            ((S *)p.dst[j])[i] = v;
    }
}

/* The element whose bits are b (the identity comes as reduce.c's bit patterns). */
template <typename S> __device__ __forceinline__ S from_bits(uint64_t b) { return (S)b; }
template <> __device__ __forceinline__ float from_bits<float>(uint64_t b)
{
    return __uint_as_float((uint32_t)b);
}
template <> __device__ __forceinline__ double from_bits<double>(uint64_t b)
{
    return __longlong_as_double((long long)b);
}

/* Prefix over ranks; p.src has p.nsrc = nranks entries, p.dst the same (NULL: skip). */
template <int DT> __global__ void scan_k(fan_args p, uint64_t ident)
{
    typedef el<DT> E;
    typedef typename E::s_t S;
    typedef typename E::a_t A;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {
        A acc = E::widen(((const S *)p.src[0])[i]);
        if (p.exclusive) {
            if (p.dst[0])
                ((S *)p.dst[0])[i] = from_bits<S>(ident);
        } else if (p.dst[0]) {
            ((S *)p.dst[0])[i] = E::narrow(acc);
        }
        for (int r = 1; r < p.nsrc; r++) {
            /* read src[r] before dst[r] is written: they may be one buffer */
            A v = E::widen(((const S *)p.src[r])[i]);
            if (p.exclusive && p.dst[r])
                ((S *)p.dst[r])[i] = E::narrow(acc);
            acc = E::op(acc, v, p.op);
            if (!p.exclusive && p.dst[r])
                ((S *)p.dst[r])[i] = E::narrow(acc);
        }
    }
}

template <typename S> __global__ void fill_k(S *dst, size_t n, S v)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = v;
}

/* reduce.c's identity_bits */
const uint64_t identity_bits[NDTYPES][4] = {
    /* F32 */ {0, 0x3f800000, 0x7f800000, 0xff800000},
    /* F64 */ {0, 0x3ff0000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull},
    /* F16 */ {0, 0x3c00, 0x7c00, 0xfc00},
    /* BF16 */ {0, 0x3f80, 0x7f80, 0xff80},
    /* I8 */ {0, 1, 0x7f, 0x80},
    /* U8 */ {0, 1, 0xff, 0},
    /* I32 */ {0, 1, 0x7fffffff, 0x80000000},
    /* U32 */ {0, 1, 0xffffffff, 0},
    /* I64 */ {0, 1, 0x7fffffffffffffffull, 0x8000000000000000ull},
    /* U64 */ {0, 1, ~0ull, 0},
};
const unsigned esize[NDTYPES] = {4, 8, 2, 2, 1, 1, 4, 4, 8, 8};

const int THREADS = 256;

unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

int launched(void)
{
    return cudaGetLastError() == cudaSuccess ? 0 : -EIO;
}

template <int DT> int fan_launch(const fan_args &a, cudaStream_t s, bool scan, uint64_t ident)
{
    if (scan)
        scan_k<DT><<<blocks_for(a.n), THREADS, 0, s>>>(a, ident);
    else
        fanout_k<DT><<<blocks_for(a.n), THREADS, 0, s>>>(a);
    return launched();
}

int dispatch(uint8_t dtype, const fan_args &a, cudaStream_t s, bool scan, uint64_t ident)
{
    switch (dtype) {
    case F32: return fan_launch<F32>(a, s, scan, ident);
    case F64: return fan_launch<F64>(a, s, scan, ident);
    case F16: return fan_launch<F16>(a, s, scan, ident);
    case BF16: return fan_launch<BF16>(a, s, scan, ident);
    case I8: return fan_launch<I8>(a, s, scan, ident);
    case U8: return fan_launch<U8>(a, s, scan, ident);
    case I32: return fan_launch<I32>(a, s, scan, ident);
    case U32: return fan_launch<U32>(a, s, scan, ident);
    case I64: return fan_launch<I64>(a, s, scan, ident);
    case U64: return fan_launch<U64>(a, s, scan, ident);
    default: return -EINVAL;
    }
}

} // namespace

extern "C" int nx_cuk_reduce(void *const *dsts, size_t ndst, const void *const *srcs,
                             size_t nsrc, size_t n, uint8_t dtype, uint8_t op, void *stream)
{
    fan_args a = {};
    if (dtype >= NDTYPES || op > MAX || !dsts || !srcs || ndst == 0 || nsrc == 0)
        return -EINVAL;
    if (ndst > NX_CUK_MAX_PTRS || nsrc > NX_CUK_MAX_PTRS)
        return -E2BIG;
    if (n == 0)
        return 0;
    for (size_t i = 0; i < nsrc; i++)
        if (!(a.src[i] = srcs[i]))
            return -EINVAL;
    for (size_t j = 0; j < ndst; j++)
        if (!(a.dst[j] = dsts[j]))
            return -EINVAL;
    a.nsrc = (int)nsrc;
    a.ndst = (int)ndst;
    a.op = op;
    a.n = n;
    return dispatch(dtype, a, (cudaStream_t)stream, false, 0);
}

extern "C" int nx_cuk_scan(void *const *dsts, const void *const *srcs, size_t nranks,
                           size_t n, uint8_t dtype, uint8_t op, int exclusive, void *stream)
{
    fan_args a = {};
    if (dtype >= NDTYPES || op > MAX || !dsts || !srcs || nranks == 0)
        return -EINVAL;
    if (nranks > NX_CUK_MAX_PTRS)
        return -E2BIG;
    if (n == 0)
        return 0;
    for (size_t r = 0; r < nranks; r++) {
        if (!(a.src[r] = srcs[r]))
            return -EINVAL;
        a.dst[r] = dsts[r];
    }
    a.nsrc = a.ndst = (int)nranks;
    a.op = op;
    a.exclusive = exclusive != 0;
    a.n = n;
    return dispatch(dtype, a, (cudaStream_t)stream, true, identity_bits[dtype][op]);
}

extern "C" int nx_cuk_fill_identity(void *dst, size_t n, uint8_t dtype, uint8_t op,
                                    void *stream)
{
    if (dtype >= NDTYPES || op > MAX || !dst)
        return -EINVAL;
    if (n == 0)
        return 0;
    uint64_t v = identity_bits[dtype][op];
    cudaStream_t s = (cudaStream_t)stream;
    switch (esize[dtype]) {
    case 1: fill_k<uint8_t><<<blocks_for(n), THREADS, 0, s>>>((uint8_t *)dst, n, (uint8_t)v); break;
    case 2: fill_k<uint16_t><<<blocks_for(n), THREADS, 0, s>>>((uint16_t *)dst, n, (uint16_t)v); break;
    case 4: fill_k<uint32_t><<<blocks_for(n), THREADS, 0, s>>>((uint32_t *)dst, n, (uint32_t)v); break;
    default: fill_k<uint64_t><<<blocks_for(n), THREADS, 0, s>>>((uint64_t *)dst, n, v); break;
    }
    return launched();
}
