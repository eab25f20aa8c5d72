# Sourced by strata's scripts: the environment a strata process needs before it starts.
# OpenBLAS reads OPENBLAS_CORETYPE when it loads, and on virtual machines it often detects an old
# core ("Prescott") and runs 3-4x slower, so name the core the CPU actually has.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  if grep -qw avx512f /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
# strata splits each batch over its own threads and runs the kernels single-threaded inside them;
# idle OpenMP threads must not spin against those workers.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
