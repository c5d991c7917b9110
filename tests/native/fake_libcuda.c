/* A stand-in libcuda.so.1 for CPU tests of _launcher.c: the entry points the launcher resolves, with per-thread
 * current contexts like the real driver, and a record of the last launches (argument buffers included) that the
 * test reads through fake_*() functions (ctypes). Contexts are 0x1000 + device; functions are whatever
 * cuModuleGetFunction hands out (0x2000 + n). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int CUresult;
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_INVALID_DEVICE 101
#define DEVICES 2

typedef struct {
    uintptr_t function, context, stream;
    unsigned int grid[3], block[3], shared, programmatic; /* programmatic: the PDL attribute's value, else 0 */
    size_t arg_bytes;
    unsigned char args[256];
} launch_record;

static __thread uintptr_t current;
static int initialized, launches, set_current_calls, fail_launch;
static launch_record records[8];

CUresult cuInit(unsigned int flags) { (void)flags; initialized = 1; return 0; }
CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(uintptr_t *ctx, int dev) { *ctx = 0x1000 + dev; return 0; }
CUresult cuCtxGetCurrent(uintptr_t *ctx)
{
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    *ctx = current;
    return 0;
}
CUresult cuCtxSetCurrent(uintptr_t ctx) { current = ctx; set_current_calls++; return 0; }
CUresult cuModuleLoadData(uintptr_t *mod, const void *image) { (void)image; *mod = 0x3000; return 0; }
CUresult cuModuleGetFunction(uintptr_t *fn, uintptr_t mod, const char *name)
{
    static int n;
    (void)mod;
    if (strcmp(name, "missing") == 0) return CUDA_ERROR_INVALID_VALUE;
    *fn = 0x2000 + n++;
    return 0;
}
CUresult cuFuncSetAttribute(uintptr_t fn, int attr, int value) { (void)fn; (void)attr; return value > 232448; }
CUresult cuCtxGetDevice(int *dev)
{
    if (current == 0) return CUDA_ERROR_INVALID_VALUE;
    *dev = (int)(current - 0x1000);
    return 0;
}
/* Device d has 132 >> d multiprocessors (attribute 16); anything else is an error. */
CUresult cuDeviceGetAttribute(int *value, int attr, int dev)
{
    if (attr != 16 || dev < 0 || dev >= DEVICES) return CUDA_ERROR_INVALID_VALUE;
    *value = 132 >> dev;
    return 0;
}
/* As many programs per multiprocessor as fit its 232,448 shared bytes (at most 2048 threads' worth). */
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, uintptr_t fn, int block_size, size_t shared)
{
    int by_threads = 2048 / block_size, by_shared = shared ? (int)(232448 / shared) : by_threads;
    (void)fn;
    *blocks = by_threads < by_shared ? by_threads : by_shared;
    return 0;
}
typedef struct { int id; char pad[4]; union { char bytes[64]; int value; } value; } attribute; /* cuda.h's */
typedef struct {
    unsigned int grid[3], block[3], shared;
    uintptr_t stream;
    attribute *attrs;
    unsigned int num_attrs;
} launch_config;

CUresult cuLaunchKernelEx(const launch_config *c, uintptr_t fn, void **params, void **extra)
{
    launch_record *r = &records[launches % 8];
    unsigned int i;
    if (params != NULL || extra == NULL || extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (fail_launch) return CUDA_ERROR_INVALID_VALUE;
    r->function = fn; r->context = current; r->stream = c->stream; r->shared = c->shared; r->programmatic = 0;
    memcpy(r->grid, c->grid, sizeof(r->grid));
    memcpy(r->block, c->block, sizeof(r->block));
    for (i = 0; i < c->num_attrs; i++) {
        if (c->attrs[i].id != 6) return CUDA_ERROR_INVALID_VALUE; /* the only one the launcher sets: PDL */
        r->programmatic = (unsigned int)c->attrs[i].value.value;
    }
    r->arg_bytes = *(size_t *)extra[3];
    memcpy(r->args, extra[1], r->arg_bytes);
    launches++;
    return 0;
}
CUresult cuGetErrorName(CUresult r, const char **name)
{
    *name = r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_OTHER";
    return 0;
}

/* For the test. */
int fake_launches(void) { return launches; }
int fake_set_current_calls(void) { return set_current_calls; }
void fake_fail_launch(int fail) { fail_launch = fail; }
uintptr_t fake_current(void) { return current; }
void fake_set_current(uintptr_t ctx) { current = ctx; }
const launch_record *fake_record(int i) { return &records[i % 8]; }
