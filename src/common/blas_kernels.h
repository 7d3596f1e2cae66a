// Which kernels OpenBLAS runs in this process, and the CPUs it mistakes.
//
// LibTorch's matrix products on the CPU (Linear layers, a DeepFM's MLP)
// are OpenBLAS's sgemm. At load, a DYNAMIC_ARCH OpenBLAS picks its kernels
// by the CPU's model; releases before 0.3.25 (Debian 12 ships 0.3.21) take
// an x86 CPU whose model they do not know, any released after them, for a
// Prescott and run SSE3 kernels on it (OpenBLAS issue 4267). On a Xeon with
// AVX-512 the bare DeepFM loop made 18-42 % more samples/s with the AVX-512
// kernels (docs/benchmarks.md). OPENBLAS_CORETYPE, read once at load, overrides the
// pick. `elasticdl`, which does not link LibTorch, sets it before it execs
// elasticdl-torch (ChooseBlasKernelsBeforeExec); a program that links
// OpenBLAS and was started otherwise starts itself again with it set
// (UseTheCpusBlasKernels).
#ifndef ELASTICDL_COMMON_BLAS_KERNELS_H_
#define ELASTICDL_COMMON_BLAS_KERNELS_H_

#include <optional>
#include <string>
#include <string_view>

#include "common/environment.h"

namespace elasticdl {

// The vector units of a CPU, as far as the choice of kernels goes (each
// usable only when the operating system saves its registers, too).
struct CpuVectorUnits {
  bool avx = false;
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL
  bool avx512_bf16 = false;
};

// This process's CPU; all false off x86-64.
CpuVectorUnits ThisCpu();

// The name OpenBLAS gives the kernels it runs in this process ("Prescott",
// "SkylakeX", ...); empty when no OpenBLAS is loaded.
std::string BlasKernels();

// The OPENBLAS_CORETYPE for kernels `cpu` can run, picked in the order
// OpenBLAS follows for the Xeons it knows (Cooperlake with AVX-512 BF16,
// else SkylakeX with AVX-512, else Haswell with AVX2, else Sandybridge with
// AVX), when `kernels` are the Prescott ones taken for want of a known
// model; nullopt when they are any other or the CPU has no AVX.
std::optional<std::string> BetterBlasKernels(std::string_view kernels, const CpuVectorUnits& cpu);

// For a program about to exec one that links OpenBLAS, with its
// environment: unless the user set OPENBLAS_CORETYPE, loads OpenBLAS
// (libopenblas.so.0, about 30 ms) to see which kernels it picks here
// and, where BetterBlasKernels names others, sets OPENBLAS_CORETYPE to them
// and kOpenblasCoretypeChosenVariable beside it, for the exec to carry.
void ChooseBlasKernelsBeforeExec(const Environment& env);

// Call first in main(), before any thread starts, with this process's
// environment. When the user did not set OPENBLAS_CORETYPE and
// BetterBlasKernels names kernels for this process, executes it again
// (/proc/self/exe, the same arguments) with OPENBLAS_CORETYPE set to them
// and kOpenblasCoretypeChosenVariable beside it. In the program started
// so, takes both out of the environment again, so that the processes it
// starts, perhaps on other machines, choose for their own CPUs. Returns what
// went wrong, for the caller to log, when that exec failed (the process goes
// on with the kernels it has); "" otherwise.
std::string UseTheCpusBlasKernels(char** argv, const Environment& env);

}  // namespace elasticdl

#endif  // ELASTICDL_COMMON_BLAS_KERNELS_H_
