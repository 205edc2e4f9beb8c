#!/usr/bin/env bash
# Runs spin on the lock protocol's model (dedupe.pml; see README.md here).
#
#   run.sh check     the correct model, exhaustively, in each configuration
#                    below: fails unless every search ends with "errors: 0"
#                    and a complete search (invalid end states included)
#   run.sh mutants   every seeded bug: fails unless each one is caught
#
# Extra spin flags may follow (run.sh check -DLOCK=2; run.sh check -DTX
# -DMUTANT_TX_RELEASE_UNKNOWN runs a variant through the exhaustive search). MODEL_TRAILS=1 prints
# the counterexample of every mutant too. Everything spin and gcc write goes
# to a temporary directory, removed on exit.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
model="$here/dedupe.pml"

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

command -v spin >/dev/null 2>&1 || { echo "spin is not installed: apt-get install -y spin" >&2; exit 1; }
command -v gcc >/dev/null 2>&1 || { echo "gcc is not installed: apt-get install -y gcc" >&2; exit 1; }

mode="${1:-}"
[ "$#" -gt 0 ] && shift
extra=("$@")

work="$(mktemp -d "${TMPDIR:-/tmp}/dedupe-model.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/dedupe.pml"
cd "$work"

# verify FLAGS...: builds pan with FLAGS and runs it; its output is in pan.out.
# cc_opt is gcc's optimisation: -O2 for the long searches of check; -O0 for the
# mutants, whose searches stop at the first error within a second or two, so
# that compiling pan.c (4 s at -O2, 1 s at -O0) is most of their time.
cc_opt=-O2
verify() {
  rm -f pan pan.* ./*.trail _spin_nvr.tmp
  spin -a "$@" dedupe.pml >spin.out 2>&1 || { cat spin.out >&2; return 2; }
  # -DSAFETY: every property is an assertion or an end state (no never
  # claim), so pan leaves out its cycle detection: 15% faster.
  gcc "$cc_opt" -w -DSAFETY -DMEMLIM=4096 -o pan pan.c >gcc.out 2>&1 || { cat gcc.out >&2; return 2; }
  # -m: search depth (the deepest run is about 120 steps, 140 with -DEMIT); stop at the first error.
  ./pan -m2000 >pan.out 2>&1 || true
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

t0=$SECONDS
case "$mode" in
check)
  failed=0
  for c in "${configs[@]}"; do
    name="${c%%:*}"; flags=(${c#*:})
    label="$name: ${flags[*]}${extra[*]:+ ${extra[*]}}"
    s=$SECONDS
    verify "${flags[@]}" "${extra[@]}" || { failed=1; continue; }
    n="$(errors)"
    if [ "$n" = "0" ] && complete; then
      echo "model [$label]: errors: 0, $(states) states, $((SECONDS - s))s"
    else
      echo "FAIL: model [$label]: errors: ${n:-none reported}" >&2
      grep -E '^pan:|errors:' pan.out | head -5 | sed 's/^/  /' >&2
      [ -n "$n" ] && [ "$n" != "0" ] && { echo "  counterexample:" >&2; trail "${flags[@]}" "${extra[@]}" >&2; }
      failed=1
    fi
  done
  echo "model: $((SECONDS - t0))s in all"
  exit "$failed"
  ;;
mutants)
  cc_opt=-O0
  survived=()
  for entry in "${mutants[@]}"; do
    s=$SECONDS
    read -r m mflags <<<"$entry"
    flags=($mutant_config "-D$m" $mflags)
    verify "${flags[@]}" "${extra[@]}" || { survived+=("$m (did not build)"); continue; }
    n="$(errors)"
    if [ -n "$n" ] && [ "$n" != "0" ]; then
      echo "caught   $m${mflags:+ ($mflags)}: $(caught_by) ($(states) states, $((SECONDS - s))s)"
      [ "${MODEL_TRAILS:-0}" = "1" ] && trail "${flags[@]}" "${extra[@]}"
    else
      echo "SURVIVED $m: pan found no error" >&2
      survived+=("$m")
    fi
  done
  echo "model-mutants: $((SECONDS - t0))s in all"
  if [ "${#survived[@]}" -gt 0 ]; then
    echo "FAIL: mutants not caught: ${survived[*]}" >&2
    exit 1
  fi
  ;;
*)
  echo "usage: $0 check|mutants [spin -D flags...]" >&2
  exit 2
  ;;
esac
