# The components of lib/ and what each may use (its own headers always), as
# a DAG from the bottom up. lib/CMakeLists.txt links each component library
# to exactly these; cmake/MaxcCheckLayers.cmake fails the build when a file
# of lib/<C>/ or include/maxc/<C>/ includes a component C may not use.
set(MAXC_COMPONENTS Support IR Tensor Realization Ops Interpreter Transforms Frontend Codegen Driver)
set(MAXC_LAYER_Support)
set(MAXC_LAYER_IR Support)
set(MAXC_LAYER_Tensor IR Support)
set(MAXC_LAYER_Realization Tensor IR Support)
set(MAXC_LAYER_Ops Realization Tensor IR Support)
set(MAXC_LAYER_Interpreter Ops IR Support)
set(MAXC_LAYER_Transforms Ops Realization Tensor IR Support)
set(MAXC_LAYER_Frontend Interpreter Ops Realization Tensor IR Support)
set(MAXC_LAYER_Codegen Transforms Interpreter Ops Realization Tensor IR Support)
set(MAXC_LAYER_Driver Codegen Frontend Transforms Interpreter Ops Realization Tensor IR Support)

# Upward edges that remain (a cycle Tensor → Ops → Realization → Interpreter
# → Ops, Tensor → Realization): Tensor's operators call the op functions and
# Tensor::realize() asks its realization context; the eager context runs
# the interpreter. Listed so the check lets exactly these through; remove
# an entry when its include is gone.
set(MAXC_LAYER_CYCLE_Tensor Ops Realization)
set(MAXC_LAYER_CYCLE_Realization Interpreter)
