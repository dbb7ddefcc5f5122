/*
 * testlib_selftest.c - checks the suite's own reference arithmetic before anything
 * is compared against it: the f16 / bf16 conversions against a brute-force nearest
 * search over every finite half value (ties to even), the reductions on hand-made
 * values whose answers are known, and the patterns' exactness promise.
 * Needs no daemon.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "refnum.h"

static int fails;

/* The nearest of the sorted finite non-negative values tab[0..n) to x >= 0, ties to
 * the even encoding; n when x rounds past the largest (to infinity). */
static int nearest(const double *tab, int n, double x, double inf_edge)
{
    if (x >= inf_edge)
        return n;
    int lo = 0, hi = n - 1;
    while (lo < hi) { /* first index with tab[i] >= x */
        int mid = (lo + hi) / 2;
        if (tab[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || tab[lo] == x)
        return lo;
    double dl = x - tab[lo - 1], du = tab[lo] - x;
    if (dl < du)
        return lo - 1;
    if (du < dl)
        return lo;
    return (lo & 1) ? lo - 1 : lo;
}

static void check_half(int bf)
{
    const char *name = bf ? "bf16" : "f16";
    int nfin = bf ? 0x7f80 : 0x7c00; /* encodings 0 .. nfin-1 are the finite non-negatives */
    double *tab = malloc(sizeof(double) * (size_t)nfin);
    for (int i = 0; i < nfin; i++)
        tab[i] = bf ? tl_bf16_to_f32((uint16_t)i) : tl_f16_to_f32((uint16_t)i);
    for (int i = 1; i < nfin; i++)
        if (!(tab[i] > tab[i - 1])) {
            tl_log("FAIL %s: decoding is not increasing at 0x%04x", name, i);
            fails++;
            break;
        }
    /* the largest finite value + half an ulp rounds to infinity (ties to even: 0x7c00) */
    double ulp_top = tab[nfin - 1] - tab[nfin - 2];
    double inf_edge = tab[nfin - 1] + ulp_top / 2;
    long bad = 0, n = 0;
    uint64_t h = 12345;
    for (long k = 0; k < 600000; k++) {
        float x;
        if (k < nfin) { /* every value and every midpoint, and a hair around it */
            int i = (int)k;
            double mids[4] = {tab[i], i + 1 < nfin ? (tab[i] + tab[i + 1]) / 2 : tab[i], 0, 0};
            mids[2] = nextafterf((float)mids[1], INFINITY);
            mids[3] = nextafterf((float)mids[1], 0);
            for (int m = 0; m < 4; m++) {
                x = (float)mids[m];
                if ((double)x != mids[m] && m == 1)
                    continue; /* the midpoint is not an f32 (cannot happen) */
                for (int sgn = 0; sgn < 2; sgn++) {
                    float y = sgn ? -x : x;
                    uint16_t got = bf ? tl_f32_to_bf16(y) : tl_f32_to_f16(y);
                    int idx = nearest(tab, nfin, fabs((double)y), inf_edge);
                    uint16_t want = (uint16_t)((sgn ? 0x8000 : 0) | (idx == nfin ? nfin : idx));
                    n++;
                    if (got != want && bad++ < 5)
                        tl_log("FAIL %s(%.10g): got 0x%04x, expected 0x%04x", name, (double)y, got, want);
                }
            }
            continue;
        }
        h = tl_mix64(h);
        uint32_t b = (uint32_t)h;
        memcpy(&x, &b, 4);
        if (isnan(x))
            continue;
        uint16_t got = bf ? tl_f32_to_bf16(x) : tl_f32_to_f16(x);
        double ax = fabs((double)x);
        int idx = isinf(x) ? nfin : nearest(tab, nfin, ax, inf_edge);
        uint16_t want = (uint16_t)((signbit(x) ? 0x8000 : 0) | (uint16_t)idx);
        n++;
        if (got != want && bad++ < 5)
            tl_log("FAIL %s(%.10g): got 0x%04x, expected 0x%04x", name, (double)x, got, want);
    }
    /* NaN stays NaN */
    uint16_t q = bf ? tl_f32_to_bf16(NAN) : tl_f32_to_f16(NAN);
    float back = bf ? tl_bf16_to_f32(q) : tl_f16_to_f32(q);
    if (!isnan(back)) {
        tl_log("FAIL %s: NaN does not survive a round trip", name);
        bad++;
    }
    if (bad) {
        tl_log("FAIL %s conversions: %ld of %ld wrong", name, bad, n);
        fails++;
    } else {
        tl_log("%s: %ld conversions from f32 match a brute-force nearest-even search", name, n);
    }
    free(tab);
}

static void check_reduce(void)
{
    /* f16: 1 + 2^-11 + 2^-11 is exact in f32 (1 + 2^-10) and representable in f16;
     * rounding after every step would give 1 (tie to even twice). */
    uint16_t a[3] = {0x3c00, 0x1000, 0x1000}, out;
    const void *in[3] = {&a[0], &a[1], &a[2]};
    tl_reduce(NEXAR_F16, NEXAR_SUM, &out, in, 3, 1);
    if (out != 0x3c01) {
        tl_log("FAIL f16 sum 1 + 2^-11 + 2^-11: 0x%04x, expected 0x3c01", out);
        fails++;
    }
    /* bf16: 1 + 2^-8 -> a tie between 1 and 1 + 2^-7: to even (1.0) */
    uint16_t b[2] = {0x3f80, 0x3b80};
    const void *bi[2] = {&b[0], &b[1]};
    tl_reduce(NEXAR_BF16, NEXAR_SUM, &out, bi, 2, 1);
    if (out != 0x3f80) {
        tl_log("FAIL bf16 sum 1 + 2^-8: 0x%04x, expected 0x3f80", out);
        fails++;
    }
    int8_t i8[2] = {100, 100}, o8;
    const void *ii[2] = {&i8[0], &i8[1]};
    tl_reduce(NEXAR_I8, NEXAR_SUM, &o8, ii, 2, 1);
    if (o8 != -56) {
        tl_log("FAIL i8 100 + 100 wraps to %d, expected -56", o8);
        fails++;
    }
    uint64_t u[2] = {UINT64_MAX, 3}, ou;
    const void *ui[2] = {&u[0], &u[1]};
    tl_reduce(NEXAR_U64, NEXAR_MIN, &ou, ui, 2, 1);
    if (ou != 3) {
        tl_log("FAIL u64 min: %llu", (unsigned long long)ou);
        fails++;
    }
    float id;
    tl_fill_identity(NEXAR_F32, NEXAR_MIN, &id, 1);
    if (!(isinf(id) && id > 0)) {
        tl_log("FAIL identity of f32 min is not +inf");
        fails++;
    }
    if (!fails)
        tl_log("reference reductions on hand-made values: right");
}

/* The patterns keep sums exact: f32 accumulation in any order gives the same. */
static void check_patterns(void)
{
    static const int dts[] = {NEXAR_F32, NEXAR_F64, NEXAR_F16, NEXAR_BF16};
    for (int d = 0; d < 4; d++)
        for (int op = 0; op < 4; op++) {
            enum { N = 4096, R = 8 };
            static uint8_t in[R][N * 8];
            static uint8_t o1[N * 8], o2[N * 8];
            const void *fw[R], *bw[R];
            for (int r = 0; r < R; r++) {
                tl_pattern(dts[d], op, 99, r, 0, in[r], N);
                fw[r] = in[r];
                bw[r] = in[R - 1 - r];
            }
            tl_reduce(dts[d], op, o1, fw, R, N);
            tl_reduce(dts[d], op, o2, bw, R, N);
            if (memcmp(o1, o2, N * tl_esize(dts[d]))) {
                tl_log("FAIL pattern %s %s: the reduction depends on the rank order",
                       tl_dtype_name(dts[d]), tl_op_name(op));
                fails++;
            }
        }
    if (!fails)
        tl_log("patterns: every float reduction over 8 ranks is independent of the order");
}

int main(void)
{
    check_half(0);
    check_half(1);
    check_reduce();
    check_patterns();
    tl_log("%s", fails ? "FAILED" : "PASSED");
    return fails ? 1 : 0;
}
