/*
 * sparse_mla_aot._launcher -- minimal CUDA driver-API kernel launcher.
 *
 * Design constraints (and why):
 *   - Python limited API (abi3, >= 3.10): one binary serves CPython 3.10+,
 *     so the wheel does not need a build per interpreter version.
 *   - No link-time dependency on libcuda or torch: libcuda.so.1 is dlopen()ed
 *     lazily on first use, so `import sparse_mla_aot._launcher` works on a
 *     machine without a GPU/driver; only calls that need the driver fail, with
 *     a clear RuntimeError.
 *   - launch() is the per-decode-step hot path: METH_FASTCALL, no allocations,
 *     arguments are packed into stack buffers, one cuCtxGetCurrent + one
 *     cuLaunchKernel.
 *   - All argument validation happens before the driver is touched, so it is
 *     testable without a GPU.
 *
 * The only global state is the dlopen handle and the resolved function
 * pointers. Initialization runs once under the GIL (every entry point holds
 * the GIL while calling ensure_driver()), so a plain flag is enough.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The few CUDA driver types we need, declared here (values match cuda.h) so */
/* that building needs no CUDA toolkit headers.                              */
/* ------------------------------------------------------------------------ */
typedef int CUresult;                      /* enum cudaError_enum */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_INITIALIZED 3

typedef int CUdevice;                      /* CUdevice_v1 is int */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

typedef int CUfunction_attribute;          /* enum CUfunction_attribute_enum */
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

typedef int CUdevice_attribute;            /* enum CUdevice_attribute_enum */
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97


/* Default dynamic shared memory limit without opt-in (48 KiB). */
#define DEFAULT_MAX_DYNAMIC_SHARED 49152

/* Maximum number of kernel arguments launch() accepts. */
#define MAX_KERNEL_ARGS 64

/* Driver entry points.  None of these have a _v2 variant in cuda.h (the
 * _v2 renames apply to e.g. cuCtxCreate, cuDevicePrimaryCtxRelease,
 * cuMemAlloc, which we do not use), so the plain names are the right ones. */
typedef CUresult (*PFN_cuInit)(unsigned int);
typedef CUresult (*PFN_cuDriverGetVersion)(int *);
typedef CUresult (*PFN_cuDeviceGet)(CUdevice *, int);
typedef CUresult (*PFN_cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
typedef CUresult (*PFN_cuCtxGetCurrent)(CUcontext *);
typedef CUresult (*PFN_cuCtxSetCurrent)(CUcontext);
typedef CUresult (*PFN_cuCtxGetDevice)(CUdevice *);
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule *, const void *);
typedef CUresult (*PFN_cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
typedef CUresult (*PFN_cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
typedef CUresult (*PFN_cuLaunchKernel)(CUfunction, unsigned int, unsigned int,
                                       unsigned int, unsigned int, unsigned int,
                                       unsigned int, unsigned int, CUstream,
                                       void **, void **);
typedef CUresult (*PFN_cuGetErrorName)(CUresult, const char **);
typedef CUresult (*PFN_cuGetErrorString)(CUresult, const char **);

/* ------------------------------------------------------------------------ */
/* Global state: dlopen handle + function pointers only.                    */
/* ------------------------------------------------------------------------ */
static void *g_libcuda = NULL;
/* 0 = not tried yet, 1 = loaded, -1 = failed (g_load_error says why).
 * Failure is sticky: retrying dlopen on every call would make each failing
 * call slow and the message would not change. */
static int g_driver_state = 0;
static char g_load_error[512];

static PFN_cuInit p_cuInit;
static PFN_cuDriverGetVersion p_cuDriverGetVersion;
static PFN_cuDeviceGet p_cuDeviceGet;
static PFN_cuDeviceGetAttribute p_cuDeviceGetAttribute;
static PFN_cuDevicePrimaryCtxRetain p_cuDevicePrimaryCtxRetain;
static PFN_cuCtxGetCurrent p_cuCtxGetCurrent;
static PFN_cuCtxSetCurrent p_cuCtxSetCurrent;
static PFN_cuCtxGetDevice p_cuCtxGetDevice;
static PFN_cuModuleLoadData p_cuModuleLoadData;
static PFN_cuModuleGetFunction p_cuModuleGetFunction;
static PFN_cuFuncSetAttribute p_cuFuncSetAttribute;
static PFN_cuLaunchKernel p_cuLaunchKernel;
static PFN_cuGetErrorName p_cuGetErrorName;
static PFN_cuGetErrorString p_cuGetErrorString;

/* Resolve one symbol; on failure record the dlerror text. */
static int
resolve(void **slot, const char *name)
{
    void *sym;
    dlerror(); /* clear */
    sym = dlsym(g_libcuda, name);
    if (sym == NULL) {
        const char *err = dlerror();
        snprintf(g_load_error, sizeof(g_load_error), "%s",
                 err ? err : name);
        return -1;
    }
    *slot = sym;
    return 0;
}

/* Load libcuda.so.1 once.  Returns 0 on success, -1 with RuntimeError set. */
static int
ensure_driver(void)
{
    if (g_driver_state == 1)
        return 0;
    if (g_driver_state == 0) {
        /* RTLD_LOCAL: do not leak driver symbols into the global namespace.
         * If torch already loaded libcuda this just bumps its refcount. */
        g_libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (g_libcuda == NULL) {
            const char *err = dlerror();
            snprintf(g_load_error, sizeof(g_load_error), "%s",
                     err ? err : "unknown dlopen error");
            g_driver_state = -1;
        }
        else {
#define RESOLVE(fn) \
            if (g_driver_state == 0 && resolve((void **)&p_##fn, #fn) < 0) \
                g_driver_state = -1;
            RESOLVE(cuInit)
            RESOLVE(cuDriverGetVersion)
            RESOLVE(cuDeviceGet)
            RESOLVE(cuDeviceGetAttribute)
            RESOLVE(cuDevicePrimaryCtxRetain)
            RESOLVE(cuCtxGetCurrent)
            RESOLVE(cuCtxSetCurrent)
            RESOLVE(cuCtxGetDevice)
            RESOLVE(cuModuleLoadData)
            RESOLVE(cuModuleGetFunction)
            RESOLVE(cuFuncSetAttribute)
            RESOLVE(cuLaunchKernel)
            RESOLVE(cuGetErrorName)
            RESOLVE(cuGetErrorString)
#undef RESOLVE
            if (g_driver_state == 0)
                g_driver_state = 1;
            /* On a missing symbol the handle is kept open: closing a library
             * that torch may also use gains nothing. */
        }
    }
    if (g_driver_state == 1)
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "sparse_mla_aot: cannot load libcuda.so.1 (%s); "
                 "a CUDA driver is required to launch kernels",
                 g_load_error);
    return -1;
}

/* Raise RuntimeError("<what> failed: CUDA_ERROR_xxx (message)"). */
static PyObject *
raise_cu(const char *what, CUresult r)
{
    const char *name = NULL, *msg = NULL;
    if (p_cuGetErrorName == NULL || p_cuGetErrorName(r, &name) != CUDA_SUCCESS
        || name == NULL)
        name = "CUDA_ERROR_UNKNOWN_CODE";
    if (p_cuGetErrorString == NULL
        || p_cuGetErrorString(r, &msg) != CUDA_SUCCESS || msg == NULL)
        msg = "unrecognized error code";
    PyErr_Format(PyExc_RuntimeError, "%s failed: %s (%s) [CUresult %d]",
                 what, name, msg, (int)r);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Argument conversion helpers (no driver access).                          */
/* ------------------------------------------------------------------------ */

/* Get an exact int from obj (accepting __index__ objects such as numpy ints).
 * Returns a new reference or NULL with TypeError naming the argument. */
static PyObject *
as_index(PyObject *obj, const char *fname, const char *argdesc)
{
    if (PyLong_Check(obj)) {
        Py_INCREF(obj);
        return obj;
    }
    if (PyIndex_Check(obj))
        return PyNumber_Index(obj);
    PyErr_Format(PyExc_TypeError, "%s(): %s must be an int, not %R",
                 fname, argdesc, (PyObject *)Py_TYPE(obj));
    return NULL;
}

/* Unsigned 64-bit (handles, pointers, streams). */
static int
get_u64(PyObject *obj, unsigned long long *out, const char *fname,
        const char *argdesc)
{
    PyObject *idx = as_index(obj, fname, argdesc);
    if (idx == NULL)
        return -1;
    *out = PyLong_AsUnsignedLongLong(idx);
    Py_DECREF(idx);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError,
                     "%s(): %s must be in [0, 2**64)", fname, argdesc);
        return -1;
    }
    return 0;
}

/* Signed 64-bit, then range-checked into [lo, hi]. */
static int
get_i64_range(PyObject *obj, long long lo, long long hi, long long *out,
              const char *fname, const char *argdesc)
{
    long long v;
    int overflow = 0;
    PyObject *idx = as_index(obj, fname, argdesc);
    if (idx == NULL)
        return -1;
    v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    Py_DECREF(idx);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%s(): %s must be in [%lld, %lld]",
                     fname, argdesc, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int
check_nargs(const char *fname, Py_ssize_t nargs, Py_ssize_t expected)
{
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes exactly %zd positional arguments (%zd given)",
                     fname, expected, nargs);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* driver_version() -> int                                                  */
/* ------------------------------------------------------------------------ */
static PyObject *
py_driver_version(PyObject *self, PyObject *unused)
{
    int version = 0;
    CUresult r;
    (void)self;
    (void)unused;
    if (ensure_driver() < 0)
        return NULL;
    r = p_cuDriverGetVersion(&version); /* does not need cuInit */
    if (r != CUDA_SUCCESS)
        return raise_cu("cuDriverGetVersion", r);
    return PyLong_FromLong(version);
}

/* cuInit + cuDeviceGet with clear errors. */
static int
get_device(long long ordinal, CUdevice *dev)
{
    CUresult r = p_cuInit(0); /* idempotent and cheap after the first call */
    if (r != CUDA_SUCCESS) {
        raise_cu("cuInit", r);
        return -1;
    }
    r = p_cuDeviceGet(dev, (int)ordinal);
    if (r != CUDA_SUCCESS) {
        raise_cu("cuDeviceGet", r);
        return -1;
    }
    return 0;
}

/* Make device `ordinal`'s primary context current on this thread if no context is (the same context the CUDA
 * runtime, and so torch, uses; the retain is never released: modules live in it and must outlive any caller). A
 * context of another device is an error: the caller's thread state is not ours to switch. Loads the driver first. */
static int
make_current(long long ordinal, const char *fname)
{
    CUcontext ctx = NULL;
    CUdevice dev, cur_dev;
    CUresult r;
    if (ensure_driver() < 0 || get_device(ordinal, &dev) < 0)
        return -1;
    r = p_cuCtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS) {
        raise_cu("cuCtxGetCurrent", r);
        return -1;
    }
    if (ctx == NULL) {
        r = p_cuDevicePrimaryCtxRetain(&ctx, dev);
        if (r != CUDA_SUCCESS) {
            raise_cu("cuDevicePrimaryCtxRetain", r);
            return -1;
        }
        r = p_cuCtxSetCurrent(ctx);
        if (r != CUDA_SUCCESS) {
            raise_cu("cuCtxSetCurrent", r);
            return -1;
        }
        return 0;
    }
    r = p_cuCtxGetDevice(&cur_dev);
    if (r != CUDA_SUCCESS) {
        raise_cu("cuCtxGetDevice", r);
        return -1;
    }
    if (cur_dev != dev) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s(): the CUDA context current on this thread belongs to device %d, not device %lld; "
                     "make device %lld current first (e.g. torch.cuda.set_device(%lld))",
                     fname, (int)cur_dev, ordinal, ordinal, ordinal);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* use_device(device: int) -> None: before launching from a thread that may  */
/* not have touched CUDA yet (a new Python thread has no current context).   */
/* ------------------------------------------------------------------------ */
static PyObject *
py_use_device(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long ordinal;
    (void)self;
    if (check_nargs("use_device", nargs, 1) < 0)
        return NULL;
    if (get_i64_range(args[0], 0, INT32_MAX, &ordinal, "use_device", "device") < 0)
        return NULL;
    if (make_current(ordinal, "use_device") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* load_module(device: int, image: bytes) -> int                            */
/* ------------------------------------------------------------------------ */
static PyObject *
py_load_module(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long long ordinal;
    char *buf = NULL;
    Py_ssize_t len = 0;
    CUmodule mod = NULL;
    CUresult r;
    (void)self;

    if (check_nargs("load_module", nargs, 2) < 0)
        return NULL;
    if (get_i64_range(args[0], 0, INT32_MAX, &ordinal, "load_module",
                      "device") < 0)
        return NULL;
    if (!PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "load_module(): image must be bytes (cubin ELF or "
                        "NUL-terminated PTX)");
        return NULL;
    }
    if (PyBytes_AsStringAndSize(args[1], &buf, &len) < 0)
        return NULL;
    if (len == 0) {
        PyErr_SetString(PyExc_ValueError, "load_module(): image is empty");
        return NULL;
    }
    /* PTX must be NUL-terminated for cuModuleLoadData; an ELF cubin starts
     * with "\x7fELF" and carries its own size. */
    if (!(len >= 4 && memcmp(buf, "\x7f" "ELF", 4) == 0) && buf[len - 1] != '\0') {
        PyErr_SetString(PyExc_ValueError,
                        "load_module(): image is neither an ELF cubin nor "
                        "NUL-terminated PTX text (append b'\\0' to PTX)");
        return NULL;
    }

    if (make_current(ordinal, "load_module") < 0)
        return NULL;

    /* PTX JIT can take a while: release the GIL.  `buf` stays valid because
     * the caller holds a reference to the (immutable) bytes object. */
    Py_BEGIN_ALLOW_THREADS
    r = p_cuModuleLoadData(&mod, buf);
    Py_END_ALLOW_THREADS
    if (r != CUDA_SUCCESS)
        return raise_cu("cuModuleLoadData", r);
    return PyLong_FromVoidPtr((void *)mod);
}

/* ------------------------------------------------------------------------ */
/* get_function(module: int, name: str, dynamic_shared_bytes: int) -> int   */
/* ------------------------------------------------------------------------ */
static PyObject *
py_get_function(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    unsigned long long module;
    const char *name;
    Py_ssize_t name_len = 0;
    long long smem;
    CUfunction fn = NULL;
    CUresult r;
    (void)self;

    if (check_nargs("get_function", nargs, 3) < 0)
        return NULL;
    if (get_u64(args[0], &module, "get_function", "module") < 0)
        return NULL;
    if (module == 0) {
        PyErr_SetString(PyExc_ValueError, "get_function(): module is NULL");
        return NULL;
    }
    if (!PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "get_function(): name must be str");
        return NULL;
    }
    name = PyUnicode_AsUTF8AndSize(args[1], &name_len);
    if (name == NULL)
        return NULL;
    if ((Py_ssize_t)strlen(name) != name_len) {
        PyErr_SetString(PyExc_ValueError,
                        "get_function(): name contains a NUL character");
        return NULL;
    }
    if (get_i64_range(args[2], 0, INT32_MAX, &smem, "get_function",
                      "dynamic_shared_bytes") < 0)
        return NULL;

    if (ensure_driver() < 0)
        return NULL;
    r = p_cuModuleGetFunction(&fn, (CUmodule)(uintptr_t)module, name);
    if (r != CUDA_SUCCESS) {
        const char *en = NULL, *es = NULL;
        if (p_cuGetErrorName(r, &en) != CUDA_SUCCESS || en == NULL)
            en = "CUDA_ERROR_UNKNOWN_CODE";
        if (p_cuGetErrorString(r, &es) != CUDA_SUCCESS || es == NULL)
            es = "unrecognized error code";
        PyErr_Format(PyExc_RuntimeError,
                     "cuModuleGetFunction failed for kernel '%s': %s (%s)",
                     name, en, es);
        return NULL;
    }
    if (smem > DEFAULT_MAX_DYNAMIC_SHARED) {
        /* Above 48 KiB the kernel must opt in explicitly. */
        r = p_cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 (int)smem);
        if (r != CUDA_SUCCESS) {
            const char *en = NULL, *es = NULL;
            CUdevice dev;
            int optin = -1;
            if (p_cuGetErrorName(r, &en) != CUDA_SUCCESS || en == NULL)
                en = "CUDA_ERROR_UNKNOWN_CODE";
            if (p_cuGetErrorString(r, &es) != CUDA_SUCCESS || es == NULL)
                es = "unrecognized error code";
            /* Best effort: report the device's opt-in limit. */
            if (p_cuCtxGetDevice(&dev) != CUDA_SUCCESS
                || p_cuDeviceGetAttribute(
                       &optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                       dev) != CUDA_SUCCESS)
                optin = -1;
            if (optin >= 0)
                PyErr_Format(PyExc_RuntimeError,
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=%lld) "
                             "failed for kernel '%s': %s (%s); the device allows at "
                             "most %d bytes of opt-in shared memory per block "
                             "(minus the kernel's static shared memory)",
                             smem, name, en, es, optin);
            else
                PyErr_Format(PyExc_RuntimeError,
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=%lld) "
                             "failed for kernel '%s': %s (%s); the device cannot "
                             "provide that much dynamic shared memory",
                             smem, name, en, es);
            return NULL;
        }
    }
    return PyLong_FromVoidPtr((void *)fn);
}

/* ------------------------------------------------------------------------ */
/* launch(function, grid_x, grid_y, grid_z, block_x, shared_bytes, stream,  */
/*        arg_types, *args) -> None                                         */
/* ------------------------------------------------------------------------ */
#define LAUNCH_FIXED 8

typedef union {
    uint64_t u64;
    int64_t i64;
    int32_t i32;
    float f32;
} kernel_arg;

static PyObject *
py_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    kernel_arg storage[MAX_KERNEL_ARGS];
    void *params[MAX_KERNEL_ARGS + 1];
    unsigned long long function, stream;
    long long grid[3], block_x, smem;
    const char *codes;
    Py_ssize_t ncodes, i;
    CUcontext ctx = NULL;
    CUresult r;
    (void)self;

    if (nargs < LAUNCH_FIXED) {
        PyErr_Format(PyExc_TypeError,
                     "launch() takes at least %d positional arguments "
                     "(function, grid_x, grid_y, grid_z, block_x, shared_bytes, "
                     "stream, arg_types, *args); %zd given",
                     LAUNCH_FIXED, nargs);
        return NULL;
    }
    if (!PyBytes_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "launch(): arg_types must be bytes (codes p/i/l/f)");
        return NULL;
    }
    codes = PyBytes_AsString(args[7]);
    if (codes == NULL)
        return NULL;
    ncodes = PyBytes_Size(args[7]);
    if (ncodes > MAX_KERNEL_ARGS) {
        PyErr_Format(PyExc_ValueError,
                     "launch(): at most %d kernel arguments are supported, "
                     "arg_types has %zd",
                     MAX_KERNEL_ARGS, ncodes);
        return NULL;
    }
    if (nargs - LAUNCH_FIXED != ncodes) {
        PyErr_Format(PyExc_TypeError,
                     "launch(): arg_types has %zd codes but %zd kernel "
                     "arguments were given",
                     ncodes, nargs - LAUNCH_FIXED);
        return NULL;
    }

    if (get_u64(args[0], &function, "launch", "function") < 0)
        return NULL;
    if (function == 0) {
        PyErr_SetString(PyExc_ValueError, "launch(): function is NULL");
        return NULL;
    }
    if (get_i64_range(args[1], 1, UINT32_MAX, &grid[0], "launch", "grid_x") < 0
        || get_i64_range(args[2], 1, UINT32_MAX, &grid[1], "launch", "grid_y") < 0
        || get_i64_range(args[3], 1, UINT32_MAX, &grid[2], "launch", "grid_z") < 0
        || get_i64_range(args[4], 1, UINT32_MAX, &block_x, "launch", "block_x") < 0
        || get_i64_range(args[5], 0, UINT32_MAX, &smem, "launch",
                         "shared_bytes") < 0)
        return NULL;
    if (get_u64(args[6], &stream, "launch", "stream") < 0)
        return NULL;

    /* Pack kernel arguments into stack storage.  cuLaunchKernel copies the
     * parameter values before returning, so stack lifetime is sufficient. */
    for (i = 0; i < ncodes; i++) {
        PyObject *obj = args[LAUNCH_FIXED + i];
        char code = codes[i];
        switch (code) {
        case 'p': {
            /* Device pointer (e.g. tensor.data_ptr()); None means NULL. */
            unsigned long long v;
            if (obj == Py_None) {
                v = 0;
            }
            else if (PyLong_Check(obj)) {
                v = PyLong_AsUnsignedLongLong(obj);
                if (v == (unsigned long long)-1 && PyErr_Occurred())
                    goto overflow_ptr;
            }
            else {
                PyObject *idx;
                if (!PyIndex_Check(obj))
                    goto type_int;
                idx = PyNumber_Index(obj);
                if (idx == NULL)
                    return NULL;
                v = PyLong_AsUnsignedLongLong(idx);
                Py_DECREF(idx);
                if (v == (unsigned long long)-1 && PyErr_Occurred())
                    goto overflow_ptr;
            }
            storage[i].u64 = (uint64_t)v;
            break;
        }
        case 'i':
        case 'l': {
            long long v;
            int overflow = 0;
            if (PyLong_Check(obj)) {
                v = PyLong_AsLongLongAndOverflow(obj, &overflow);
            }
            else {
                PyObject *idx;
                if (!PyIndex_Check(obj))
                    goto type_int;
                idx = PyNumber_Index(obj);
                if (idx == NULL)
                    return NULL;
                v = PyLong_AsLongLongAndOverflow(idx, &overflow);
                Py_DECREF(idx);
            }
            if (v == -1 && PyErr_Occurred())
                return NULL;
            if (code == 'i') {
                if (overflow || v < INT32_MIN || v > INT32_MAX) {
                    PyErr_Format(PyExc_OverflowError,
                                 "launch(): kernel argument %zd (type code 'i') "
                                 "is out of int32 range",
                                 i);
                    return NULL;
                }
                /* Zero the slot first so the full 8 bytes are defined. */
                storage[i].u64 = 0;
                storage[i].i32 = (int32_t)v;
            }
            else {
                if (overflow) {
                    PyErr_Format(PyExc_OverflowError,
                                 "launch(): kernel argument %zd (type code 'l') "
                                 "is out of int64 range",
                                 i);
                    return NULL;
                }
                storage[i].i64 = (int64_t)v;
            }
            break;
        }
        case 'f': {
            double d = PyFloat_AsDouble(obj);
            if (d == -1.0 && PyErr_Occurred()) {
                if (PyErr_ExceptionMatches(PyExc_TypeError)) {
                    PyErr_Clear();
                    PyErr_Format(PyExc_TypeError,
                                 "launch(): kernel argument %zd (type code 'f') "
                                 "must be a float",
                                 i);
                }
                return NULL;
            }
            /* Finite doubles beyond float32 range would silently become inf. */
            if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX)) {
                PyErr_Format(PyExc_OverflowError,
                             "launch(): kernel argument %zd (type code 'f') "
                             "is out of float32 range",
                             i);
                return NULL;
            }
            storage[i].u64 = 0;
            storage[i].f32 = (float)d;
            break;
        }
        default:
            if (code >= 0x20 && code < 0x7f)
                PyErr_Format(PyExc_ValueError,
                             "launch(): unknown arg type code '%c' at position "
                             "%zd of arg_types (expected one of 'p', 'i', 'l', "
                             "'f')",
                             code, i);
            else
                PyErr_Format(PyExc_ValueError,
                             "launch(): unknown arg type code 0x%02x at position "
                             "%zd of arg_types (expected one of 'p', 'i', 'l', "
                             "'f')",
                             (unsigned int)(unsigned char)code, i);
            return NULL;
        }
        params[i] = &storage[i];
        continue;

    type_int:
        PyErr_Format(PyExc_TypeError,
                     "launch(): kernel argument %zd (type code '%c') must be an "
                     "int",
                     i, code);
        return NULL;
    overflow_ptr:
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError,
                     "launch(): kernel argument %zd (type code 'p') must be a "
                     "pointer value in [0, 2**64)",
                     i);
        return NULL;
    }
    params[ncodes] = NULL;

    /* Validation done; now the driver. */
    if (ensure_driver() < 0)
        return NULL;
    r = p_cuCtxGetCurrent(&ctx);
    if (r == CUDA_ERROR_NOT_INITIALIZED || (r == CUDA_SUCCESS && ctx == NULL)) {
        /* Deliberately do not guess a device/context here. */
        PyErr_SetString(PyExc_RuntimeError,
                        "launch(): no CUDA context is current on this thread; "
                        "call prepare()/load_module() on this thread first");
        return NULL;
    }
    if (r != CUDA_SUCCESS)
        return raise_cu("cuCtxGetCurrent", r);

    r = p_cuLaunchKernel((CUfunction)(uintptr_t)function,
                         (unsigned int)grid[0], (unsigned int)grid[1],
                         (unsigned int)grid[2], (unsigned int)block_x, 1, 1,
                         (unsigned int)smem, (CUstream)(uintptr_t)stream,
                         params, NULL);
    if (r != CUDA_SUCCESS)
        return raise_cu("cuLaunchKernel", r);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Module definition.                                                       */
/* ------------------------------------------------------------------------ */
/* Cast through a generic function pointer: METH_FASTCALL functions have a
 * different signature than PyCFunction. */
#define FASTCALL(fn) ((PyCFunction)(void (*)(void))(fn))

static PyMethodDef launcher_methods[] = {
    {"driver_version", py_driver_version, METH_NOARGS,
     "driver_version() -> int\n\nCUDA driver version (e.g. 12040)."},
    {"use_device", FASTCALL(py_use_device), METH_FASTCALL,
     "use_device(device) -> None: make the device's primary CUDA context current on this thread if none is."},
    {"load_module", FASTCALL(py_load_module), METH_FASTCALL,
     "load_module(device: int, image: bytes) -> int\n\n"
     "Load a cubin or NUL-terminated PTX image; makes the device's primary "
     "context current on this thread if none is. Returns the CUmodule."},
    {"get_function", FASTCALL(py_get_function), METH_FASTCALL,
     "get_function(module: int, name: str, dynamic_shared_bytes: int) -> int\n\n"
     "Look up a kernel; opts in to >48 KiB dynamic shared memory if needed."},
    {"launch", FASTCALL(py_launch), METH_FASTCALL,
     "launch(function, grid_x, grid_y, grid_z, block_x, shared_bytes, stream, "
     "arg_types, *args) -> None\n\n"
     "arg_types: bytes, one code per kernel argument: p=pointer (int or None), "
     "i=int32, l=int64, f=float32."},
    {NULL, NULL, 0, NULL}};

/* Multi-phase init (PEP 489): the module's __name__ comes from the import
 * spec, so the same binary works as sparse_mla_aot._launcher. */
static PyModuleDef_Slot launcher_slots[] = {{0, NULL}};

static struct PyModuleDef launcher_module = {
    PyModuleDef_HEAD_INIT,
    "_launcher",
    "Minimal CUDA driver-API launcher (dlopen's libcuda.so.1 lazily).",
    0,
    launcher_methods,
    launcher_slots,
    NULL,
    NULL,
    NULL};

PyMODINIT_FUNC
PyInit__launcher(void)
{
    return PyModuleDef_Init(&launcher_module);
}
