#!/bin/bash
# store_kill_stress.sh [RUNS] - the kill -9 test with more runs (default
# 200), for use by hand: STORE_TEST_BIN as for t_store_kill.sh.
STORE_KILL_RUNS=${1:-200} exec "$(dirname "$0")/t_store_kill.sh"
