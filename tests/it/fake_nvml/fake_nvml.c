/* A fake libnvidia-ml.so.1 with two GPUs and known readings, for tests on machines without a
   GPU. tests/it/fake_nvml/mod.rs compiles it against nvml.h (PyPI nvidia-nvml-dev) and the tests
   load it through nvml-wrapper's own loading path (Nvml::builder().lib_path(..)).

   Device 0: "NVIDIA H100 80GB HBM3", every reading, GPM supported.
   Device 1: "NVIDIA A10G": power -> NOT_SUPPORTED, throttle reasons -> FUNCTION_NOT_FOUND,
             PCIe throughput -> NOT_SUPPORTED, GPM unsupported.
   With -DFAKE_MINIMAL the library also lacks the symbols nvmlDeviceGetEnforcedPowerLimit,
   nvmlDeviceGetTemperature and every nvmlGpm* function (nvml-wrapper: FailedToLoadSymbol).
   The expected values live in tests/it/gpu_nvml.rs, converted to SI units by hand. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nvml.h"

static int refs; /* nvmlInit/nvmlShutdown nest, as in the real library */

#define DEV(d) ((unsigned)((uintptr_t)(d)) - 1u)
#define CHECK(d)                                         \
  do {                                                   \
    if (refs <= 0) return NVML_ERROR_UNINITIALIZED;      \
    if ((uintptr_t)(d) < 1 || DEV(d) > 1) return NVML_ERROR_INVALID_ARGUMENT; \
  } while (0)

nvmlReturn_t nvmlInit_v2(void) { refs++; return NVML_SUCCESS; }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; refs++; return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { if (refs <= 0) return NVML_ERROR_UNINITIALIZED; refs--; return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    default: return "Fake NVML error";
  }
}
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int n) { snprintf(v, n, "550.54.15"); return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { if (refs <= 0) return NVML_ERROR_UNINITIALIZED; *c = 2; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
  if (refs <= 0) return NVML_ERROR_UNINITIALIZED;
  if (i > 1) return NVML_ERROR_INVALID_ARGUMENT;
  *d = (nvmlDevice_t)(uintptr_t)(i + 1);
  return NVML_SUCCESS;
}

static const char *NAMES[2] = {"NVIDIA H100 80GB HBM3", "NVIDIA A10G"};
static const char *UUIDS[2] = {"GPU-11111111-2222-3333-4444-555555555555", "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"};

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *s, unsigned int n) { CHECK(d); snprintf(s, n, "%s", NAMES[DEV(d)]); return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *s, unsigned int n) { CHECK(d); snprintf(s, n, "%s", UUIDS[DEV(d)]); return NVML_SUCCESS; }

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  CHECK(d);
  u->gpu = DEV(d) == 0 ? 87 : 12;
  u->memory = DEV(d) == 0 ? 42 : 3;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
  CHECK(d);
  unsigned long long mib = 1024ULL * 1024ULL;
  m->total = (DEV(d) == 0 ? 81559ULL : 23028ULL) * mib;
  m->used = (DEV(d) == 0 ? 40960ULL : 1024ULL) * mib;
  m->reserved = 0;
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
  CHECK(d);
  if (DEV(d) == 1) return NVML_ERROR_NOT_SUPPORTED;
  *mw = 512345;
  return NVML_SUCCESS;
}

#ifndef FAKE_MINIMAL
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw) {
  CHECK(d);
  *mw = DEV(d) == 0 ? 700000 : 300000;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, nvmlTemperatureSensors_t s, unsigned int *t) {
  CHECK(d);
  if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  *t = DEV(d) == 0 ? 63 : 35;
  return NVML_SUCCESS;
}
#endif

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, nvmlClockType_t type, unsigned int *mhz) {
  CHECK(d);
  if (type == NVML_CLOCK_SM) *mhz = DEV(d) == 0 ? 1980 : 1710;
  else if (type == NVML_CLOCK_MEM) *mhz = DEV(d) == 0 ? 2619 : 6251;
  else return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *r) {
  CHECK(d);
  if (DEV(d) == 1) return NVML_ERROR_FUNCTION_NOT_FOUND;
  *r = 0x4ULL | 0x40ULL; /* SW power cap + HW thermal slowdown */
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t d, nvmlPcieUtilCounter_t c, unsigned int *kbs) {
  CHECK(d);
  if (DEV(d) == 1) return NVML_ERROR_NOT_SUPPORTED;
  *kbs = c == NVML_PCIE_UTIL_TX_BYTES ? 123456 : 654321;
  return NVML_SUCCESS;
}

#ifndef FAKE_MINIMAL
struct nvmlGpmSample_st { unsigned device; unsigned taken; };

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t d, nvmlGpmSupport_t *s) {
  CHECK(d);
  s->isSupportedDevice = DEV(d) == 0;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s) {
  *s = calloc(1, sizeof(struct nvmlGpmSample_st));
  return *s ? NVML_SUCCESS : NVML_ERROR_MEMORY;
}
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) { free(s); return NVML_SUCCESS; }
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t d, nvmlGpmSample_t s) {
  CHECK(d);
  if (DEV(d) != 0) return NVML_ERROR_NOT_SUPPORTED;
  s->device = DEV(d);
  s->taken = 1;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *g) {
  if (!g->sample1 || !g->sample2 || !g->sample1->taken || !g->sample2->taken) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < g->numMetrics; i++) {
    nvmlGpmMetric_t *m = &g->metrics[i];
    memset(&m->metricInfo, 0, sizeof m->metricInfo);
    m->nvmlReturn = NVML_SUCCESS;
    switch (m->metricId) {
      case NVML_GPM_METRIC_DRAM_BW_UTIL: m->value = 61.5; break;
      case NVML_GPM_METRIC_ANY_TENSOR_UTIL: m->value = 33.25; break;
      case NVML_GPM_METRIC_SM_OCCUPANCY: m->value = 47.0; break;
      default: m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}
#endif
