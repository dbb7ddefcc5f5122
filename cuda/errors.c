/* errors.c - the CUDA adapter's error note (cuda_int.h): a failed call is logged where it
 * happened and its text kept for the message of the op it fails. */
#include <stdio.h>

#include "cuda_int.h"

static char last_err[200];

void nx_cuda_note_error(const char *what, cudaError_t e, const char *file, int line)
{
    snprintf(last_err, sizeof(last_err), "%s: %s", what, cudaGetErrorString(e));
    NX_WARN("cuda", "%s:%d: %s", file, line, last_err);
}

const char *nx_cuda_last_error(void)
{
    return last_err[0] ? last_err : "a CUDA call failed";
}
