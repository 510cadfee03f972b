// Every op of the op set through the GPU kernel generator, executed by the
// host emulation of the GPU (every work-item of every workgroup, barriers
// and LDS honoured), compared with the reference interpreter: the same
// cases, inputs and tolerances as the CPU backend's CompileOpsTest.cpp.
//
// Where the GPU kernels differ from the CPU ones the tolerances still hold:
// reductions (gfx942: per work-item, a wave butterfly, then the waves)
// accumulate f32 in f32 where the CPU and the reference use double (the
// cases' f32 sums are short or exact: kF32Math and the reductions' 1e-6
// hold), and matmul/conv accumulate in f32 with fused multiply-adds (kF32Acc).
#include "maxc/Codegen/CompiledRun.h"

#define MAXC_COMPILED_RUN(graph, inputs) maxc::run_gpu_emulated(graph, inputs)
#define MAXC_COMPILED_NAME(text) "gpu-emu: " text
#define MAXC_COMPILED_TAGS "[codegen][gpu-emu]"
#include "CompileOpsTest.cpp"
