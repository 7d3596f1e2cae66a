#include "common/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/strings.h"

namespace elasticdl {
namespace {

// openblas_get_corename() as found through `handle` (dlsym's); "" without
// it. Looked up rather than linked: LibTorch brings OpenBLAS in, and a
// build against another BLAS has no such function.
std::string CoreName(void* handle) {
  using CoreNameFunction = char* (*)();
  auto core_name = reinterpret_cast<CoreNameFunction>(dlsym(handle, "openblas_get_corename"));
  if (core_name == nullptr) return "";
  const char* name = core_name();
  return name != nullptr ? name : "";
}

// Sets the variables for `kernels`, chosen by this program.
void SetChosen(const std::string& kernels) {
  setenv("OPENBLAS_CORETYPE", kernels.c_str(), 1);
  setenv(kOpenblasCoretypeChosenVariable, "1", 1);
}

// Takes them out again.
void ClearChosen() {
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kOpenblasCoretypeChosenVariable);
}

}  // namespace

CpuVectorUnits ThisCpu() {
  CpuVectorUnits cpu;
#if defined(__x86_64__)
  // libgcc's answers count a unit only when the kernel saves its registers.
  __builtin_cpu_init();
  cpu.avx = __builtin_cpu_supports("avx") != 0;
  cpu.avx2_fma = __builtin_cpu_supports("avx2") != 0 && __builtin_cpu_supports("fma") != 0;
  cpu.avx512 = __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512cd") != 0 &&
               __builtin_cpu_supports("avx512bw") != 0 && __builtin_cpu_supports("avx512dq") != 0 &&
               __builtin_cpu_supports("avx512vl") != 0;
  cpu.avx512_bf16 = cpu.avx512 && __builtin_cpu_supports("avx512bf16") != 0;
#endif
  return cpu;
}

std::string BlasKernels() { return CoreName(RTLD_DEFAULT); }

std::optional<std::string> BetterBlasKernels(std::string_view kernels, const CpuVectorUnits& cpu) {
  if (kernels != "Prescott") return std::nullopt;
  if (cpu.avx512_bf16) return "Cooperlake";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  if (cpu.avx) return "Sandybridge";
  return std::nullopt;
}

void ChooseBlasKernelsBeforeExec(const Environment& env) {
  if (!env.openblas_coretype.empty() || env.openblas_coretype_chosen) return;
  // Left loaded: the exec that follows unloads it.
  void* blas = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (blas == nullptr) return;
  if (std::optional<std::string> better = BetterBlasKernels(CoreName(blas), ThisCpu())) {
    SetChosen(*better);
  }
}

std::string UseTheCpusBlasKernels(char** argv, const Environment& env) {
  if (env.openblas_coretype_chosen) {
    // This process's OpenBLAS read the variable at load; what it starts
    // may run on another CPU.
    ClearChosen();
    return "";
  }
  if (!env.openblas_coretype.empty()) return "";
  const std::optional<std::string> better = BetterBlasKernels(BlasKernels(), ThisCpu());
  if (!better) return "";
  SetChosen(*better);
  execv("/proc/self/exe", argv);
  const int error = errno;
  ClearChosen();
  return StrCat("OpenBLAS took this CPU for a Prescott; starting again with its ", *better,
                " kernels failed (", std::strerror(error), ")");
}

}  // namespace elasticdl
