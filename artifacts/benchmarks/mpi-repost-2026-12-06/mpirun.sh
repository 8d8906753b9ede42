#!/bin/bash
# usage: mpirun.sh BIN [extra mpirun args...] -- [bench args]
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe OMPI_MCA_btl_vader_single_copy_mechanism=none
BIN=$1; shift
MARGS=(); while [ $# -gt 0 ] && [ "$1" != "--" ]; do MARGS+=("$1"); shift; done; shift
if [ -z "$BIND" ]; then export OMPI_MCA_hwloc_base_binding_policy=none; fi
mpirun "${MARGS[@]}" -n 2 --oversubscribe $BIN --bench "$@"
