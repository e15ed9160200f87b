# SPDX-License-Identifier: Apache-2.0
# The mldiag program itself: usage and exit codes, `scan` on the real logs in
# ../shared/data/real-runs (not ours; skipped visibly where absent), `report` on the flagship
# demo's JSON Lines checked in headless Chromium.
find_package(Python3 COMPONENTS Interpreter QUIET)
set(real_runs "${PROJECT_SOURCE_DIR}/../shared/data/real-runs")
set(cli $<TARGET_FILE:mldiag_cli>)

# Usage: --help exits 0; an unknown command or option, a missing file exit 2 with one
# "mldiag:" line.
add_test(NAME tools.cli.help COMMAND ${cli} --help)
set_tests_properties(tools.cli.help PROPERTIES PASS_REGULAR_EXPRESSION "usage: mldiag <command>")
foreach(cmd scan stats diff report compare)
  add_test(NAME tools.cli.help_${cmd} COMMAND ${cli} ${cmd} --help)
  set_tests_properties(tools.cli.help_${cmd} PROPERTIES PASS_REGULAR_EXPRESSION "usage: mldiag ${cmd}.*examples:")
endforeach()
# mldiag_cli_expect_exit(<name> <exit code> <regex on the output> COMMAND args...)
function(mldiag_cli_expect_exit name code regex)
  add_test(NAME tools.cli.${name}
           COMMAND ${CMAKE_COMMAND} -DEXPECT=${code} -DREGEX=${regex} -P ${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake
                   ${cli} ${ARGN})
endfunction()
mldiag_cli_expect_exit(no_command 2 "usage: mldiag")
mldiag_cli_expect_exit(unknown_command 2 "^mldiag: unknown command 'frobnicate'" frobnicate)
mldiag_cli_expect_exit(unknown_option 2 "^mldiag: unknown option --frob" scan --frob x.csv)
mldiag_cli_expect_exit(missing_file 2 "^mldiag: .*/no/such/log.csv" scan /no/such/log.csv)
# scan's declarations refuse what they cannot read, saying what they take.
mldiag_cli_expect_exit(scan_bad_event 2 "^mldiag: --event 3000:curriculum: expected STEP:KIND with KIND one of data" scan --event 3000:curriculum x.csv)
mldiag_cli_expect_exit(scan_bad_metric 2 "^mldiag: --metric return: expected NAME:higher or NAME:lower" scan --metric return x.csv)
mldiag_cli_expect_exit(scan_bad_objective 2 "^mldiag: --objective adversarial: expected minimized or not_progress" scan --objective adversarial x.csv)
mldiag_cli_expect_exit(scan_bad_chance 2 "^mldiag: --chance-loss -1: expected a positive loss" scan --chance-loss -1 x.csv)
mldiag_cli_expect_exit(scan_bad_floor 2 "^mldiag: --loss-floor inf: expected a finite loss, or none for a loss without a lower bound" scan --loss-floor inf x.csv)
mldiag_cli_expect_exit(missing_file_json 2 "\"exit_code\":2" scan --json /no/such/log.csv)
mldiag_cli_expect_exit(bad_threads 2 "^mldiag: --threads 0: expected a whole number" stats --threads 0 x.npy)

if(EXISTS "${real_runs}")
  # Healthy runs: exit 0, nothing at warning or above.
  foreach(file llmc_gpt2_124M_train llmc_gpt2_124M_val adamw_baseline_train adamw_baseline_val
               scaleup1b_87bd51fd_train scaleup1b_87bd51fd_val gpt2medium_val)
    add_test(NAME tools.cli.scan_healthy.${file} COMMAND ${cli} scan ${real_runs}/${file}.csv)
  endforeach()
  # `scan --all` lists episodes, as many as check_episodes.py finds by the rule itself from the
  # --json deliveries (gap 1000, docs/formats.md); on llm.c's flickering plateau (175
  # deliveries) at most a tenth as many.
  if(Python3_Interpreter_FOUND)
    add_test(NAME tools.cli.scan_episodes.llmc_gpt2_124M_train
             COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/check_episodes.py ${cli}
                     ${real_runs}/llmc_gpt2_124M_train.csv --gap 1000 --max-ratio 0.1)
    foreach(file adamw_baseline_train scaleup1b_87bd51fd_train)
      add_test(NAME tools.cli.scan_episodes.${file}
               COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/check_episodes.py ${cli}
                       ${real_runs}/${file}.csv --gap 1000)
    endforeach()
  endif()
  # The documented BigScience events, with the right symptom and step (exit 1: found).
  if(Python3_Interpreter_FOUND)
    add_test(NAME tools.cli.scan_bigscience
             COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:mldiag_cli> -DPYTHON=${Python3_EXECUTABLE}
                     -DLOG=${real_runs}/bigscience_spike_excerpts.csv -DOUT=${CMAKE_CURRENT_BINARY_DIR}/bigscience.json
                     -DCHECK=${CMAKE_CURRENT_LIST_DIR}/check_scan.py -P ${CMAKE_CURRENT_LIST_DIR}/scan_bigscience.cmake)
  endif()
else()
  add_test(NAME tools.cli.real_runs COMMAND ${CMAKE_COMMAND} -E echo "mldiag: ${real_runs} not found: the real-log scans are skipped")
  set_tests_properties(tools.cli.real_runs PROPERTIES SKIP_REGULAR_EXPRESSION "skipped")
endif()

# TensorBoard event files the check writes with its own framing and CRC-32C: tags no alias
# maps (refused, the tags listed, --column suggested), the same read with --column, the file
# cut inside its last record (read, with a note), a damaged record (refused).
if(Python3_Interpreter_FOUND)
  add_test(NAME tools.cli.scan_tensorboard
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/check_tensorboard_cli.py ${cli}
                   ${CMAKE_CURRENT_BINARY_DIR}/tensorboard_cli)
endif()

# The flagship demo's HTML report: `mldiag report` on its JSON Lines writes the same page the
# demo wrote, and headless Chromium shows the planted fault (blocks.1's residual branch x30 from
# step 100, found from step 100) on the loss curve and on blocks.1's rows of the heatmap,
# and on no other block's; one marker and one table row per episode of its JSON Lines, and the
# legend. The screenshot stays at build/examples/flagship/demo/report.png.
if(TARGET mldiag_demo AND TARGET mldiag::torch AND Python3_Interpreter_FOUND)
  set(demo_dir "${PROJECT_BINARY_DIR}/examples/flagship/demo")
  mldiag_cli_expect_exit(report_demo 1 "wrote .*report-cli.html \\(300 steps" report ${demo_dir}/run.jsonl -o ${demo_dir}/report-cli.html)
  set_tests_properties(tools.cli.report_demo PROPERTIES FIXTURES_REQUIRED mldiag_demo_run FIXTURES_SETUP mldiag_demo_report)
  add_test(NAME tools.cli.report_demo_same COMMAND ${CMAKE_COMMAND} -E compare_files ${demo_dir}/report.html ${demo_dir}/report-cli.html)
  set_tests_properties(tools.cli.report_demo_same PROPERTIES FIXTURES_REQUIRED mldiag_demo_report)
  add_test(NAME tools.cli.report_demo_chromium
           COMMAND Python3::Interpreter ${PROJECT_SOURCE_DIR}/tests/report/check_html.py ${demo_dir}/report-cli.html
                   --screenshot ${demo_dir}/report.png
                   --expect-marker "step=100,tensor=blocks.1.qkv.weight,symptom=residual write ratio too large"
                   --expect-marker "step=100,tensor=blocks.1.proj.weight,symptom=residual write ratio too large"
                   --expect-no-marker "tensor=blocks.0,symptom=residual write ratio too large"
                   --expect-no-marker "tensor=blocks.2,symptom=residual write ratio too large"
                   --expect-no-marker "tensor=blocks.3,symptom=residual write ratio too large"
                   --jsonl ${demo_dir}/run.jsonl --gap 1000 --expect-legend)
  set_tests_properties(tools.cli.report_demo_chromium PROPERTIES FIXTURES_REQUIRED mldiag_demo_report SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

# `mldiag stats --json` against numpy itself, on the files numpy wrote for the checkpoint
# tests (tools_checkpoint.generate): every dtype numpy writes, both byte orders, Fortran
# order, stored and compressed .npz, a 0-d scalar, an empty tensor.
if(mldiag_ckpt_python)
  set(npy_files "")
  foreach(f le_f2 le_f4 le_f8 be_f2 be_f4 be_f8 le_i1 le_i2 le_i4 le_i8 be_i2 be_i4 be_i8 le_u1 le_u2 le_u4 le_u8
            be_u2 be_u4 be_u8 le_b1 fortran scalar empty)
    list(APPEND npy_files ${mldiag_ckpt_data}/${f}.npy)
  endforeach()
  add_test(NAME tools.cli.stats_numpy
           COMMAND ${mldiag_ckpt_python} ${CMAKE_CURRENT_LIST_DIR}/check_stats.py $<TARGET_FILE:mldiag_cli>
                   ${npy_files} ${mldiag_ckpt_data}/stored.npz ${mldiag_ckpt_data}/compressed.npz)
  set_tests_properties(tools.cli.stats_numpy PROPERTIES FIXTURES_REQUIRED mldiag_ckpt_data SKIP_RETURN_CODE 77)
endif()
# `mldiag compare` on activation dumps make_checkpoints.py writes: bf16 copies of an fp32
# reference are within tolerance (exit 0); layer 2's attention scaled by 1.25 from position 3
# is found there, as a scale mismatch (exit 1); a dump against a fingerprint file is refused.
if(mldiag_ckpt_python)
  mldiag_cli_expect_exit(compare_dumps_healthy 0 "no row diverged"
                         compare ${mldiag_ckpt_data}/act_ref.safetensors ${mldiag_ckpt_data}/act_bf16.safetensors)
  mldiag_cli_expect_exit(compare_dumps_fault 1 "first divergent: blocks.2.attn at prefill position 3 .request 0.: scale mismatch"
                         compare ${mldiag_ckpt_data}/act_ref.safetensors ${mldiag_ckpt_data}/act_fault.safetensors)
  mldiag_cli_expect_exit(compare_dumps_json 1 "\"layer\":\"blocks.2.attn\",\"request\":0,\"position\":3"
                         compare --json ${mldiag_ckpt_data}/act_ref.safetensors ${mldiag_ckpt_data}/act_fault.safetensors)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/not-fingerprints.jsonl "{\"step\": 1}\n")
  mldiag_cli_expect_exit(compare_mixed 2 "^mldiag: compare: one file is a fingerprint file and the other an activation dump"
                         compare ${CMAKE_CURRENT_BINARY_DIR}/not-fingerprints.jsonl ${mldiag_ckpt_data}/act_ref.safetensors)
  mldiag_cli_expect_exit(compare_bad_jsonl 2 "^mldiag: .*not-fingerprints.jsonl:1: not a fingerprint line"
                         compare ${CMAKE_CURRENT_BINARY_DIR}/not-fingerprints.jsonl ${CMAKE_CURRENT_BINARY_DIR}/not-fingerprints.jsonl)
  foreach(t compare_dumps_healthy compare_dumps_fault compare_dumps_json compare_mixed)
    set_tests_properties(tools.cli.${t} PROPERTIES FIXTURES_REQUIRED mldiag_ckpt_data SKIP_RETURN_CODE 77)
  endforeach()
endif()
mldiag_cli_expect_exit(compare_one_file 2 "^mldiag: compare needs two files" compare a.jsonl)
# Fingerprint files: the fuzzer's seed (written by fingerprint_recorder) against itself is clean;
# a count that is no whole number (2.2e66, which nlohmann would cast to an integer with undefined
# behaviour; fuzz_fingerprints found it) is refused.
set(fp_seed ${PROJECT_SOURCE_DIR}/fuzz/corpus/fingerprints/seed.jsonl)
mldiag_cli_expect_exit(compare_fingerprints_self 0 "5 rows matched .0 unmatched., 0 diverged" compare ${fp_seed} ${fp_seed})
file(READ ${fp_seed} fp_text)
string(REGEX REPLACE "\"count\":16" "\"count\":2.2e66" fp_bad "${fp_text}")
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/bad-count.jsonl "${fp_bad}")
mldiag_cli_expect_exit(compare_fingerprints_bad_count 2 "^mldiag: .*bad-count.jsonl:1: 'count' must be a whole number"
                       compare ${CMAKE_CURRENT_BINARY_DIR}/bad-count.jsonl ${fp_seed})

# Bad checkpoints through the tool: one "mldiag:" line naming the file, exit code 2.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/not-a-checkpoint.safetensors "step,loss\n1,2\n")
mldiag_cli_expect_exit(stats_bad_file 2 "^mldiag: .*not-a-checkpoint.safetensors: .*text" stats ${CMAKE_CURRENT_BINARY_DIR}/not-a-checkpoint.safetensors)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/empty.csv "")
mldiag_cli_expect_exit(scan_empty_log 2 "^mldiag: .*empty.csv" scan ${CMAKE_CURRENT_BINARY_DIR}/empty.csv)
