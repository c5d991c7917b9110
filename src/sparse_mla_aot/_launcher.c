/* sparse_mla_aot._launcher: the runtime's only CUDA driver calls. Python limited API (abi3, >= 3.10).
 *  - libcuda.so.1 is dlopen()ed on first use, never linked: importing works without a driver; calls that need one
 *    fail with a RuntimeError naming it. Global state: the resolved entry points.
 *  - launch() is the per-call path: a spec (packed by launch.py once per plan: both kernels' functions, grids and
 *    argument buffers with every scalar in place) gets the call's pointers in its slots, is checked, and each kernel
 *    goes to cuLaunchKernelEx (programmatic: a programmatic dependent launch of the one before; an all-zero second
 *    kernel is none). The device's primary context (torch's) is made current only when the thread's differs (one
 *    cuCtxGetCurrent otherwise), and the caller's is restored afterwards. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The driver types and constants used here (values from cuda.h), so building needs no CUDA headers. */
typedef int CUresult, CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
#define CUDA_SUCCESS 0
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
/* cuLaunchKernelEx's attribute and config, laid out as in cuda.h (the value union is 64 bytes). */
#define CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
typedef struct { int id; char pad[4]; union { char bytes[64]; int value; } value; } CUlaunchAttribute;
typedef struct {
    unsigned int grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
    CUstream stream; CUlaunchAttribute *attrs; unsigned int num_attrs;
} CUlaunchConfig;

/* The spec launch.py packs (little-endian, every field 8 bytes, so no padding). */
#define MAX_ARG_BYTES 256
#define MAX_POINTERS 16
#define MAX_SOURCES 16
typedef struct { uint64_t offset, source, addend; } pointer_slot; /* args[offset/8] = pointers[source] + addend */
typedef struct {
    uint64_t function, grid[3], block_x, shared_bytes, programmatic, arg_bytes, pointer_count;
    pointer_slot pointers[MAX_POINTERS];
    uint64_t args[MAX_ARG_BYTES / 8];
} kernel_spec;
typedef struct { uint64_t context; kernel_spec kernels[2]; } launch_spec;

/* The driver entry points used, each with its parameter types; each becomes a pointer p_<name>. */
#define DRIVER_ENTRY_POINTS(X)                                                                                    \
    X(cuInit, (unsigned int)) X(cuDeviceGet, (CUdevice *, int)) X(cuDevicePrimaryCtxRetain, (CUcontext *, CUdevice)) \
    X(cuCtxGetCurrent, (CUcontext *)) X(cuCtxSetCurrent, (CUcontext)) X(cuModuleLoadData, (CUmodule *, const void *)) \
    X(cuModuleGetFunction, (CUfunction *, CUmodule, const char *)) X(cuFuncSetAttribute, (CUfunction, int, int))    \
    X(cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **))                                   \
    X(cuCtxGetDevice, (CUdevice *)) X(cuDeviceGetAttribute, (int *, int, CUdevice))                                \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, (int *, CUfunction, int, size_t))                             \
    X(cuGetErrorName, (CUresult, const char **))
#define DECLARE(fn, params) static CUresult(*p_##fn) params;
DRIVER_ENTRY_POINTS(DECLARE)
#undef DECLARE

static int g_driver_state; /* 0 not tried, 1 loaded, -1 failed (sticky: the message would not change) */
static char g_load_error[512];

/* Load libcuda.so.1 and its entry points once; 0, or -1 with RuntimeError set. */
static int ensure_driver(void)
{
    void *lib;
    if (g_driver_state == 0) {
        lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        g_driver_state = lib ? 1 : -1;
#define RESOLVE(fn, params)                                                       \
        if (g_driver_state == 1 && (*(void **)&p_##fn = dlsym(lib, #fn)) == NULL) \
            g_driver_state = -1;
        DRIVER_ENTRY_POINTS(RESOLVE)
#undef RESOLVE
        if (g_driver_state < 0) {
            const char *error = dlerror();
            snprintf(g_load_error, sizeof(g_load_error), "%s", error ? error : "unknown dlopen error");
        }
    }
    if (g_driver_state == 1)
        return 0;
    PyErr_Format(PyExc_RuntimeError, "sparse_mla_aot: cannot load libcuda.so.1 (%s); a CUDA driver is required "
                 "to launch kernels", g_load_error);
    return -1;
}

/* RuntimeError("<what> failed: CUDA_ERROR_xxx [CUresult n]"); returns -1. */
static int raise_cu(const char *what, CUresult r)
{
    const char *name = NULL;
    if (p_cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
        name = "an unknown error";
    PyErr_Format(PyExc_RuntimeError, "%s failed: %s [CUresult %d]", what, name, (int)r);
    return -1;
}

/* An int argument in [lo, hi] as uint64; -1 with TypeError/OverflowError naming it. */
static int get_u64(PyObject *obj, uint64_t lo, uint64_t hi, uint64_t *out, const char *fname, const char *what)
{
    unsigned long long v;
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int, not %R", fname, what, (PyObject *)Py_TYPE(obj));
        return -1;
    }
    v = PyLong_AsUnsignedLongLong(obj);
    if ((v == (unsigned long long)-1 && PyErr_Occurred()) || v < lo || v > hi) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s(): %s must be in [%llu, %llu]", fname, what,
                     (unsigned long long)lo, (unsigned long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int check_nargs(const char *fname, Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi)
{
    if (nargs >= lo && nargs <= hi)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes %zd to %zd positional arguments (%zd given)", fname, lo, hi, nargs);
    return -1;
}

/* Make ctx current; *previous is the context to restore afterwards (NULL: none, the thread had no context and
 * keeps ours, as it would after the CUDA runtime's first call on it). */
static int enter_context(CUcontext ctx, CUcontext *previous)
{
    CUcontext current = NULL;
    CUresult r = p_cuCtxGetCurrent(&current);
    *previous = NULL;
    if (r != CUDA_SUCCESS)
        return raise_cu("cuCtxGetCurrent", r);
    if (current == ctx)
        return 0;
    if ((r = p_cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
        return raise_cu("cuCtxSetCurrent", r);
    *previous = current;
    return 0;
}

static int leave_context(CUcontext previous)
{
    CUresult r;
    if (previous == NULL || (r = p_cuCtxSetCurrent(previous)) == CUDA_SUCCESS)
        return 0;
    if (!PyErr_Occurred())
        raise_cu("cuCtxSetCurrent (restoring the caller's context)", r);
    return -1;
}

/* primary_context(device: int) -> int: the device's primary context, retained for the process's lifetime
 * (loaded modules live in it). */
static PyObject *py_primary_context(PyObject *Py_UNUSED(self), PyObject *device)
{
    uint64_t ordinal;
    CUdevice dev;
    CUcontext ctx = NULL;
    CUresult r;
    if (get_u64(device, 0, INT32_MAX, &ordinal, "primary_context", "device") < 0 || ensure_driver() < 0)
        return NULL;
    if ((r = p_cuInit(0)) != CUDA_SUCCESS || (r = p_cuDeviceGet(&dev, (int)ordinal)) != CUDA_SUCCESS
        || (r = p_cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) {
        raise_cu("getting the device's primary context", r);
        return NULL;
    }
    return PyLong_FromVoidPtr((void *)ctx);
}

/* load_function(context: int, image: bytes, name: str, dynamic_shared_bytes: int) -> int: load a cubin or
 * NUL-terminated PTX into the context, look up the kernel, set its dynamic shared memory limit (> 48 KiB opts in). */
static PyObject *py_load_function(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t ctx, smem;
    char *image, what[256];
    const char *name;
    Py_ssize_t len = 0, name_len = 0;
    CUcontext previous;
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUresult r;
    if (check_nargs("load_function", nargs, 4, 4) < 0
        || get_u64(args[0], 1, UINT64_MAX, &ctx, "load_function", "context") < 0)
        return NULL;
    if (!PyBytes_Check(args[1]) || PyBytes_AsStringAndSize(args[1], &image, &len) < 0 || len == 0
        || (!(len >= 4 && memcmp(image, "\x7f" "ELF", 4) == 0) && image[len - 1] != '\0')) {
        PyErr_SetString(PyExc_ValueError, "load_function(): image must be bytes: an ELF cubin or NUL-terminated "
                        "PTX text");
        return NULL;
    }
    if (!PyUnicode_Check(args[2]) || (name = PyUnicode_AsUTF8AndSize(args[2], &name_len)) == NULL
        || (Py_ssize_t)strlen(name) != name_len) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "load_function(): name must be a str without NUL characters");
        return NULL;
    }
    if (get_u64(args[3], 0, INT32_MAX, &smem, "load_function", "dynamic_shared_bytes") < 0 || ensure_driver() < 0
        || enter_context((CUcontext)(uintptr_t)ctx, &previous) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS /* PTX JIT can take a while; `image` stays alive: the caller holds the bytes */
    r = p_cuModuleLoadData(&mod, image);
    Py_END_ALLOW_THREADS
    if (r != CUDA_SUCCESS)
        snprintf(what, sizeof(what), "cuModuleLoadData for kernel '%s'", name);
    else if ((r = p_cuModuleGetFunction(&fn, mod, name)) != CUDA_SUCCESS)
        snprintf(what, sizeof(what), "cuModuleGetFunction for kernel '%s'", name);
    else if ((r = p_cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem)) != 0)
        snprintf(what, sizeof(what), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=%llu) for kernel '%s' "
                 "(more than the device's opt-in limit?)", (unsigned long long)smem, name);
    if (r != CUDA_SUCCESS)
        raise_cu(what, r);
    if (leave_context(previous) < 0 || r != CUDA_SUCCESS)
        return NULL;
    return PyLong_FromVoidPtr((void *)fn);
}

/* wave(context: int, function: int, block_x: int, dynamic_shared_bytes: int) -> int: how many programs of the
 * function the context's device runs at once (its multiprocessors times the programs one of them holds). */
static PyObject *py_wave(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t ctx, fn, block_x, smem;
    int per_sm = 0, sms = 0;
    CUdevice dev;
    CUcontext previous;
    CUresult r;
    if (check_nargs("wave", nargs, 4, 4) < 0 || get_u64(args[0], 1, UINT64_MAX, &ctx, "wave", "context") < 0
        || get_u64(args[1], 1, UINT64_MAX, &fn, "wave", "function") < 0
        || get_u64(args[2], 1, 1024, &block_x, "wave", "block_x") < 0
        || get_u64(args[3], 0, INT32_MAX, &smem, "wave", "dynamic_shared_bytes") < 0 || ensure_driver() < 0
        || enter_context((CUcontext)(uintptr_t)ctx, &previous) < 0)
        return NULL;
    if ((r = p_cuCtxGetDevice(&dev)) != CUDA_SUCCESS)
        raise_cu("cuCtxGetDevice", r);
    else if ((r = p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) != CUDA_SUCCESS)
        raise_cu("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", r);
    else if ((r = p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (CUfunction)(uintptr_t)fn, (int)block_x,
                                                                 (size_t)smem)) != CUDA_SUCCESS)
        raise_cu("cuOccupancyMaxActiveBlocksPerMultiprocessor", r);
    if (leave_context(previous) < 0 || r != CUDA_SUCCESS)
        return NULL;
    return PyLong_FromLong((long)per_sm * sms);
}

/* One kernel of a spec is usable: every field in range, every pointer slot inside the buffer. */
static int check_kernel(const kernel_spec *k, Py_ssize_t sources, int which)
{
    uint64_t i;
    int ok = k->function != 0 && k->block_x >= 1 && k->block_x <= 1024 && k->shared_bytes <= UINT32_MAX
             && k->programmatic <= 1 && k->arg_bytes <= MAX_ARG_BYTES && k->pointer_count <= MAX_POINTERS;
    for (i = 0; ok && i < 3; i++)
        ok = k->grid[i] >= 1 && k->grid[i] <= UINT32_MAX;
    for (i = 0; ok && i < k->pointer_count; i++)
        ok = k->pointers[i].offset % 8 == 0 && k->pointers[i].offset < k->arg_bytes
             && k->arg_bytes - k->pointers[i].offset >= 8
             && k->pointers[i].source < (uint64_t)sources;
    if (!ok)
        PyErr_Format(PyExc_ValueError, "launch(): kernel %d of the spec is malformed (a field out of range, or a "
                     "pointer slot outside the buffer or beyond the %zd pointers given)", which, sources);
    return ok ? 0 : -1;
}

/* launch(spec: bytes, stream: int, *pointers: int) -> None */
static PyObject *py_launch(PyObject *Py_UNUSED(self), PyObject *const *args, Py_ssize_t nargs)
{
    launch_spec spec;
    uint64_t stream, pointers[MAX_SOURCES];
    Py_ssize_t sources = nargs - 2, i;
    CUcontext previous;
    CUresult r = CUDA_SUCCESS;
    int k, kernels;
    if (check_nargs("launch", nargs, 2, 2 + MAX_SOURCES) < 0)
        return NULL;
    if (!PyBytes_Check(args[0]) || PyBytes_Size(args[0]) != (Py_ssize_t)sizeof(spec)) {
        PyErr_Format(PyExc_ValueError, "launch(): spec must be bytes of length %zd (launch.py's packing)",
                     (Py_ssize_t)sizeof(spec));
        return NULL;
    }
    memcpy(&spec, PyBytes_AsString(args[0]), sizeof(spec));
    if (spec.context == 0) {
        PyErr_SetString(PyExc_ValueError, "launch(): the spec's context is NULL");
        return NULL;
    }
    kernels = spec.kernels[1].function ? 2 : 1; /* a zero second kernel: the split kernel alone (one split) */
    if (check_kernel(&spec.kernels[0], sources, 0) < 0
        || (kernels == 2 && check_kernel(&spec.kernels[1], sources, 1) < 0)
        || get_u64(args[1], 0, UINT64_MAX, &stream, "launch", "stream") < 0)
        return NULL;
    for (i = 0; i < sources; i++)
        if (get_u64(args[2 + i], 0, UINT64_MAX, &pointers[i], "launch", "a pointer") < 0)
            return NULL;
    for (k = 0; k < kernels; k++) /* the pointers into the argument buffers of this call's copy of the spec */
        for (i = 0; i < (Py_ssize_t)spec.kernels[k].pointer_count; i++) {
            const pointer_slot *slot = &spec.kernels[k].pointers[i];
            spec.kernels[k].args[slot->offset / 8] = pointers[slot->source] + slot->addend;
        }
    if (ensure_driver() < 0 || enter_context((CUcontext)(uintptr_t)spec.context, &previous) < 0)
        return NULL;
    for (k = 0; k < kernels && r == CUDA_SUCCESS; k++) {
        const kernel_spec *ks = &spec.kernels[k];
        size_t size = ks->arg_bytes;
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, spec.kernels[k].args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                         CU_LAUNCH_PARAM_END};
        CUlaunchAttribute programmatic = {CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, {0}, {.value = 1}};
        CUlaunchConfig config = {(unsigned int)ks->grid[0], (unsigned int)ks->grid[1], (unsigned int)ks->grid[2],
                                 (unsigned int)ks->block_x, 1, 1, (unsigned int)ks->shared_bytes,
                                 (CUstream)(uintptr_t)stream, &programmatic, (unsigned int)ks->programmatic};
        r = p_cuLaunchKernelEx(&config, (CUfunction)(uintptr_t)ks->function, NULL, extra);
    }
    if (r != CUDA_SUCCESS)
        raise_cu(k == 1 ? "cuLaunchKernelEx (split kernel)" : "cuLaunchKernelEx (combine kernel)", r);
    if (leave_context(previous) < 0 || r != CUDA_SUCCESS)
        return NULL;
    Py_RETURN_NONE;
}

#define FASTCALL(fn) ((PyCFunction)(void (*)(void))(fn))

static PyMethodDef launcher_methods[] = {
    {"primary_context", py_primary_context, METH_O,
     "primary_context(device: int) -> int: the device's primary CUDA context (retained)."},
    {"load_function", FASTCALL(py_load_function), METH_FASTCALL,
     "load_function(context: int, image: bytes, name: str, dynamic_shared_bytes: int) -> int: a CUfunction."},
    {"wave", FASTCALL(py_wave), METH_FASTCALL,
     "wave(context: int, function: int, block_x: int, dynamic_shared_bytes: int) -> int: programs run at once."},
    {"launch", FASTCALL(py_launch), METH_FASTCALL,
     "launch(spec: bytes, stream: int, *pointers: int) -> None: the spec's kernels on the stream."},
    {NULL, NULL, 0, NULL}};

static int launcher_exec(PyObject *module)
{
    return PyModule_AddIntConstant(module, "SPEC_BYTES", (long)sizeof(launch_spec));
}

static PyModuleDef_Slot launcher_slots[] = {{Py_mod_exec, (void *)launcher_exec}, {0, NULL}};

static struct PyModuleDef launcher_module = {
    PyModuleDef_HEAD_INIT, "_launcher", "The CUDA driver calls of sparse_mla_aot (libcuda.so.1 dlopen()ed).", 0,
    launcher_methods, launcher_slots, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__launcher(void)
{
    return PyModuleDef_Init(&launcher_module);
}
