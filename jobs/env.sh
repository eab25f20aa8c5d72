# Sourced by strata's scripts: the environment a strata process needs before it starts.
# strata splits each batch over its own threads and runs oneDNN's kernels single-threaded inside
# them; idle OpenMP threads must not spin against those workers.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
