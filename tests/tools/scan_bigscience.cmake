# SPDX-License-Identifier: Apache-2.0
# `mldiag scan --json --group-by section` on the BigScience logbook excerpts: exit code 1
# (something found) and each documented event with its symptom and step (check_scan.py).
execute_process(COMMAND ${CLI} scan --json --group-by section ${LOG} RESULT_VARIABLE rc OUTPUT_FILE ${OUT} ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "mldiag scan exited ${rc}, expected 1 (findings): ${err}")
endif()
execute_process(COMMAND ${PYTHON} ${CHECK} ${OUT} --exit-code 1
  --expect "2022-04-12 First lm loss spike|exploding gradients|31215|31219"
  --expect "A huge lm loss spike|loss spike|29050|29050|critical"
  --expect "Experiment 2|sustained loss increase|6920|6940"
  --expect "Analyzing Spike|exploding gradients|11447|11447"
  --expect "Experiment 12|missing loss value|9027|9027|critical"
  --expect "Embed-Norm Experiment 7|loss spike|17062|17062"
  --expect "Embed-Norm Experiment 7|loss scale halving step after step|17064|17068"
  RESULT_VARIABLE check)
if(NOT check EQUAL 0)
  message(FATAL_ERROR "the documented events were not all found (see above)")
endif()
