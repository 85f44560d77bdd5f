/* A stand-in for the NVIDIA driver's libcuda.so.1 (built with -DLIBCUDA) and
 * libnvidia-ml.so.1 (-DLIBNVML), for the doctor's corpus tests only: each entry point
 * returns the code a broken machine's driver returns, chosen by a STANDIN_* variable. It
 * never succeeds at anything real: creating a context always fails (STANDIN_CTX, default
 * 999 = CUDA_ERROR_UNKNOWN), so no success path can be claimed from it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int env(const char *k, int d) {
    const char *v = getenv(k);
    return v && *v ? atoi(v) : d;
}

#ifdef LIBCUDA
static const char *cu_name(int e) {
    switch (e) {
    case 0: return "CUDA_SUCCESS";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 46: return "CUDA_ERROR_DEVICES_UNAVAILABLE";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 101: return "CUDA_ERROR_INVALID_DEVICE";
    case 209: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case 802: return "CUDA_ERROR_SYSTEM_NOT_READY";
    case 803: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case 804: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    default: return "CUDA_ERROR_UNKNOWN";
    }
}
int cuGetErrorName(int e, const char **s) { *s = cu_name(e); return 0; }
int cuGetErrorString(int e, const char **s) { *s = cu_name(e); return 0; }
int cuDriverGetVersion(int *v) { *v = env("STANDIN_CUDA_VERSION", 13000); return 0; }
int cuInit(unsigned flags) { (void)flags; return env("STANDIN_CUINIT", 0); }
int cuDeviceGetCount(int *c) { *c = env("STANDIN_DEVICES", 1); return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return i < env("STANDIN_DEVICES", 1) ? 0 : 101; }
int cuDeviceGetName(char *n, int len, int d) {
    (void)d;
    strncpy(n, "stand-in", len > 0 ? (size_t)len : 0);
    return 0;
}
int cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = (size_t)16 << 30; return 0; }
int cuDeviceGetUuid(char *u, int d) { memset(u, 0x5a, 16); u[15] = (char)d; return 0; }
int cuDeviceGetUuid_v2(char *u, int d) { return cuDeviceGetUuid(u, d); }
int cuDeviceGetAttribute(int *v, int a, int d) {
    (void)d;
    switch (a) {
    case 75: *v = env("STANDIN_CC_MAJOR", 7); break;  /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *v = env("STANDIN_CC_MINOR", 5); break;  /* COMPUTE_CAPABILITY_MINOR */
    case 16: *v = 40; break;                          /* MULTIPROCESSOR_COUNT */
    case 33: *v = 1; break;                           /* PCI_BUS_ID */
    default: *v = 0;
    }
    return 0;
}
int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = 0; return env("STANDIN_CTX", 999); }
int cuCtxCreate_v2(void **c, unsigned f, int d) { (void)f; return cuDevicePrimaryCtxRetain(c, d); }
/* Everything after a context: never reached (no context is ever made), present because a
 * real libcuda exports it. Each fails as an unknown error. */
#ifndef PARTIAL
#define FAIL(name) int name(void) { return 999; }
FAIL(cuCtxSetCurrent) FAIL(cuDeviceGetDefaultMemPool) FAIL(cuEventCreate)
FAIL(cuEventDestroy_v2) FAIL(cuEventElapsedTime) FAIL(cuEventRecord) FAIL(cuEventSynchronize)
FAIL(cuLaunchKernel) FAIL(cuMemAllocAsync) FAIL(cuMemFreeAsync) FAIL(cuMemGetInfo_v2)
FAIL(cuMemHostAlloc) FAIL(cuMemHostRegister_v2) FAIL(cuMemHostUnregister)
FAIL(cuMemPoolGetAttribute) FAIL(cuMemPoolSetAttribute) FAIL(cuMemPoolTrimTo)
FAIL(cuMemcpyDtoDAsync_v2) FAIL(cuMemcpyDtoHAsync_v2) FAIL(cuMemcpyHtoDAsync_v2)
FAIL(cuMemcpyPeerAsync) FAIL(cuModuleGetFunction) FAIL(cuModuleLoadData) FAIL(cuStreamCreate)
FAIL(cuStreamSynchronize)
#endif /* PARTIAL: a libcuda without them, as an incomplete copy is */
#endif

#ifdef LIBNVML
int nvmlInit_v2(void) { return env("STANDIN_NVML", 0); }
int nvmlInitWithFlags(unsigned f) { (void)f; return nvmlInit_v2(); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) {
    switch (r) {
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    case 18: return "Driver/library version mismatch";
    default: return "Unknown Error";
    }
}
int nvmlSystemGetDriverVersion(char *b, unsigned n) {
    const char *v = getenv("STANDIN_DRIVER");
    strncpy(b, v && *v ? v : "580.95.05", n);
    return 0;
}
int nvmlDeviceGetCount_v2(unsigned *c) { *c = (unsigned)env("STANDIN_DEVICES", 1); return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)(uintptr_t)(i + 1); return 0; }
int nvmlDeviceGetMigMode(void *h, unsigned *cur, unsigned *pend) {
    (void)h;
    *cur = *pend = (unsigned)env("STANDIN_MIG", 0);
    return 0;
}
#endif
