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
set(MAXC_LAYER_Interpreter Ops Realization Tensor IR Support)
set(MAXC_LAYER_Transforms Ops Realization Tensor IR Support)
set(MAXC_LAYER_Frontend Interpreter Ops Realization Tensor IR Support)
set(MAXC_LAYER_Codegen Transforms Interpreter Ops Realization Tensor IR Support)
set(MAXC_LAYER_Driver Codegen Frontend Transforms Interpreter Ops Realization Tensor IR Support)

# No upward edge is left: where a lower component needs a higher one (Graph
# checks nodes with the op registry; an eager context runs the interpreter),
# the lower one declares a hook and lib/<Higher>/Install*.cpp fills it.
# Tensor's operators are defined in lib/Ops, Tensor::realize and
# Tensor::from_graph_value in lib/Realization.
