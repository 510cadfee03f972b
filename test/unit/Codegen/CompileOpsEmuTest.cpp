// Every op of the op set through the GPU kernel generator, executed by the
// host emulation of the GPU (every work-item of every workgroup, barriers
// and LDS honoured), compared with the reference interpreter: the same
// cases, inputs and tolerances as the CPU backend's CompileOpsTest.cpp.
//
// Where the GPU kernels differ from the CPU ones the tolerances still hold:
// reductions combine partial sums in a tree (in double, as on the CPU) and
// matmul/conv accumulate in f32 with fused multiply-adds (kF32Acc).
#include "maxc/Codegen/CompiledRun.h"

#define MAXC_COMPILED_RUN(graph, inputs) maxc::run_gpu_emulated(graph, inputs)
#define MAXC_COMPILED_NAME(text) "gpu-emu: " text
#define MAXC_COMPILED_TAGS "[codegen][gpu-emu]"
#include "CompileOpsTest.cpp"
