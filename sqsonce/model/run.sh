#!/usr/bin/env bash
# Runs spin on the lock protocol's model (dedupe.pml; see README.md here).
#
#   run.sh check     the correct model, exhaustively, in each configuration
#                    below: fails unless every search ends with "errors: 0"
#                    and a complete search (invalid end states included)
#   run.sh mutants   every seeded bug: fails unless each one is caught
#   run.sh all       both, in one pool of searches (what make test runs)
#
# Extra spin flags may follow (run.sh check -DLOCK=2; run.sh check -DTX
# -DMUTANT_TX_RELEASE_UNKNOWN runs a variant through the exhaustive search). MODEL_TRAILS=1 prints
# the counterexample of every mutant too. Everything spin and gcc write goes
# to a temporary directory, removed on exit.
#
# The searches run MODEL_JOBS at a time (the number of CPUs by default); each
# one's output is kept and printed in the order of the lists below. A passing
# verdict is cached (see "The cache" below): MODEL_CACHE=0 searches again.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
model="$here/dedupe.pml"
self="$here/$(basename "$0")"

# Configurations of the exhaustive search: Do calls, clock ticks, faults;
# the plain completion's, then the transactional one's (-DTX, a smaller
# state space: tx covers time and calls together), then the emits' (-DEMIT,
# over each completion: emit-tx has two faults, so that a fault of the relay
# can follow another).
configs=(
  "time:-DMAXDO=3 -DMAXT=3 -DMAXFAULT=1"
  "faults:-DMAXDO=3 -DMAXT=2 -DMAXFAULT=2"
  "calls:-DMAXDO=4 -DMAXT=2 -DMAXFAULT=1"
  "tx:-DTX -DMAXDO=4 -DMAXT=3 -DMAXFAULT=1"
  "tx-faults:-DTX -DMAXDO=3 -DMAXT=2 -DMAXFAULT=2"
  "emit:-DEMIT -DMAXDO=3 -DMAXT=2 -DMAXFAULT=1"
  "emit-tx:-DEMIT -DTX -DMAXDO=3 -DMAXT=2 -DMAXFAULT=2"
)
# The order the searches start in, longest first, so that the last one to
# finish is a short one (it changes no result, only the wall time). A
# configuration not named here starts after these, before the mutants.
longest_first="emit-tx faults tx calls tx-faults time emit"

# The mutants run in the smallest configuration that reaches every one. See
# README.md, "Mutants", for what each one breaks. An entry is the mutant's
# name, then any other flags it needs (-DTX: a bug of the transactional
# completion; -DEMIT: of the emits, each run with the plain completion and,
# where it applies to both, with -DTX too; MUTANT_EMIT_MARK_UNCONDITIONAL
# needs a completion's window to end within the run, which -DTX's does not).
mutant_config="-DMAXDO=3 -DMAXT=2 -DMAXFAULT=1"
mutants=(
  MUTANT_NO_OWN_CHECK
  MUTANT_UNCONDITIONAL_COMPLETE
  MUTANT_UNCONDITIONAL_RELEASE
  MUTANT_UNCONDITIONAL_RENEW
  MUTANT_ZERO_OUTCOME_SUCCESS
  MUTANT_NO_FENCE_INCREMENT
  MUTANT_DELETE_BEFORE_FORWARD
  MUTANT_FENCE_RESET_ON_DELETE
  MUTANT_RELEASE_DELETES
  "MUTANT_TX_COMMIT_NO_OWNER -DTX"
  "MUTANT_TX_COMMIT_UNCONDITIONAL -DTX"
  "MUTANT_TX_EFFECT_OUTSIDE -DTX"
  "MUTANT_TX_REPEAT_APPLIES -DTX"
  "MUTANT_TX_RELEASE_UNKNOWN -DTX -DMUTANT_RELEASE_OWNER_ONLY"
  "MUTANT_TX_UNKNOWN_PROCESSED -DTX"
  "MUTANT_EMIT_SEND_BEFORE_COMMIT -DEMIT"
  "MUTANT_EMIT_SEND_BEFORE_COMMIT -DEMIT -DTX"
  "MUTANT_EMIT_ID_CHANGES -DEMIT"
  "MUTANT_EMIT_ID_CHANGES -DEMIT -DTX"
  "MUTANT_EMIT_MARK_BEFORE_SEND -DEMIT"
  "MUTANT_EMIT_MARK_BEFORE_SEND -DEMIT -DTX"
  "MUTANT_EMIT_DELETE_PENDING -DEMIT"
  "MUTANT_EMIT_DELETE_PENDING -DEMIT -DTX"
  "MUTANT_EMIT_MARK_UNCONDITIONAL -DEMIT"
  "MUTANT_EMIT_TAKEOVER_KEEPS_OUTBOX -DEMIT"
  "MUTANT_EMIT_UNRECORDED_DELETES -DEMIT"
)

# How pan is built and run. -DSAFETY: every property is an assertion or an
# end state (no never claim), so pan leaves out its cycle detection. -m: the
# search depth (the deepest run is about 120 steps, 140 with -DEMIT); pan
# stops at the first error. None of the options below changes what is
# searched: the state store stays exact (no bitstate, no hash compaction),
# and `complete` below checks every search's report.
#
# check: the long searches. -Og compiles pan.c in a quarter of -O2's time
# and makes a search about 20% slower: less CPU in all at these sizes.
# -DNOCOMP stores each state as it is, without the byte masking that saves
# a quarter of the memory (2 GB in emit-tx instead of 1.6 GB): 15% faster.
# (-DCOLLAPSE, which would halve the memory, doubles the time.)
check_cc=(-Og -DNOCOMP)
check_pan=()
# mutants: the searches stop at the first error, within a second, so
# compiling pan.c is most of their time: -O0 (1 s). -w20: a hash table of
# 2^20 slots to begin with (pan's default is 2^24, 128 MB to clear for a few
# thousand states); it grows as the states do, and stays exact.
mutant_cc=(-O0)
mutant_pan=(-w20)

command -v spin >/dev/null 2>&1 || { echo "spin is not installed: apt-get install -y spin" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || { echo "gcc is not installed: apt-get install -y gcc" >&2; exit 1; }

mode="${1:-}"
[ "$#" -gt 0 ] && shift
extra=("$@")
case "$mode" in
check | mutants | all) ;;
*)
  echo "usage: $0 check|mutants|all [spin -D flags...]" >&2
  exit 2
  ;;
esac

# The cache: a passing verdict (errors: 0 on a complete search; a mutant
# caught) is a file named by the hash of everything it depends on: the
# model, this script (its lists and flags), the job's own flags, and the
# versions of spin and gcc. A failure is never cached, so it is searched
# again each time. MODEL_CACHE=0 searches every job (the cache is neither
# read nor written); MODEL_CACHE_DIR moves it.
cache="${MODEL_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-}/.cache}/sqs-once/model}"
use_cache="${MODEL_CACHE:-1}"
if [ "$use_cache" != "0" ] && { [ -z "${MODEL_CACHE_DIR:-}${XDG_CACHE_HOME:-}${HOME:-}" ] || ! mkdir -p "$cache" 2>/dev/null; }; then
  echo "model: no cache (cannot create $cache): searching" >&2
  use_cache=0
fi
hash_of() { sha256sum | cut -d' ' -f1; }
base_key="$({
  sha256sum <"$model"
  sha256sum <"$self"
  spin -V 2>&1
  gcc --version 2>&1
} | hash_of)"

jobs="${MODEL_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}"
case "$jobs" in '' | *[!0-9]* | 0) jobs=1 ;; esac

work="$(mktemp -d "${TMPDIR:-/tmp}/dedupe-model.XXXXXX")"
# cleanup stops the searches still running (pids[i] is job i's process
# group; finished[i] is set once it has ended) and removes the directory.
pids=()
finished=()
cleanup() {
  local i
  set +m # no "Terminated" notices for the jobs stopped here
  for i in "${!pids[@]}"; do
    [ -n "${finished[$i]:-}" ] || kill -TERM -- "-${pids[$i]}" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# verify FLAGS...: builds pan with FLAGS and runs it, in the job's directory;
# pan's output is in pan.out.
verify() {
  spin -a "$@" dedupe.pml >spin.out 2>&1 || { cat spin.out >&2; return 2; }
  gcc "${cc[@]}" -w -DSAFETY -DMEMLIM=4096 -o pan pan.c >gcc.out 2>&1 || { cat gcc.out >&2; return 2; }
  ./pan -m2000 "${pan_opts[@]+"${pan_opts[@]}"}" >pan.out 2>&1 || true
}

# errors prints the error count of pan.out, or nothing if pan did not finish.
errors() { sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' pan.out | head -1; }
states() { sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out | head -1; }

# complete fails unless pan.out is a complete search that checked assertions
# and invalid end states (unreached-code reports are not errors).
complete() {
  local bad=0
  grep -q 'assertion violations[[:space:]]*+' pan.out || { echo "  pan did not check assertions" >&2; bad=1; }
  grep -q 'invalid end states[[:space:]]*+' pan.out || { echo "  pan did not check invalid end states" >&2; bad=1; }
  if grep -Eq 'max search depth too small|reached -DMEMLIM bound|out of memory|search not completed' pan.out; then
    echo "  the search is incomplete:" >&2
    grep -E 'max search depth too small|MEMLIM|out of memory|search not completed' pan.out | sed 's/^/    /' >&2
    bad=1
  fi
  return "$bad"
}

# caught_by names the property of pan.out's first error.
caught_by() {
  local line
  line="$(grep -m1 -E '^pan:1: ' pan.out || true)"
  case "$line" in
    *'assertion violated'*) sed -E 's/.*assertion violated \(+([a-z_]+)\|\|.*/\1/' <<<"$line" ;;
    *'invalid end state'*) echo "d_no_deadlock (invalid end state)" ;;
    *) echo "${line:-unknown}" ;;
  esac
}

# trail prints the counterexample's story from the trail pan wrote.
trail() {
  spin -t "$@" dedupe.pml 2>&1 |
    grep -E 'MSC:|assertion violated|text of failed assertion|invalid end state' |
    sed -E 's/^[[:space:]]*(MSC: )?/      /'
}

# The jobs: job_kind[i] is check or mutant, job_name[i] its configuration or
# mutant, job_flags[i] its spin flags (extra ones included), job_note[i] a
# mutant's own flags, as printed.
job_kind=() job_name=() job_flags=() job_note=()
if [ "$mode" != "mutants" ]; then
  for c in "${configs[@]}"; do
    job_kind+=(check) job_name+=("${c%%:*}") job_flags+=("${c#*:}${extra[*]:+ ${extra[*]}}") job_note+=("")
  done
fi
if [ "$mode" != "check" ]; then
  for entry in "${mutants[@]}"; do
    read -r m mflags <<<"$entry"
    job_kind+=(mutant) job_name+=("$m") job_flags+=("$mutant_config -D$m${mflags:+ $mflags}${extra[*]:+ ${extra[*]}}") job_note+=("$mflags")
  done
fi
n="${#job_kind[@]}"

# job_key I: the cache file of job I's verdict.
job_key() {
  local cc pan
  if [ "${job_kind[$1]}" = check ]; then cc="${check_cc[*]}" pan="${check_pan[*]-}"; else cc="${mutant_cc[*]}" pan="${mutant_pan[*]}"; fi
  printf '%s\n' "$base_key" "${job_kind[$1]}" "${job_name[$1]}" "${job_flags[$1]}" "$cc" "$pan" | hash_of
}

# run_job I: job I's search, in its own directory; its report goes to
# stdout and stderr, its verdict (pass or fail) to the file verdict there.
run_job() {
  local i="$1" s=$SECONDS name="${job_name[$1]}" key="" hit nerr flags
  local dir="$work/job.$i"
  mkdir "$dir" && cp "$model" "$dir/dedupe.pml" && cd "$dir" || return 1
  read -r -a flags <<<"${job_flags[$i]}"
  if [ "$use_cache" != "0" ]; then
    key="$cache/$(job_key "$i")"
    # MODEL_TRAILS=1 wants the mutants' counterexamples, which only a search prints.
    if [ -f "$key" ] && { [ "${job_kind[$i]}" = check ] || [ "${MODEL_TRAILS:-0}" != "1" ]; }; then
      hit="$(cat "$key")"
      if [ "${job_kind[$i]}" = check ]; then
        echo "model [$name: ${job_flags[$i]}]: errors: 0, $hit states (cached)"
      else
        echo "caught   $name${job_note[$i]:+ (${job_note[$i]})}: $hit, cached)"
      fi
      echo pass >verdict
      return 0
    fi
  fi
  if [ "${job_kind[$i]}" = check ]; then
    cc=("${check_cc[@]}") pan_opts=("${check_pan[@]+"${check_pan[@]}"}")
    verify "${flags[@]}" || { echo "FAIL: model [$name]: did not build" >&2; echo fail >verdict; return 0; }
    nerr="$(errors)"
    if [ "$nerr" = "0" ] && complete; then
      echo "model [$name: ${job_flags[$i]}]: errors: 0, $(states) states, $((SECONDS - s))s"
      echo pass >verdict
      [ -z "$key" ] || { states >"$key.$$" && mv "$key.$$" "$key"; } || true
    else
      echo "FAIL: model [$name: ${job_flags[$i]}]: errors: ${nerr:-none reported}" >&2
      grep -E '^pan:|errors:' pan.out | head -5 | sed 's/^/  /' >&2
      [ -n "$nerr" ] && [ "$nerr" != "0" ] && { echo "  counterexample:" >&2; trail "${flags[@]}" >&2; }
      echo fail >verdict
    fi
  else
    cc=("${mutant_cc[@]}") pan_opts=("${mutant_pan[@]}")
    verify "${flags[@]}" || { echo "SURVIVED $name: did not build" >&2; echo fail >verdict; return 0; }
    nerr="$(errors)"
    if [ -n "$nerr" ] && [ "$nerr" != "0" ]; then
      hit="$(caught_by) ($(states) states"
      echo "caught   $name${job_note[$i]:+ (${job_note[$i]})}: $hit, $((SECONDS - s))s)"
      [ "${MODEL_TRAILS:-0}" = "1" ] && trail "${flags[@]}"
      echo pass >verdict
      [ -z "$key" ] || { echo "$hit" >"$key.$$" && mv "$key.$$" "$key"; } || true
    else
      echo "SURVIVED $name${job_note[$i]:+ (${job_note[$i]})}: pan found no error" >&2
      echo fail >verdict
    fi
  fi
}

# The pool: up to $jobs searches at a time, each a background job in a
# process group of its own (set -m), so that cleanup stops its spin, gcc and
# pan too. A finished job writes its number to a FIFO, which the loop
# below reads to start the next one and to print, in order, every report
# that is complete.
set -m
mkfifo "$work/done"
exec 3<>"$work/done"

# The start order: the configurations longest first, then the mutants
# (MUTANT_NO_OWN_CHECK, the longest of theirs, first).
order=()
for name in $longest_first; do
  for ((i = 0; i < n; i++)); do
    if [ "${job_kind[$i]}" = check ] && [ "${job_name[$i]}" = "$name" ]; then order+=("$i"); fi
  done
done
for ((i = 0; i < n; i++)); do
  if [ "${job_kind[$i]}" = check ] && [[ " $longest_first " == *" ${job_name[$i]} "* ]]; then continue; fi
  order+=("$i")
done

t0=$SECONDS
started=0 running=0 printed=0
failed_checks=() survivors=()
start_next() {
  local i="${order[$started]}"
  # A job that ends without writing its verdict has failed.
  (run_job "$i" >"$work/out.$i" 2>"$work/err.$i" </dev/null; echo "$i" >&3) &
  pids[$i]=$!
  started=$((started + 1)) running=$((running + 1))
}
while [ "$printed" -lt "$n" ]; do
  while [ "$running" -lt "$jobs" ] && [ "$started" -lt "$n" ]; do start_next; done
  read -r i <&3
  finished[$i]=1
  running=$((running - 1))
  while [ "$printed" -lt "$n" ] && [ -n "${finished[$printed]:-}" ]; do
    cat "$work/out.$printed"
    cat "$work/err.$printed" >&2
    if [ "$(cat "$work/job.$printed/verdict" 2>/dev/null)" != pass ]; then
      if [ "${job_kind[$printed]}" = check ]; then failed_checks+=("${job_name[$printed]}"); else survivors+=("${job_name[$printed]}${job_note[$printed]:+ (${job_note[$printed]})}"); fi
    fi
    printed=$((printed + 1))
  done
done
wait

case "$mode" in
check) echo "model: $((SECONDS - t0))s in all, $jobs at a time" ;;
mutants) echo "model-mutants: $((SECONDS - t0))s in all, $jobs at a time" ;;
all) echo "model and model-mutants: $((SECONDS - t0))s in all, $jobs at a time" ;;
esac
status=0
if [ "${#failed_checks[@]}" -gt 0 ]; then
  echo "FAIL: model: errors or an incomplete search in: ${failed_checks[*]}" >&2
  status=1
fi
if [ "${#survivors[@]}" -gt 0 ]; then
  echo "FAIL: mutants not caught: ${survivors[*]}" >&2
  status=1
fi
exit "$status"
